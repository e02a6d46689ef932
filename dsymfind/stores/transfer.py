"""Downloading one URL into one file: bounded in time and size, retried when worth it.

The policy (docs/symbol-stores.md, "Fetching"): short connect and first-byte timeouts so a
dead server never hangs the debugger, retries only for answers that can change (408/429/5xx,
socket errors), and credentials never sent to another origin after a redirect.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import os
import random
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsymfind import __version__
from dsymfind.stores import base, body, http11, partial
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

if TYPE_CHECKING:
    import hashlib
    import ssl

RETRYABLE_STATUSES = frozenset({408, 429})  # plus every 5xx, see _status_error
OK = 200
NOT_FOUND_STATUSES = frozenset({404, 410})
AUTH_STATUSES = frozenset({401, 403})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# Parallel lookups try every candidate URL at once; a few dozen sockets is polite. No
# connection is kept alive: every request says `Connection: close` (see _Watchdog).
REDIRECT_MIN, SERVER_ERROR_MIN, SERVER_ERROR_END = 300, 500, 600
POOL_MAX_CONNECTIONS = 32
# An error answer's body is read this far, for the Reader to explain the refusal (an S3
# error document is a few hundred bytes), within the first-byte timeout and the deadline.
ERROR_BODY_MAX = 4096


class Session:
    """What the sources of one process share: today one HTTP client, made on demand.

    Use as a context manager; it closes what it made.
    """

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._client: http11.Client | None = None
        self._lock = threading.Lock()

    @property
    def http_client(self) -> http11.Client:
        with self._lock:
            if self._client is None:
                self._client = make_client(self.limits)
            return self._client

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._client is not None:
            self._client.close()


def make_client(limits: Limits = DEFAULT_LIMITS) -> http11.Client:
    """One client per process: share it between threads. `limits` is the Session's; each
    download() sets its own timeouts."""
    return http11.Client(
        # identity: Content-Length then counts the bytes we write, and compressed
        # files still arrive as stored (the caller detects compression by magic).
        headers={"User-Agent": f"dsymfind/{__version__}", "Accept-Encoding": "identity"},
        # Loaded at the first handshake that needs it: a process fetching only over
        # http:// (a loopback S3 engine, a plain HTTP store) never pays for it.
        trust=_trusted,
        trust_errors=(TrustUnavailable,),
        max_connections=POOL_MAX_CONNECTIONS,
        through_proxy=_through_proxy,
    )


def _through_proxy(*route: Any, **options: Any) -> AbstractContextManager[http11.Response]:
    """A download through a proxy, by httpx (stores/proxied.py): imported only when a proxy
    is on a URL's route."""
    from dsymfind.stores import proxied

    return proxied.stream(*route, **options)


class TrustUnavailable(OSError):
    """The CA bundle could not be loaded: every https server fails the same way until the
    setting is fixed, so no server is to blame (no retry, no backoff)."""


