"""Downloading one URL into one file: bounded in time and size, retried when worth it.

The policy (docs/symbol-stores.md, "Fetching"): short connect and first-byte timeouts so a
dead server never hangs the debugger, retries only for answers that can change (408/429/5xx,
socket errors), and credentials never sent to another origin after a redirect.
"""

from __future__ import annotations

import functools
import hashlib
import random
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx

from dsymfind import __version__
from dsymfind.stores import base, body, partial
from dsymfind.stores.base import (
    DEFAULT_LIMITS,
    HTML_TYPES,
    Fetched,
    Limits,
    Partial,
    ProgressCallback,
    Terms,
    TransferError,
    redact,
)
from dsymfind.stores.partial import Kept, StartOver

RETRYABLE_STATUSES = frozenset({408, 429})  # plus every 5xx, see _status_error
NOT_FOUND_STATUSES = frozenset({404, 410})
AUTH_STATUSES = frozenset({401, 403})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# Parallel lookups try every candidate URL at once; a few dozen sockets is polite. No
# connection is kept alive: every request says `Connection: close` (see _Watchdog).
POOL_MAX_CONNECTIONS = 32
# An error answer's body is read this far, for the Reader to explain the refusal (an S3
# error document is a few hundred bytes), within the first-byte timeout and the deadline.
ERROR_BODY_MAX = 4096


class Session:
    """What the sources of one process share: today one pooled HTTP client, made on demand.

    Use as a context manager; it closes what it made.
    """

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def http_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = make_client(self.limits)
            return self._client

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._client is not None:
            self._client.close()


def make_client(limits: Limits = DEFAULT_LIMITS) -> httpx.Client:
    """One client per process: it pools connections, so share it between threads."""
    return httpx.Client(
        verify=_TrustAtFirstHandshake(ssl.PROTOCOL_TLS_CLIENT),
        trust_env=True,  # HTTP(S)_PROXY, NO_PROXY, SSL_CERT_FILE; macOS system proxies too
        follow_redirects=False,  # download() follows them itself, to drop credentials
        timeout=_timeouts(limits, limits.total_timeout),
        limits=httpx.Limits(max_connections=POOL_MAX_CONNECTIONS, max_keepalive_connections=0),
        # identity: Content-Length then counts the bytes we write, and compressed
        # files still arrive as stored (the caller detects compression by magic).
        headers={"User-Agent": f"dsymfind/{__version__}", "Accept-Encoding": "identity"},
        # A cookie jar keys on host but not port: refusing cookies keeps a session
        # cookie from following a redirect to another origin.
        cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
    )


class TrustUnavailable(OSError):
    """The CA bundle could not be loaded: every https server fails the same way until the
    setting is fixed, so no server is to blame (no retry, no backoff)."""


