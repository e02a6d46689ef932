"""The downloads' HTTP/1.1 client (dsymfind.stores.http11) against real sockets on
127.0.0.1: servers that answer exactly the bytes a test gives, well-formed or not."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.forward_proxy import read_head

from dsymfind.stores import http11

TIMEOUTS = http11.Timeouts(connect=5.0, read=5.0, pool=5.0)
SHORT = http11.Timeouts(connect=5.0, read=0.3, pool=5.0)


class RawServer:
    """Accepts connections on 127.0.0.1 and answers each with `answer` (bytes, sent at
    once) after reading the request head; `requests` holds each request head received."""

    def __init__(self, answer: bytes, *, hold_open: bool = False) -> None:
        self.answer, self.hold_open = answer, hold_open
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            head = read_head(conn)
            self.requests.append(head)
            conn.sendall(self.answer)
            if self.hold_open:
                self._held.append(conn)
            else:
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._held:
            conn.close()
        self._listener.close()


@contextmanager
def raw_server(answer: bytes, *, hold_open: bool = False) -> Iterator[RawServer]:
    server = RawServer(answer, hold_open=hold_open)
    try:
        yield server
    finally:
        server.close()


def _client(env: dict[str, str] | None = None) -> http11.Client:
    return http11.Client(
        headers={"User-Agent": "test"},
        trust=ssl.create_default_context,
        max_connections=4,
        env=env or {},
    )


def _get(url: str, timeouts: http11.Timeouts = TIMEOUTS, **env: str) -> tuple[int, bytes, bool]:
    """(status, body, whether bytes followed the body) of a GET of `url`."""
    with _client(env).stream(http11.parse_url(url), {}, timeouts) as response:
        got = b"".join(response.pieces(timeouts.read))
        return response.status_code, got, response.bytes_past_the_body()


def test_a_chunked_body_with_extensions_and_trailers_is_decoded() -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nDigest: x\r\n\r\n"
    )
    with raw_server(answer) as server:
        assert _get(server.url + "/c") == (200, b"hello world", False)


@pytest.mark.parametrize(
    "chunks", [b"zz\r\nhello\r\n0\r\n\r\n", b"3\r\nhello\r\n0\r\n\r\n", b"5\r\nhel"]
)
def test_a_malformed_or_cut_chunked_body_is_a_protocol_error(chunks: bytes) -> None:
    with (
        raw_server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks) as server,
        pytest.raises(http11.ProtocolError),
    ):
        _get(server.url + "/c")


def test_informational_answers_before_the_final_one_are_skipped() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    with raw_server(answer) as server:
        assert _get(server.url + "/") == (200, b"ok", False)


def test_bytes_past_a_content_length_are_seen() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA"
    with raw_server(answer, hold_open=True) as server:
        status, got, past = _get(server.url + "/")
    # Read in one piece with the body: either the piece runs past the length or the rest
    # waits on the socket; both are visible to the caller.
    assert status == 200 and got.startswith(b"hello") and (past or len(got) > 5)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nBad header line\r\n\r\n",
        b"ICY 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
    ],
)
def test_a_malformed_head_is_a_protocol_error(head: bytes) -> None:
    with raw_server(head) as server, pytest.raises(http11.ProtocolError):
        _get(server.url + "/")


def test_a_body_that_ends_early_ends_the_pieces_for_the_caller_to_count() -> None:
    with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort") as server:
        assert _get(server.url + "/") == (200, b"short", False)


def test_a_body_until_the_connection_ends() -> None:
    with raw_server(b"HTTP/1.1 200 OK\r\n\r\nall of it") as server:
        assert _get(server.url + "/")[:2] == (200, b"all of it")


def test_a_stalled_server_times_out_the_read() -> None:
    with (
        raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal", hold_open=True) as server,
        pytest.raises(http11.ReadTimeout),
    ):
        _get(server.url + "/", SHORT)


def test_a_server_that_never_answers_times_out_the_head() -> None:
    with raw_server(b"", hold_open=True) as server, pytest.raises(http11.ReadTimeout):
        _get(server.url + "/", SHORT)


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(http11.ConnectError):
        _get(f"http://127.0.0.1:{port}/")


def test_the_request_line_and_headers() -> None:
    with raw_server(b"HTTP/1.1 204 No Content\r\n\r\n") as server:
        url = http11.parse_url(server.url + "/a%20b/c?x=1#fragment")
        with _client().stream(url, {"X-Token": "t", "If-Range": '"\xe9"'}, TIMEOUTS) as response:
            assert response.status_code == 204
            assert list(response.pieces(1.0)) == []
    head = server.requests[0]
    assert head.startswith(b"GET /a%20b/c?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in head
    assert b"X-Token: t\r\n" in head
    assert b'If-Range: "\xe9"\r\n' in head  # latin-1, one byte per character


def test_credentials_in_the_url_become_basic_authorization_for_it_alone() -> None:
    with raw_server(b"HTTP/1.1 204 No Content\r\n\r\n") as server:
        with_credentials = server.url.replace("http://", "http://user:p%40ss@") + "/x"
        for url, headers in ((with_credentials, {}), (with_credentials, {"authorization": "t"})):
            with _client().stream(http11.parse_url(url), headers, TIMEOUTS):
                pass
    assert b"Authorization: Basic dXNlcjpwQHNz\r\n" in server.requests[0]  # user:p@ss
    assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in server.requests[0]
    assert b"Basic" not in server.requests[1]  # the store's own header wins
    assert b"authorization: t\r\n" in server.requests[1]


@pytest.mark.parametrize("value", ["a\r\nInjected: yes", "a\nb", "\u0100"])
def test_a_header_that_cannot_be_sent_is_refused_before_connecting(value: str) -> None:
    with raw_server(b"HTTP/1.1 200 OK\r\n\r\n") as server:
        stream = _client().stream(http11.parse_url(server.url), {"X": value}, TIMEOUTS)
        with pytest.raises(http11.InvalidRequest), stream:
            pass
        assert server.requests == []


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("ftp://host/x", http11.NotHttp),
        ("http:///x", http11.NotHttp),
        ("http://host:99999/x", http11.InvalidRequest),
        ("http://host/a b", http11.InvalidRequest),
    ],
)
def test_urls_that_are_not_http_are_refused(url: str, kind: type[Exception]) -> None:
    with pytest.raises(kind):
        http11.parse_url(url)


def test_a_relative_redirect_joins_the_current_url() -> None:
    url = http11.parse_url("https://Example.com:443/a/b?q")
    assert url.origin == ("https", "example.com", 443)
    assert url.host_header == "example.com"
    assert url.join("../c").text == "https://Example.com:443/c"
    assert url.join("//other.example/d").origin == ("https", "other.example", 443)


def test_a_certificate_nobody_trusts_fails_the_handshake(tmp_path: Path) -> None:
    context, _ = ss.self_signed(tmp_path)
    with ss.SymbolServer(tls=context) as server:
        server.route("/x", ss.body(b"x"))
        with pytest.raises(http11.ConnectError) as caught:
            _get(server.url + "/x")
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
    assert server.requests == []


def test_a_trusted_certificate_serves_the_body(tmp_path: Path) -> None:
    context, cert = ss.self_signed(tmp_path)
    client = http11.Client(
        headers={},
        trust=lambda: ssl.create_default_context(cafile=cert),
        max_connections=1,
        env={},
    )
    with ss.SymbolServer(tls=context) as server:
        server.route("/x", ss.body(b"over tls"))
        url = http11.parse_url(server.url + "/x")
        with client.stream(url, {}, TIMEOUTS) as response:
            assert response.tls
            assert b"".join(response.pieces(5.0)) == b"over tls"


def test_no_proxy_names_hosts_reached_directly() -> None:
    with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ndirect") as server:
        env = {"http_proxy": "http://127.0.0.1:9", "no_proxy": "localhost,.example,127.0.0.1"}
        assert _get(server.url + "/", **env)[:2] == (200, b"direct")
    proxies = http11.Proxies(env)
    for host, proxied in (("a.example", False), ("example", False), ("other.org", True)):
        assert (proxies.for_url(http11.parse_url(f"http://{host}/")) is not None) is proxied