def _trusted() -> ssl.SSLContext:
    try:
        return _ssl_context()
    except OSError as exc:  # an ssl.SSLError too
        raise TrustUnavailable(
            "cannot load the certificates to trust (SSL_CERT_FILE, SSL_CERT_DIR or the "
            f"system's CA bundle): {_describe(exc)}"
        ) from exc


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The macOS keychain (corporate CAs included) when truststore is there, else certifi
    (and SSL_CERT_FILE / SSL_CERT_DIR). One per process: loading the CA bundle costs about
    20 ms, which a prefetch of 2,000 images paid 2,000 times. ssl is imported here, not at
    the module's import: it and the libcrypto it loads cost a plain http:// download more
    than its transfer."""
    import ssl

    if sys.platform == "darwin":
        try:
            import truststore  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            pass
        else:
            context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.set_alpn_protocols(["http/1.1"])
            return context
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the name
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    # A setting naming what does not exist fails here: every https server would fail alike.
    if cafile:
        context.load_verify_locations(cafile=cafile)
    elif capath:
        context.load_verify_locations(capath=capath)
    else:
        context.load_verify_locations(cafile=_ca_bundle())
    return context


def _ca_bundle() -> str:
    """certifi's CA bundle (Mozilla's roots, which curl and most clients trust)."""
    import certifi

    bundle: str = certifi.where()
    return bundle


DEFAULT_TERMS = Terms()


def download(
    client: http11.Client,
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

    client: http11.Client
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
        shown = redact(target.text)
        timeout = _timeouts(job.limits, job.remaining(shown))
        with (
            _Watchdog(job.deadline) as watchdog,
            _transport_errors(job, shown),
            job.client.stream(
                target,
                # Sent as latin-1 (partial.SENT_AS): only If-Range may hold bytes past
                # ASCII, the other headers are checked (base.header_value_problem) or ours.
                {**headers, **ranged, "Connection": "close"},
                timeout,
                on_socket=watchdog.watch,
            ) as response,
            _error_body_kept(job, response),
        ):
            if response.status_code not in REDIRECT_STATUSES:
                start = kept.continues(response) if kept is not None and ranged else 0
                _check_answer(response, shown, redirected=hop > 0, ranged=start > 0)
                size, sha256 = _save_body(job, response, shown, kept, start)
                return target.text, size, _media_type(response), sha256
            location = _redirect_target(response, shown)
        if not _same_origin(target, location):
            headers = {}  # for this hop and every later one, even back to the first origin
        target = location
    raise TransferError(
        f"{redact(job.url)}: too many redirects (more than {job.limits.max_redirects})",
        retryable=False,
    )


@contextmanager
def _error_body_kept(job: _Transfer, response: http11.Response) -> Iterator[None]:
    """A refusal of this answer's status carries the start of its body (TransferError.answer).

    Only for refusals a Reader may need explained (not 404: misses are the common case,
    and need no words), never for a body taken as the file's."""
    try:
        yield
    except TransferError as exc:
        status = response.status_code
        refused = status >= REDIRECT_MIN and status not in NOT_FOUND_STATUSES
        if refused and exc.status == status and not response.is_stream_consumed:
            exc.answer = _first_bytes(job, response)
        raise


def _first_bytes(job: _Transfer, response: http11.Response) -> bytes:
    """Up to ERROR_BODY_MAX bytes of the body, or what came of them within the first-byte
    timeout (a store that drips its error page gets no more of our time)."""
    until = min(job.deadline, time.monotonic() + job.limits.first_byte_timeout)
    got = b""
    with suppress(http11.HttpError, TransferError):
        for piece in response.pieces(max(until - time.monotonic(), 0.0)):
            got += piece
            if len(got) >= ERROR_BODY_MAX or time.monotonic() >= until:
                break
    return got[:ERROR_BODY_MAX]


class _Watchdog:
    """Shuts an attempt's socket down at the deadline.

    The client's timeouts bound each socket read, not the exchange: a server sending a
    header byte, or an `HTTP/1.1 100 Continue`, every second would hold a download (and the
    UUID's lock) for hours. The client hands over each socket it opens (`watch`), and every
    exchange has a connection of its own. shutdown() wakes a blocked recv() at once, where
    close() may not. One thread watches every attempt's deadline (_Deadlines).
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._fired = False
        self.over = False  # the attempt ended: nothing left to shut

    def __enter__(self) -> _Watchdog:
        _DEADLINES.add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self.over = True
            self._sockets.clear()
        _DEADLINES.ended()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self._fired:
                _shut(sock)

    def fire(self) -> None:
        with self._lock:
            self._fired = True
            for sock in self._sockets:
                _shut(sock)


class _Deadlines:
    """The one thread that fires every watchdog of the process at its deadline.

    A timer thread per attempt cost each request a thread start and the GIL hand-offs
    around it: a batch of small downloads spent more on them than on its transfers. The
    thread sleeps until the earliest deadline; an attempt that ends leaves its entry,
    dropped when it comes up (or when ended ones outnumber the live ones)."""

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Watchdog]] = []
        self._numbers = itertools.count()
        self._live = 0
        self._wakes_at = math.inf
        self._thread: threading.Thread | None = None

    def add(self, watchdog: _Watchdog) -> None:
        with self._changed:
            heapq.heappush(self._heap, (watchdog.deadline, next(self._numbers), watchdog))
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
                self._thread.start()
            elif watchdog.deadline < self._wakes_at:
                self._changed.notify()  # deadlines mostly come later: rarely needed

    def ended(self) -> None:
        with self._changed:
            self._live -= 1
            if len(self._heap) > _PRUNE_AT and len(self._heap) > 2 * self._live:
                self._heap = [entry for entry in self._heap if not entry[2].over]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][2].over or self._heap[0][0] <= now):
                    watchdog = heapq.heappop(self._heap)[2]
                    if not watchdog.over:
                        watchdog.fire()
                self._wakes_at = self._heap[0][0] if self._heap else math.inf
                self._changed.wait(None if not self._heap else self._wakes_at - now)


# Ended attempts' entries kept in the deadlines' heap before they are pruned.
_PRUNE_AT = 64
_DEADLINES = _Deadlines()


def _deadlines_of_this_process() -> None:
    """A forked child (symbolicate's workers) has no watchdog thread, and may inherit the
    heap's lock held: it starts with deadlines of its own."""
    global _DEADLINES
    _DEADLINES = _Deadlines()


os.register_at_fork(after_in_child=_deadlines_of_this_process)


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):  # already closed: nothing left to wake
        sock.shutdown(socket.SHUT_RDWR)