class _TrustAtFirstHandshake(ssl.SSLContext):
    """The client's TLS context: it loads the CA bundle (_ssl_context) at the first handshake
    that needs it, so a process fetching only over http:// (a loopback S3 engine, a plain
    HTTP store) never pays for it. httpcore sets the ALPN protocols, then wraps: both are
    handed to the loaded context."""

    _alpn: list[str] | None = None

    def set_alpn_protocols(self, alpn_protocols: Iterable[str]) -> None:
        self._alpn = list(alpn_protocols)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        return self._trusted().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        return self._trusted().wrap_bio(*args, **kwargs)

    def _trusted(self) -> ssl.SSLContext:
        try:
            context = _ssl_context()
        except (OSError, ssl.SSLError) as exc:  # ssl.SSLError is an OSError; said for the reader
            raise TrustUnavailable(
                "cannot load the certificates to trust (SSL_CERT_FILE, SSL_CERT_DIR or the "
                f"system's CA bundle): {_describe(exc)}"
            ) from exc
        if self._alpn is not None:
            context.set_alpn_protocols(self._alpn)
        return context


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The macOS keychain (corporate CAs included) when truststore is there, else certifi
    (and SSL_CERT_FILE / SSL_CERT_DIR). One per process: loading the CA bundle costs about
    20 ms, which a prefetch of 2,000 images paid 2,000 times."""
    if sys.platform == "darwin":
        try:
            import truststore  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            pass
        else:
            context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            return context
    return httpx.create_ssl_context(trust_env=True)


DEFAULT_TERMS = Terms()


def download(
    client: httpx.Client,
    url: str,
    dest: str,
    terms: Terms = DEFAULT_TERMS,
    *,
    headers: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Fetched:
    """Fetch `url` into `dest` on `terms`, retrying transient failures; raise TransferError
    otherwise. How every Reader reaching a store over HTTP fetches a key.

    `headers` (tokens, API keys) are sent to `url`'s origin only. On failure `dest`
    may hold a partial body: the caller owns the path and discards it. With a partial file
    in the terms, the body goes through it, and a cut or a timeout keeps its bytes: every
    attempt (this call's retries, and a later call in any process) asks for the rest with
    Range and If-Range, and a 200, a 416 or a range of another object starts it over.
    Progress then counts from the bytes kept. When the answer publishes the object's
    SHA-256 (body.published_sha256: `x-amz-meta-sha256`, `Repr-Digest`, ...), the body is
    hashed as it is written and must match it.
    """
    job = _Transfer(
        client, url, dest, dict(headers or {}), terms, time.monotonic() + terms.limits.total_timeout
    )
    attempt = 1
    while True:
        _check_cancel(terms.cancel)
        try:
            final_url, size, content_type, sha256 = _attempt(job)
        except StartOver:
            continue  # the partial file is gone: the next request asks for no range
        except TransferError as error:
            delay = _retry_delay(error, attempt, terms.limits)
            if delay is None or time.monotonic() + delay >= job.deadline:
                raise
            sleep(delay)
            attempt += 1
            continue
        return Fetched(redact(final_url), size, content_type, attempt, sha256)


@dataclass(frozen=True)
class _Transfer:
    """One download(): what every attempt of it shares."""

    client: httpx.Client
    url: str
    dest: str
    headers: dict[str, str]
    terms: Terms
    deadline: float  # time.monotonic() value: one budget for all attempts and backoffs

    @property
    def limits(self) -> Limits:
        return self.terms.limits

    @property
    def progress(self) -> ProgressCallback | None:
        return self.terms.progress

    @property
    def cancel(self) -> threading.Event | None:
        return self.terms.cancel

    @property
    def partial(self) -> Partial | None:
        return self.terms.partial

    def remaining(self, shown: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TransferError(
                f"{shown}: gave up after {self.limits.total_timeout:g} s", retryable=True
            )
        return left


def _retry_delay(error: TransferError, attempt: int, limits: Limits) -> float | None:
    """Seconds to wait before the next attempt, or None when there is none to make."""
    if not error.retryable or attempt >= limits.attempts:
        return None
    if error.retry_after is not None:
        return min(error.retry_after, limits.backoff_cap)
    ceiling = min(limits.backoff_cap, limits.backoff_base * 2 ** (attempt - 1))
    return random.uniform(0, ceiling)  # noqa: S311 - jitter, not cryptography


def _attempt(job: _Transfer) -> tuple[str, int, str | None, str | None]:
    """One try from the original URL, following redirects: (final URL, size, media type,
    the SHA-256 checked against the one the answer published, if any)."""
    target = _parse(job.url)
    headers = job.headers
    kept = Kept.load(job.partial) if job.partial is not None else None
    # Sent on every hop: a range asked of a store is asked of the CDN it redirects to.
    ranged = kept.request_headers() if kept is not None else {}
    for hop in range(job.limits.max_redirects + 1):
        shown = redact(str(target))
        timeout = _timeouts(job.limits, job.remaining(shown))
        with (
            _Watchdog(job.deadline) as watchdog,
            _transport_errors(job, shown),
            job.client.stream(
                "GET",
                target,
                # Only If-Range may hold bytes past ASCII: the other headers are checked
                # (base.header_value_problem) or ours.
                headers=httpx.Headers(
                    {**headers, **ranged, "Connection": "close"}, encoding=partial.SENT_AS
                ),
                timeout=timeout,
                extensions={"trace": watchdog.trace},
            ) as response,
            _error_body_kept(job, response),
        ):
            if response.status_code not in REDIRECT_STATUSES:
                start = kept.continues(response) if kept is not None and ranged else 0
                _check_answer(response, shown, redirected=hop > 0, ranged=start > 0)
                size, sha256 = _save_body(job, response, shown, kept, start)
                return str(target), size, _media_type(response), sha256
            location = _redirect_target(response, shown)
        if not _same_origin(target, location):
            headers = {}  # for this hop and every later one, even back to the first origin
        target = location
    raise TransferError(
        f"{redact(job.url)}: too many redirects (more than {job.limits.max_redirects})",
        retryable=False,
    )


@contextmanager
def _error_body_kept(job: _Transfer, response: httpx.Response) -> Iterator[None]:
    """A refusal of this answer's status carries the start of its body (TransferError.answer).

    Only for refusals a Reader may need explained (not 404: misses are the common case,
    and need no words), never for a body taken as the file's."""
    try:
        yield
    except TransferError as exc:
        status = response.status_code
        refused = status >= httpx.codes.MULTIPLE_CHOICES and status not in NOT_FOUND_STATUSES
        if refused and exc.status == status and not response.is_stream_consumed:
            exc.answer = _first_bytes(job, response)
        raise


def _first_bytes(job: _Transfer, response: httpx.Response) -> bytes:
    """Up to ERROR_BODY_MAX bytes of the body, or what came of them within the first-byte
    timeout (a store that drips its error page gets no more of our time)."""
    until = min(job.deadline, time.monotonic() + job.limits.first_byte_timeout)
    got = b""
    with suppress(httpx.HTTPError, TransferError):
        for piece in body.pieces(response, None, until - time.monotonic()):
            got += piece
            if len(got) >= ERROR_BODY_MAX or time.monotonic() >= until:
                break
    return got[:ERROR_BODY_MAX]


class _Watchdog:
    """Shuts an attempt's socket down at the deadline.

    httpx's timeouts bound each socket read, not the exchange: a server sending a header
    byte, or an `HTTP/1.1 100 Continue`, every second would hold a download (and the UUID's
    lock) for hours. httpcore's trace hook hands over each new connection's stream, and
    every request says `Connection: close`, so no attempt runs on a connection made before
    it. shutdown() wakes a blocked recv() at once, where close() may not.
    """

    def __init__(self, deadline: float) -> None:
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
                if self._fired:
                    _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self._fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):  # already closed: nothing left to wake
        sock.shutdown(socket.SHUT_RDWR)


