"""dsymfind.stores.transfer against a real HTTP server on 127.0.0.1, one fault at a time."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.symbol_server import (
    SymbolServer,
    body,
    chunked,
    endless,
    overlong,
    redirect,
    redirect_loop,
    require_auth,
    reset,
    retry_after,
    sequence,
    slow,
    stall,
    statuses,
    truncated,
)

from dsymfind import __version__
from dsymfind.stores import http11
from dsymfind.stores.base import (
    AuthFailed,
    Limits,
    NotFound,
    Terms,
    TooLarge,
    TransferError,
    Truncated,
)
from dsymfind.stores.transfer import _redirect_target, download

# Short everything, so a fault costs a fraction of a second; timing asserts get SLACK.
FAST = Limits(
    connect_timeout=1.0,
    first_byte_timeout=1.0,
    total_timeout=10.0,
    attempts=3,
    backoff_base=0.01,
    backoff_cap=0.05,
)
SLACK = 1.5
DATA = os.urandom(3 * 1024 * 1024 + 17)  # several progress steps, not a round number
DSYM_PATH = "/67E9/247C/814E/392B/A027/DBDE6748FCBF"
TOKEN_HEADERS = {"Authorization": "Bearer s3cr3t-t0ken", "X-Api-Key": "k3y-value"}


@pytest.fixture
def client_limits() -> Limits:
    return FAST


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SymbolServer]:
    root = tmp_path / "store"
    (root / DSYM_PATH.lstrip("/")).parent.mkdir(parents=True)
    (root / DSYM_PATH.lstrip("/")).write_bytes(DATA)
    with SymbolServer(root) as s:
        yield s


@pytest.fixture
def other_server() -> Iterator[SymbolServer]:
    """Another port on 127.0.0.1: another origin."""
    with SymbolServer() as s:
        yield s


@pytest.fixture
def dest(tmp_path: Path) -> str:
    staging = tmp_path / "staging"
    staging.mkdir()
    return str(staging / "download.tmp")


def no_sleep(seconds: float) -> None:
    pass


def test_success_streams_the_exact_bytes(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    result = download(client, server.url + DSYM_PATH, dest, Terms(FAST))
    assert Path(dest).read_bytes() == DATA
    assert (result.size, result.attempts, result.location) == (
        len(DATA),
        1,
        server.url + DSYM_PATH,
    )
    assert result.content_type == "application/octet-stream"
    assert not result.is_html
    sent = server.requests[0].headers
    assert sent["user-agent"] == f"dsymfind/{__version__}"
    assert sent["accept-encoding"] == "identity"


def test_chunked_body_without_length(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route("/chunked", chunked(DATA))
    assert download(client, server.url + "/chunked", dest, Terms(FAST)).size == len(DATA)
    assert Path(dest).read_bytes() == DATA


def test_server_error_then_success_is_retried(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, statuses(500))
    result = download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert result.attempts == 2
    assert server.count(DSYM_PATH) == 2
    assert Path(dest).read_bytes() == DATA


@pytest.mark.parametrize("status", [404, 410])
def test_not_found_is_asked_once(
    client: http11.Client, server: SymbolServer, dest: str, status: int
) -> None:
    server.route("/missing", statuses(status))
    with pytest.raises(NotFound) as caught:
        download(client, server.url + "/missing", dest, Terms(FAST), sleep=no_sleep)
    assert (caught.value.status, caught.value.retryable) == (status, False)
    assert server.count("/missing") == 1


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_asked_once(
    client: http11.Client, server: SymbolServer, dest: str, status: int
) -> None:
    server.route(DSYM_PATH, statuses(status))
    with pytest.raises(AuthFailed) as caught:
        download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert (caught.value.status, caught.value.retryable) == (status, False)
    assert server.count(DSYM_PATH) == 1


def test_retry_after_is_honoured_up_to_the_cap(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, sequence(retry_after(1), retry_after(3600, status=503), body(DATA)))
    waits: list[float] = []
    limits = Limits(backoff_cap=2.0)
    result = download(client, server.url + DSYM_PATH, dest, Terms(limits), sleep=waits.append)
    assert waits == [1.0, 2.0]
    assert result.attempts == 3


def test_backoff_is_full_jitter_exponential(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, statuses(503, 502, 504))
    waits: list[float] = []
    limits = Limits(attempts=4, backoff_base=1.0, backoff_cap=3.0)
    download(client, server.url + DSYM_PATH, dest, Terms(limits), sleep=waits.append)
    assert len(waits) == 3
    for wait, ceiling in zip(waits, [1.0, 2.0, 3.0], strict=True):
        assert 0 <= wait <= ceiling


def test_retries_stop_after_attempts(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, body(b"", 503))
    with pytest.raises(TransferError) as caught:
        download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert (caught.value.status, caught.value.retryable) == (503, True)
    assert server.count(DSYM_PATH) == FAST.attempts


def test_truncated_body_is_retried_then_reported(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, truncated(DATA, 1000))
    with pytest.raises(Truncated) as caught:
        download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert caught.value.retryable
    assert server.count(DSYM_PATH) == FAST.attempts


def test_retry_starts_the_file_again(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, sequence(truncated(DATA, 100_000), body(b"short")))
    download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert Path(dest).read_bytes() == b"short"


def test_bytes_beyond_content_length_are_refused(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    # HTTP/1.1 framing ends the body at Content-Length and the rest would be a next
    # response: a server that lies about the length is refused, not trusted for a prefix.
    server.route(DSYM_PATH, overlong(DATA[:1000], b"EXCESS" * 100))
    with pytest.raises(TransferError, match="sent more than the 1000 bytes it announced") as caught:
        download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert not caught.value.retryable
    assert server.count(DSYM_PATH) == 1


def test_junk_after_a_body_is_refused_and_poisons_no_later_request(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    def junk_after_body(exchange):  # type: ignore[no-untyped-def]
        exchange.start(200, length=5)
        exchange.wfile.write(b"helloJUNK")  # and keeps the connection open

    server.route("/junk", junk_after_body)
    with pytest.raises(TransferError, match="sent more than the 5 bytes"):
        download(client, server.url + "/junk", dest, Terms(FAST), sleep=no_sleep)
    result = download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert Path(dest).read_bytes() == DATA
    assert result.attempts == 1  # every request says Connection: close: none inherits junk


def test_too_large_by_content_length(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    limits = Limits(max_bytes=len(DATA) - 1)
    with pytest.raises(TooLarge) as caught:
        download(client, server.url + DSYM_PATH, dest, Terms(limits), sleep=no_sleep)
    assert not caught.value.retryable
    assert server.count(DSYM_PATH) == 1
    assert not os.path.exists(dest)


def test_too_large_while_streaming(client: http11.Client, server: SymbolServer, dest: str) -> None:
    server.route("/endless", endless())
    limits = Limits(max_bytes=1024 * 1024, total_timeout=10.0)
    with pytest.raises(TooLarge):
        download(client, server.url + "/endless", dest, Terms(limits), sleep=no_sleep)
    assert server.count("/endless") == 1
    assert os.path.getsize(dest) <= limits.max_bytes


def test_slow_body_stops_at_the_total_timeout(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route("/slow", slow(DATA[:10_000], step=10, interval=0.02))  # 20 s in all
    limits = Limits(first_byte_timeout=1.0, total_timeout=0.5, backoff_base=0.01)
    started = time.monotonic()
    with pytest.raises(TransferError, match=r"gave up after 0\.5 s"):
        download(client, server.url + "/slow", dest, Terms(limits), sleep=no_sleep)
    assert time.monotonic() - started < limits.total_timeout + SLACK


def test_headers_then_nothing_is_bounded_by_the_first_byte_timeout(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route("/stall", stall())
    limits = Limits(first_byte_timeout=0.3, attempts=2, backoff_base=0.01)
    started = time.monotonic()
    with pytest.raises(TransferError, match="timed out") as caught:
        download(client, server.url + "/stall", dest, Terms(limits), sleep=no_sleep)
    assert caught.value.retryable
    assert server.count("/stall") == 2
    assert time.monotonic() - started < limits.attempts * limits.first_byte_timeout + SLACK


def test_reset_mid_body_is_retried(client: http11.Client, server: SymbolServer, dest: str) -> None:
    server.route(DSYM_PATH, sequence(reset(DATA, 100_000), body(DATA)))
    result = download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)
    assert result.attempts == 2
    assert Path(dest).read_bytes() == DATA


def test_refused_connection_is_retryable(client: http11.Client, dest: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    waits: list[float] = []
    with pytest.raises(TransferError) as caught:
        download(client, f"http://127.0.0.1:{port}/x", dest, Terms(FAST), sleep=waits.append)
    assert caught.value.retryable
    assert len(waits) == FAST.attempts - 1


def test_redirect_within_the_origin_keeps_headers(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route("/old", redirect("/new"))
    server.route("/new", require_auth(TOKEN_HEADERS["Authorization"], then=body(DATA)))
    result = download(client, server.url + "/old", dest, Terms(FAST), headers=TOKEN_HEADERS)
    assert result.location == server.url + "/new"
    assert server.requests[-1].headers["x-api-key"] == TOKEN_HEADERS["X-Api-Key"]


def test_redirect_to_another_origin_drops_credentials(
    client: http11.Client, server: SymbolServer, other_server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, redirect(other_server.url + "/blob?X-Signature=abc", status=307))
    other_server.route("/blob", body(DATA))
    result = download(client, server.url + DSYM_PATH, dest, Terms(FAST), headers=TOKEN_HEADERS)
    assert Path(dest).read_bytes() == DATA
    assert result.location == other_server.url + "/blob"  # the signed query: not for messages
    assert server.requests[0].headers["authorization"] == TOKEN_HEADERS["Authorization"]
    (received,) = other_server.requests
    assert "authorization" not in received.headers
    assert "x-api-key" not in received.headers
    assert received.headers["user-agent"] == f"dsymfind/{__version__}"


def test_credentials_stay_dropped_back_on_the_first_origin(
    client: http11.Client, server: SymbolServer, other_server: SymbolServer, dest: str
) -> None:
    server.route("/start", redirect(other_server.url + "/hop"))
    other_server.route("/hop", redirect(server.url + "/end"))
    server.route("/end", body(DATA))
    download(client, server.url + "/start", dest, Terms(FAST), headers=TOKEN_HEADERS)
    assert [r.path for r in server.requests] == ["/start", "/end"]
    assert "authorization" not in server.requests[1].headers


def test_redirect_loop_stops(client: http11.Client, server: SymbolServer, dest: str) -> None:
    server.route("/loop", redirect_loop())
    with pytest.raises(TransferError, match="too many redirects") as caught:
        download(client, server.url + "/loop", dest, Terms(FAST), sleep=no_sleep)
    assert not caught.value.retryable
    assert server.count("/loop") == FAST.max_redirects + 1


def test_redirect_to_a_web_page_is_an_auth_failure(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    server.route(DSYM_PATH, redirect("/login?next=/x"))
    server.route("/login", body(b"<html>sign in</html>", content_type="text/html; charset=utf-8"))
    with pytest.raises(AuthFailed, match="sign-in page"):
        download(client, server.url + DSYM_PATH, dest, Terms(FAST), sleep=no_sleep)


def test_web_page_answer_is_written_and_flagged(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    page = b"<html>soft 404</html>"
    server.route(DSYM_PATH, body(page, content_type="text/html; charset=utf-8"))
    result = download(client, server.url + DSYM_PATH, dest, Terms(FAST))
    assert (result.content_type, result.is_html) == ("text/html", True)
    assert Path(dest).read_bytes() == page


def test_https_to_http_redirect_is_refused() -> None:
    headers = http11.Headers([(b"Location", b"http://127.0.0.1/b")])
    url = http11.parse_url("https://127.0.0.1/a")
    response = http11.Response(url, 302, headers, connection=None)  # type: ignore[arg-type]
    with pytest.raises(TransferError, match="refused a redirect from https"):
        _redirect_target(response, "https://127.0.0.1/a")


def test_cancel_before_the_first_request(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(TransferError, match=r"^cancelled$") as caught:
        download(client, server.url + DSYM_PATH, dest, Terms(limits=FAST, cancel=cancel))
    assert not caught.value.retryable
    assert server.requests == []


def test_cancel_during_the_body(client: http11.Client, server: SymbolServer, dest: str) -> None:
    server.route("/slow", slow(DATA[:100_000], step=1000, interval=0.01))  # 1 s in all
    cancel = threading.Event()
    started = time.monotonic()
    with pytest.raises(TransferError, match=r"^cancelled$"):
        download(
            client,
            server.url + "/slow",
            dest,
            Terms(limits=FAST, cancel=cancel, progress=lambda done, total: cancel.set()),
        )
    assert server.count("/slow") == 1
    assert time.monotonic() - started < 0.9


def test_progress_is_monotone_and_ends_at_the_size(
    client: http11.Client, server: SymbolServer, dest: str
) -> None:
    calls: list[tuple[int, int | None]] = []
    download(
        client,
        server.url + DSYM_PATH,
        dest,
        Terms(limits=FAST, progress=lambda *a: calls.append(a)),
    )
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert calls[-1] == (len(DATA), len(DATA))
    assert {total for _, total in calls} == {len(DATA)}
    assert len(calls) <= len(DATA) // (1024 * 1024) + 2  # throttled, not one per chunk


def test_messages_show_no_secrets(client: http11.Client, server: SymbolServer, dest: str) -> None:
    url = server.url.replace("http://", "http://user:hunter2@") + "/missing?token=qwerty"
    with pytest.raises(NotFound) as caught:
        download(client, url, dest, Terms(FAST), headers=TOKEN_HEADERS)
    message = str(caught.value)
    assert message == f"{server.url}/missing: not found (HTTP 404)"
    for secret in ("hunter2", "qwerty", *TOKEN_HEADERS.values()):
        assert secret not in message


def test_cookies_are_not_kept(client: http11.Client, server: SymbolServer, dest: str) -> None:
    server.route("/login", body(b"ok", headers=[("Set-Cookie", "session=abc; Path=/")]))
    download(client, server.url + "/login", dest, Terms(FAST))
    download(client, server.url + DSYM_PATH, dest, Terms(FAST))
    assert "cookie" not in server.requests[-1].headers


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        *((status, True) for status in (408, 429, 500, 502, 503, 504)),
        *((status, False) for status in (400, 401, 403, 404, 410, 418, 204, 304)),
    ],
)
def test_which_statuses_are_retried(
    client: http11.Client, server: SymbolServer, status: int, retried: bool, dest: str
) -> None:
    server.route("/x", statuses(*[status] * FAST.attempts, then=body(b"never")))
    with pytest.raises(TransferError) as caught:
        download(client, server.url + "/x", dest, Terms(FAST), sleep=no_sleep)
    assert caught.value.retryable is retried
    assert server.count("/x") == (FAST.attempts if retried else 1)