def _timeouts(limits: Limits, remaining: float) -> http11.Timeouts:
    # The read timeout applies to each socket read, with the value fixed when the request
    # starts: capping it by the time left bounds the overshoot.
    return http11.Timeouts(
        connect=min(limits.connect_timeout, remaining),
        read=min(limits.first_byte_timeout, remaining),
        pool=remaining,
    )


def _parse(url: str) -> http11.Url:
    try:
        return http11.parse_url(url)
    except http11.NotHttp:
        raise TransferError(f"{redact(url)}: not an http(s) URL", retryable=False) from None
    except http11.InvalidRequest as exc:
        raise TransferError(f"{redact(url)}: {exc}", retryable=False) from exc


def _redirect_target(response: http11.Response, shown: str) -> http11.Url:
    location = response.headers.get("location")
    if not location:
        raise TransferError(
            f"{shown}: redirect without a Location (HTTP {response.status_code})",
            retryable=False,
            status=response.status_code,
        )
    try:
        joined = urllib.parse.urljoin(response.url.text, location)
    except ValueError as exc:
        raise TransferError(f"{shown}: invalid redirect ({exc})", retryable=False) from exc
    target = _parse(joined)
    if response.url.scheme == "https" and target.scheme == "http":
        raise TransferError(
            f"{shown}: refused a redirect from https to {redact(target.text)}", retryable=False
        )
    return target


def _same_origin(a: http11.Url, b: http11.Url) -> bool:
    # Host case and default ports are normalised (https://H:443 is https://h).
    return a.origin == b.origin


def _check_answer(
    response: http11.Response, shown: str, *, redirected: bool, ranged: bool = False
) -> None:
    expected = partial.PARTIAL_CONTENT if ranged else OK
    if response.status_code != expected:
        raise _status_error(response, shown)
    if redirected and _is_html(_media_type(response)):
        # Spec: a redirect to a sign-in page is an auth failure, not a file to verify.
        raise base.AuthFailed(
            f"{shown}: redirected to a web page at {redact(response.url.text)}, "
            "probably a sign-in page; check the credentials for this server",
            status=response.status_code,
        )


def _status_error(response: http11.Response, shown: str) -> TransferError:
    status = response.status_code
    if status in NOT_FOUND_STATUSES:
        return base.NotFound(f"{shown}: not found (HTTP {status})", status=status)
    if status in AUTH_STATUSES:
        return base.AuthFailed(
            f"{shown}: access denied (HTTP {status}); check the credentials for this server",
            status=status,
        )
    if status in RETRYABLE_STATUSES or SERVER_ERROR_MIN <= status < SERVER_ERROR_END:
        return TransferError(
            f"{shown}: server busy or failing (HTTP {status})",
            retryable=True,
            status=status,
            retry_after=_retry_after(response),
        )
    return TransferError(
        f"{shown}: unexpected answer (HTTP {status})", retryable=False, status=status
    )


def _retry_after(response: http11.Response) -> float | None:
    # Only the delay-seconds form: an HTTP date would need clock agreement we lack.
    value = response.headers.get("retry-after", "").strip()
    return float(value) if _is_decimal(value) else None


def _media_type(response: http11.Response) -> str | None:
    value = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower() or None


def _is_html(media_type: str | None) -> bool:
    return media_type in HTML_TYPES


def _content_length(response: http11.Response) -> int | None:
    # The client has already refused a malformed or conflicting Content-Length.
    return response.content_length


def _is_decimal(text: str) -> bool:
    return text.isascii() and text.isdigit()  # isdigit alone accepts "²"