def _timeouts(limits: Limits, remaining: float) -> httpx.Timeout:
    # httpx applies the read timeout to each socket read, with the value fixed when
    # the request starts: capping it by the time left bounds the overshoot.
    read = min(limits.first_byte_timeout, remaining)
    return httpx.Timeout(
        connect=min(limits.connect_timeout, remaining), read=read, write=read, pool=remaining
    )


def _parse(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise TransferError(f"{redact(url)}: invalid URL ({exc})", retryable=False) from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise TransferError(f"{redact(url)}: not an http(s) URL", retryable=False)
    return parsed


def _redirect_target(response: httpx.Response, shown: str) -> httpx.URL:
    location = response.headers.get("location")
    if not location:
        raise TransferError(
            f"{shown}: redirect without a Location (HTTP {response.status_code})",
            retryable=False,
            status=response.status_code,
        )
    try:
        joined = str(response.url.join(location))
    except httpx.InvalidURL as exc:
        raise TransferError(f"{shown}: invalid redirect ({exc})", retryable=False) from exc
    target = _parse(joined)
    if response.url.scheme == "https" and target.scheme == "http":
        raise TransferError(
            f"{shown}: refused a redirect from https to {redact(str(target))}", retryable=False
        )
    return target


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    # httpx normalises host case and default ports (https://h:443 is https://h).
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def _check_answer(
    response: httpx.Response, shown: str, *, redirected: bool, ranged: bool = False
) -> None:
    expected = httpx.codes.PARTIAL_CONTENT if ranged else httpx.codes.OK
    if response.status_code != expected:
        raise _status_error(response, shown)
    if redirected and _is_html(_media_type(response)):
        # Spec: a redirect to a sign-in page is an auth failure, not a file to verify.
        raise base.AuthFailed(
            f"{shown}: redirected to a web page at {redact(str(response.url))}, "
            "probably a sign-in page; check the credentials for this server",
            status=response.status_code,
        )


def _status_error(response: httpx.Response, shown: str) -> TransferError:
    status = response.status_code
    if status in NOT_FOUND_STATUSES:
        return base.NotFound(f"{shown}: not found (HTTP {status})", status=status)
    if status in AUTH_STATUSES:
        return base.AuthFailed(
            f"{shown}: access denied (HTTP {status}); check the credentials for this server",
            status=status,
        )
    if status in RETRYABLE_STATUSES or httpx.codes.is_server_error(status):
        return TransferError(
            f"{shown}: server busy or failing (HTTP {status})",
            retryable=True,
            status=status,
            retry_after=_retry_after(response),
        )
    return TransferError(
        f"{shown}: unexpected answer (HTTP {status})", retryable=False, status=status
    )


def _retry_after(response: httpx.Response) -> float | None:
    # Only the delay-seconds form: an HTTP date would need clock agreement we lack.
    value = response.headers.get("retry-after", "").strip()
    return float(value) if _is_decimal(value) else None


def _media_type(response: httpx.Response) -> str | None:
    value = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower() or None


def _is_html(media_type: str | None) -> bool:
    return media_type in HTML_TYPES


def _content_length(response: httpx.Response) -> int | None:
    # h11 has already refused a malformed or conflicting Content-Length.
    value = response.headers.get("content-length")
    return int(value) if value is not None and _is_decimal(value) else None


def _is_decimal(text: str) -> bool:
    return text.isascii() and text.isdigit()  # isdigit alone accepts "²"


def _save_body(
    job: _Transfer, response: httpx.Response, shown: str, kept: Kept | None = None, start: int = 0
) -> tuple[int, str | None]:
    """Write the body to `dest` (through the partial file when there is one); `start` is
    where a 206 answer continues the partial file, 0 for a whole body."""
    total = kept.total if kept is not None and start else _content_length(response)
    try:
        _check_announced(job, response, shown, total)
        expected = _expected_sha256(response, shown, whole_body=not start)
        # Hashed as it is written, only when there is a digest to meet (a resumed transfer
        # reads its kept start back once): no second pass over a 2 GB file.
        digest = hashlib.sha256() if expected is not None else None
        done = _write_body(job, response, shown, kept, start, total, digest)
        sha256 = _checked_body(response, shown, done, total, digest, expected)
    except TransferError as exc:
        if kept is not None and not (_worth_keeping(exc, start) and kept.resumable):
            kept.discard()
        raise
    if kept is not None:
        kept.finish(job.dest)
    return done, sha256


def _check_announced(
    job: _Transfer, response: httpx.Response, shown: str, total: int | None
) -> None:
    if total is not None and total > job.limits.max_bytes:
        raise base.TooLarge(
            f"{shown}: {total} bytes announced, over the {job.limits.max_bytes}-byte limit",
            status=response.status_code,
        )


def _worth_keeping(exc: TransferError, start: int) -> bool:
    """Whether what arrived is kept for the next attempt after `exc`: a cut or a timeout keeps
    it; a body that is wrong (too large, overlong, the wrong digest) leaves nothing to
    continue. Without a validator or a length nothing can be continued either (the caller
    asks the partial file)."""
    return (
        exc.retryable
        or isinstance(exc, _Cancelled)
        or (isinstance(exc, _NoRoom) and start > 0)  # to continue once there is room
    )


def _expected_sha256(
    response: httpx.Response, shown: str, *, whole_body: bool
) -> tuple[str, str] | None:
    try:
        return body.published_sha256(response.headers, whole_body=whole_body)
    except body.DigestProblem as exc:
        # Checked before the body: a store that says something we cannot check gets no trust.
        raise TransferError(
            f"{shown}: {exc}", retryable=False, status=response.status_code
        ) from exc


def _write_body(
    job: _Transfer,
    response: httpx.Response,
    shown: str,
    kept: Kept | None,
    start: int,
    total: int | None,
    digest: hashlib._Hash | None,
) -> int:
    path = job.dest if kept is None else kept.partial.path
    try:
        with body.opened(path, start) as fd:
            _prepare_partial(job, response, kept, start, total)
            if total is not None:
                # Refused at once rather than fill the disk (the user's other programs need
                # it too) and fail near the end of a 2 GB transfer.
                body.check_space(path, total - start)
            with body.Sink(fd, path, start, digest, kept) as sink:
                received = _copy_body(job, response, sink, total, shown, start)
    except body.NoRoom as exc:
        raise _NoRoom(
            f"{path}: cannot write ({exc.strerror}: {shown} needs {exc.needed} "
            f"bytes, {exc.free} are free)",
            retryable=False,
        ) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise TransferError(f"{path}: cannot write ({reason})", retryable=False) from exc
    assert sink.written == received
    return received


def _prepare_partial(
    job: _Transfer, response: httpx.Response, kept: Kept | None, start: int, total: int | None
) -> None:
    """The partial file's sidecar and the caller's name for it, once the file is opened (and
    truncated) for this body."""
    if kept is None:
        return
    if not start:
        # After the truncation: a sidecar never describes bytes of another object.
        kept.begin(partial.validator(response), total)
    kept.show_at(job.dest)  # an earlier attempt's whole body there is gone too


class _NoRoom(TransferError):
    """Our disk, not the answer: what is kept stays, to be continued once there is room."""


def _checked_body(
    response: httpx.Response,
    shown: str,
    done: int,
    total: int | None,
    digest: hashlib._Hash | None,
    expected: tuple[str, str] | None,
) -> str | None:
    if total is not None and done != total:
        raise base.Truncated(f"{shown}: got {done} of {total} bytes", status=response.status_code)
    if total is not None and _bytes_past_the_body(response):
        raise _overlong(response, shown, total)
    if digest is None or expected is None:
        return None
    actual = digest.hexdigest()
    header, wanted = expected
    if actual != wanted:
        # The store's own record disagrees with what it sent: nothing of it is kept.
        raise TransferError(
            f"{shown}: sha256 mismatch: {header} says {wanted}, "
            f"the {done} bytes received hash to {actual}",
            retryable=False,
            status=response.status_code,
        )
    return actual


def _overlong(response: httpx.Response, shown: str, total: int) -> TransferError:
    return TransferError(
        f"{shown}: the server sent more than the {total} bytes it announced",
        retryable=False,
        status=response.status_code,
    )


def _bytes_past_the_body(response: httpx.Response) -> bool:
    """Whether bytes followed a Content-Length body: a server that lies about a length
    sends nothing we keep.

    h11 frames the body by Content-Length and holds what follows for a next response
    (`trailing_data`), in a connection httpx does not expose: it is reached along the
    attributes of the streams that wrap it (h11_state). pyproject.toml pins the httpx,
    httpcore and h11 releases this path was checked on, and
    tests/stores/test_transfer.py fails if a release moves it.
    """
    trailing = getattr(h11_state(response), "trailing_data", None)
    return isinstance(trailing, tuple) and bool(trailing[0])


def h11_state(response: httpx.Response) -> object | None:
    """The h11 connection state behind a streamed HTTP/1.1 response; None when the streams
    that wrap it are not the ones this module knows."""
    found: object = response.stream
    for name in _STREAM_PATH:
        found = getattr(found, name, None)
    return found


# httpx's bound stream -> its transport stream -> httpcore's pool stream -> the HTTP/1.1
# connection's stream -> the connection -> its h11 state.
_STREAM_PATH = ("_stream", "_httpcore_stream", "_stream", "_connection", "_h11_state")


def _copy_body(
    job: _Transfer,
    response: httpx.Response,
    sink: body.Sink,
    total: int | None,
    shown: str,
    start: int = 0,
) -> int:
    meter = body.Meter(job.progress, total)
    done = start
    read_timeout = _timeouts(job.limits, job.remaining(shown)).read
    with _transport_errors(job, shown, body_status=response.status_code):
        for piece in body.pieces(response, None if total is None else total - start, read_timeout):
            _check_cancel(job.cancel)
            job.remaining(shown)
            done += len(piece)
            if total is not None and done > total:
                raise _overlong(response, shown, total)
            if done > job.limits.max_bytes:
                raise base.TooLarge(
                    f"{shown}: over the {job.limits.max_bytes}-byte limit",
                    status=response.status_code,
                )
            sink.put(piece)
            meter.update(done)
    if total is not None and done < total:
        job.remaining(shown)  # the watchdog's shutdown past the deadline: say so
    meter.finish(done)
    return done


class _Cancelled(TransferError):
    """The caller cancelled: what arrived is still good to continue later."""


def _check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise _Cancelled("cancelled", retryable=False)


@contextmanager
def _transport_errors(
    job: _Transfer, shown: str, *, body_status: int | None = None
) -> Iterator[None]:
    """httpx's exceptions as TransferError; a broken body as base.Truncated."""
    try:
        yield
    except httpx.TimeoutException as exc:
        job.remaining(shown)  # past the deadline, say so rather than "timed out"
        raise TransferError(f"{shown}: {_timeout_text(exc)}", retryable=True) from exc
    except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
        raise TransferError(f"{shown}: {_describe(exc)}", retryable=False) from exc
    except httpx.TransportError as exc:
        job.remaining(shown)  # the watchdog's shutdown past the deadline: say so
        if body_status is not None:
            raise base.Truncated(
                f"{shown}: connection broke mid-body ({_describe(exc)})", status=body_status
            ) from exc
        # An untrusted certificate stays untrusted, and certificates that cannot be loaded
        # stay so until the setting is fixed: retrying only delays the message.
        retryable = not any(
            _caused_by(exc, kind) for kind in (ssl.SSLCertVerificationError, TrustUnavailable)
        )
        raise TransferError(f"{shown}: {_describe(exc)}", retryable=retryable) from exc


def _timeout_text(exc: httpx.TimeoutException) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return "timed out connecting"
    if isinstance(exc, httpx.PoolTimeout):
        return "timed out waiting for a free connection"
    return "timed out waiting for data"


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
