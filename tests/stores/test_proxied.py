"""Downloads through a proxy (dsymfind.stores.proxied, httpx behind http11.Client): a real
proxy on 127.0.0.1 forwards http:// URLs and tunnels https:// ones, itself reached over
plain TCP or over TLS (an https:// proxy)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.forward_proxy import ForwardProxy

from dsymfind.stores import http11, proxied

TIMEOUTS = http11.Timeouts(connect=10.0, read=10.0, pool=10.0)


def _get(url: str, cafile: str | None = None, **env: str) -> tuple[int, bytes, str | None]:
    """(status, body, Content-Type) of a GET of `url` with `env` as the environment."""
    client = http11.Client(
        headers={"User-Agent": "test"},
        trust=lambda: ssl.create_default_context(cafile=cafile),
        max_connections=2,
        env=env,
        through_proxy=proxied.stream,
    )
    with client.stream(http11.parse_url(url), {"X-Token": "t"}, TIMEOUTS) as response:
        assert response.content_length is not None
        body = b"".join(response.pieces(TIMEOUTS.read))
        return response.status_code, body, response.headers.get("content-type")


def test_an_http_url_goes_through_the_proxy_with_its_credentials() -> None:
    with ss.SymbolServer() as server, ForwardProxy() as proxy:
        server.route("/x", ss.body(b"forwarded", content_type="application/octet-stream"))
        proxy_url = proxy.url.replace("http://", "http://user:p%40ss@")
        status, got, media = _get(server.url + "/x?y", HTTP_PROXY=proxy_url)
    assert (status, got, media) == (200, b"forwarded", "application/octet-stream")
    head = proxy.requests[0]
    assert head.startswith(f"GET {server.url}/x?y HTTP/1.1\r\n".encode())
    assert b"\r\nProxy-Authorization: Basic dXNlcjpwQHNz" in head  # user:p@ss
    assert b"\r\nX-Token: t" in head
    assert [r.path for r in server.requests] == ["/x?y"]


def test_an_https_url_is_tunnelled_through_the_proxy(tmp_path: Path) -> None:
    context, cert = ss.self_signed(tmp_path)
    with ss.SymbolServer(tls=context) as server, ForwardProxy() as proxy:
        server.route("/x", ss.body(b"tunnelled"))
        status, got, _ = _get(server.url + "/x", cert, ALL_PROXY=proxy.url)
    assert (status, got) == (200, b"tunnelled")
    authority = server.url.removeprefix("https://")
    assert proxy.requests[0].startswith(f"CONNECT {authority} HTTP/1.1\r\n".encode())


def test_a_proxy_reached_over_tls_carries_both_kinds_of_url(tmp_path: Path) -> None:
    context, cert = ss.self_signed(tmp_path)
    with (
        ss.SymbolServer() as plain,
        ss.SymbolServer(tls=context) as secure,
        ForwardProxy(tls=context) as proxy,
    ):
        plain.route("/x", ss.body(b"plain"))
        secure.route("/x", ss.body(b"secure"))
        env = {"HTTP_PROXY": proxy.url, "HTTPS_PROXY": proxy.url}
        assert proxy.url.startswith("https://")
        assert _get(plain.url + "/x", cert, **env)[:2] == (200, b"plain")
        assert _get(secure.url + "/x", cert, **env)[:2] == (200, b"secure")
    assert [head.split(b" ", 1)[0] for head in proxy.requests] == [b"GET", b"CONNECT"]


def test_a_proxy_refusing_the_tunnel_is_a_connect_error() -> None:
    with ForwardProxy(refuse=403) as proxy, pytest.raises(http11.ConnectError, match="proxy"):
        _get("https://symbols.invalid/x", HTTPS_PROXY=proxy.url.removeprefix("http://"))
    assert proxy.requests[0].startswith(b"CONNECT symbols.invalid:443 HTTP/1.1\r\n")


def test_no_proxy_hosts_are_fetched_directly() -> None:
    with ss.SymbolServer() as server, ForwardProxy() as proxy:
        server.route("/x", ss.body(b"direct"))
        env = {"HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"}
        assert _get(server.url + "/x", **env)[:2] == (200, b"direct")
    assert proxy.requests == []


def test_a_proxy_that_cannot_be_used_fails_the_download_rather_than_going_around_it() -> None:
    with ss.SymbolServer() as server:
        server.route("/x", ss.body(b"direct"))
        with pytest.raises(http11.InvalidRequest, match="proxy"):
            _get(server.url + "/x", HTTP_PROXY="gopher://127.0.0.1:9")
        assert server.requests == []


def test_the_downloads_client_routes_through_the_proxy_and_a_bare_client_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transfer.make_client, the downloads' client, reaches stores/proxied.py by the route it
    is given; a client made without a route says so instead of going direct."""
    from dsymfind.stores import transfer

    with ss.SymbolServer() as server, ForwardProxy() as proxy:
        server.route("/x", ss.body(b"routed"))
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        url = http11.parse_url(server.url + "/x")
        with transfer.make_client().stream(url, {}, TIMEOUTS) as response:
            assert b"".join(response.pieces(TIMEOUTS.read)) == b"routed"
        assert proxy.requests and proxy.requests[0].startswith(b"GET " + server.url.encode())
        bare = http11.Client(headers={}, trust=ssl.create_default_context, max_connections=1)
        with (
            pytest.raises(http11.InvalidRequest, match="no route through one"),
            bare.stream(url, {}, TIMEOUTS),
        ):
            pass
    assert [r.path for r in server.requests] == ["/x"]