def _save_body(
    job: _Transfer, response: http11.Response, shown: str, kept: Kept | None = None, start: int = 0
) -> tuple[int, str | None]:
    """Write the body to `dest` (through the partial file when there is one); `start` is
    where a 206 answer continues the partial file, 0 for a whole body."""
    total = kept.total if kept is not None and start else _content_length(response)
    try:
        _check_announced(job, response, shown, total)
        expected = _expected_sha256(response, shown, whole_body=not start)
        # Hashed as it is written, only when there is a digest to meet (a resumed transfer
        # reads its kept start back once): no second pass over a 2 GB file.
        digest = _sha256() if expected is not None else None
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
    job: _Transfer, response: http11.Response, shown: str, total: int | None
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
    response: http11.Response, shown: str, *, whole_body: bool
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
    response: http11.Response,
    shown: str,
    kept: Kept | None,
    start: int,
    total: int | None,
    digest: hashlib._Hash | None,
) -> int:
    # A body from byte 0 is written where the caller wants it, and kept as the partial file
    # from its first checkpoint on (partial.Kept.begin); a continued one is the partial file.
    path = kept.partial.path if kept is not None and start else job.dest
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
    job: _Transfer, response: http11.Response, kept: Kept | None, start: int, total: int | None
) -> None:
    """The partial file's sidecar and the caller's name for it, once the file is opened (and
    truncated) for this body."""
    if kept is None:
        return
    if not start:
        # After the truncation: a sidecar never describes bytes of another object.
        kept.begin(partial.validator(response), total, job.dest)
    else:
        kept.show_at(job.dest)  # an earlier attempt's whole body there is gone too


class _NoRoom(TransferError):
    """Our disk, not the answer: what is kept stays, to be continued once there is room."""


def _checked_body(
    response: http11.Response,
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


def _overlong(response: http11.Response, shown: str, total: int) -> TransferError:
    return TransferError(
        f"{shown}: the server sent more than the {total} bytes it announced",
        retryable=False,
        status=response.status_code,
    )


def _bytes_past_the_body(response: http11.Response) -> bool:
    """Whether bytes followed a Content-Length body: a server that lies about a length
    sends nothing we keep."""
    return response.bytes_past_the_body()


def _copy_body(
    job: _Transfer,
    response: http11.Response,
    sink: body.Sink,
    total: int | None,
    shown: str,
    start: int = 0,
) -> int:
    meter = body.Meter(job.progress, total)
    done = start
    read_timeout = _timeouts(job.limits, job.remaining(shown)).read
    with _transport_errors(job, shown, body_status=response.status_code):
        for piece in response.pieces(read_timeout):
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
    """The client's exceptions as TransferError; a broken body as base.Truncated."""
    try:
        yield
    except http11.Timeout as exc:
        job.remaining(shown)  # past the deadline, say so rather than "timed out"
        raise TransferError(f"{shown}: {_describe(exc)}", retryable=True) from exc
    except http11.InvalidRequest as exc:
        raise TransferError(f"{shown}: {_describe(exc)}", retryable=False) from exc
    except TrustUnavailable as exc:
        # Every https server fails the same way until the setting is fixed.
        raise TransferError(f"{shown}: {_describe(exc)}", retryable=False) from exc
    except http11.NetworkError as exc:
        job.remaining(shown)  # the watchdog's shutdown past the deadline: say so
        if body_status is not None:
            raise base.Truncated(
                f"{shown}: connection broke mid-body ({_describe(exc)})", status=body_status
            ) from exc
        # An untrusted certificate stays untrusted, and certificates that cannot be loaded
        # stay so until the setting is fixed: retrying only delays the message.
        retryable = not any(_caused_by(exc, kind) for kind in _lasting_failures())
        raise TransferError(f"{shown}: {_describe(exc)}", retryable=retryable) from exc


def _lasting_failures() -> tuple[type[BaseException], ...]:
    """Failures no retry mends: an untrusted certificate (only once ssl is loaded: without
    it, no handshake was made), certificates that cannot be loaded."""
    ssl = sys.modules.get("ssl")
    if ssl is None:
        return (TrustUnavailable,)
    return (ssl.SSLCertVerificationError, TrustUnavailable)


def _sha256() -> hashlib._Hash:
    """hashlib loads libcrypto: only for an answer that publishes a digest."""
    import hashlib

    return hashlib.sha256()


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
