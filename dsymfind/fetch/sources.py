"""Where symbols are fetched from: one Source per store, chosen by its location's scheme.

A layout (layouts.py) turns an identity into keys; a source turns a key into a local file.
Every source answers alike: the file, NotFound (the only answer a negative cache may
remember), or a TransferError saying whether trying again later may help. Adding a kind of
store is one module with a class that satisfies Source, and one line in SCHEMES.

This module imports no third-party code: `dsymfind status` and `dsymfind config` use its
`redact` and `scheme_of`, and a folder source needs no HTTP library.
"""

from __future__ import annotations

import importlib
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from dsymfind import atomic, cache_layout
from dsymfind.errors import DsymfindError

if TYPE_CHECKING:
    import httpx

# The module of each scheme's source class, imported only when a store of that kind is used.
SCHEMES: dict[str, str] = {
    "http": "dsymfind.fetch.http_source",
    "https": "dsymfind.fetch.http_source",
    "file": "dsymfind.fetch.folder_source",
    "s3": "dsymfind.fetch.s3_source",
}

# Stays below LLDB's 640 s limit on the shell-command helper, with time to spare.
TOTAL_TIMEOUT = 600.0
# A runaway or hostile store must not fill the disk; raise it for stores of giant dSYMs.
MAX_BYTES = 2 * 1024**3
# A reachable server accepts within a few hundred ms; 3 s covers a slow VPN.
CONNECT_TIMEOUT = 3.0
# Symbol servers answer from storage, so a 5 s silence means a dead or stuck server.
FIRST_BYTE_TIMEOUT = 5.0
# Enough to ride out a restarting server or a brief rate limit, few enough to fail fast.
ATTEMPTS = 3
# Full-jitter backoff spreads parallel clients apart; the cap keeps the helper responsive.
BACKOFF_BASE = 0.25
BACKOFF_CAP = 4.0
# Stores redirect once or twice (to a CDN or a presigned object URL); more is a loop.
MAX_REDIRECTS = 5
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class TransferError(DsymfindError):
    """A fetch failed; `retryable` says whether trying again later may help."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        # The first bytes of an error answer's body, for a source that can explain it
        # (S3 names its error code there); empty when none was read.
        self.answer = b""


class NotFound(TransferError):
    """The store does not have the key: the only failure a negative cache may remember."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status)


class AuthFailed(TransferError):
    """Credentials refused (401, 403), or a redirect that ended on a sign-in page."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status)


class SourceBug(TransferError):
    """A source raised what no source should (see `contained`): a bug, logged with its
    traceback, and a failure of that one fetch."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class TooLarge(TransferError):
    """The file is, or announces itself as, larger than Limits.max_bytes."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status)


class Truncated(TransferError):
    """The body ended before (or disagrees with) its announced length, or the link broke."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, retryable=True, status=status)


@dataclass(frozen=True)
class Limits:
    connect_timeout: float = CONNECT_TIMEOUT
    first_byte_timeout: float = FIRST_BYTE_TIMEOUT
    total_timeout: float = TOTAL_TIMEOUT
    max_bytes: int = MAX_BYTES
    attempts: int = ATTEMPTS
    backoff_base: float = BACKOFF_BASE
    backoff_cap: float = BACKOFF_CAP
    max_redirects: int = MAX_REDIRECTS


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Fetched:
    """A key's file, now at the caller's path."""

    location: str  # where it came from, fit for messages (redacted)
    size: int
    content_type: str | None  # media type, lowercased, without parameters; None for files
    attempts: int = 1
    sha256: str | None = None  # the store's recorded SHA-256, which the body was checked against

    @property
    def is_html(self) -> bool:
        """A web page where a file was expected: an error or sign-in page, never a dSYM."""
        return self.content_type in HTML_TYPES


Progress = Callable[[int, int | None], None]


@dataclass(frozen=True)
class Partial:
    """Where a download keeps its bytes while they arrive, so that a transfer cut part-way
    is continued by the next attempt (by any process) rather than started again. `source`
    (redacted location and key) must match the sidecar's (fetch/transfer.py)."""

    path: str
    source: str

    def discard(self) -> None:
        """The bytes and their sidecar go: the next attempt starts from byte 0."""
        atomic.unlink_quietly(self.path)
        atomic.unlink_quietly(cache_layout.partial_meta(self.path))


@dataclass(frozen=True)
class Terms:
    """The terms of one fetch: its limits, who follows its progress, what cancels it."""

    limits: Limits = DEFAULT_LIMITS
    progress: Progress | None = None
    cancel: threading.Event | None = None
    partial: Partial | None = None  # sources that can continue a cut transfer use it


@dataclass(frozen=True)
class S3Options:
    """How an S3-compatible store is reached (fetch/s3.py): None is botocore's default."""

    endpoint_url: str | None = None  # an S3-compatible engine, addressed path-style
    region: str | None = None
    profile: str | None = None  # a section of the shared AWS config and credentials files
    anonymous: bool = False  # unsigned requests: a public bucket


@dataclass(frozen=True)
class Options:
    """How a store is reached: headers for every request to it (tokens: HTTP sends them to
    its origin only), whether keys are URL references (the `template` layout), the server's
    configured name (for messages), and an object store's connection settings."""

    headers: Mapping[str, str] = field(default_factory=dict)
    resolve_references: bool = False
    name: str = ""
    s3: S3Options = field(default_factory=S3Options)


class Source(Protocol):
    """A store reached one way (HTTP, a folder, ...), whatever its layout.

    A class implementing it is made as `SOURCE(location, session, options)`."""

    location: str

    def where(self, key: str) -> str:
        """The key's location, fit for messages and the log (no credentials)."""
        ...

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        """The key's file written to `dest` (which the caller owns and discards on failure)."""
        ...


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
                from dsymfind.fetch import transfer

                self._client = transfer.make_client(self.limits)
            return self._client

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._client is not None:
            self._client.close()


def scheme_of(location: str) -> str:
    """The registry key of a store location; an absolute path is a folder."""
    if os.path.isabs(location):
        return "file"
    return urllib.parse.urlsplit(location).scheme.lower()


def open_source(location: str, session: Session, options: Options | None = None) -> Source:
    """The source for a store location, of the kind its scheme names."""
    scheme = scheme_of(location)
    if scheme not in SCHEMES:
        raise DsymfindError(f"{redact(location)}: no source for {scheme or 'this'} locations")
    module = importlib.import_module(SCHEMES[scheme])
    with contained(redact(location)):
        source: Source = module.SOURCE(location, session, options or Options())
    return _Contained(source)


class _Contained:
    """A source whose get() keeps any unexpected exception to itself (`contained`)."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner
        self.location = inner.location

    def where(self, key: str) -> str:
        return self.inner.where(key)

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        with contained(self.inner.where(key), terms.partial):
            return self.inner.get(key, dest, terms)


@contextmanager
def contained(where: str, partial: Partial | None = None) -> Iterator[None]:
    """Turn an exception that is neither a DsymfindError nor an OSError (a bug) into a
    SourceBug naming `where`, logged with its traceback: one broken store, or one answer
    that trips a bug, must not sink the other candidates or the lookups after it. The
    `partial` download goes too, since its bytes may be what trips the bug each time."""
    try:
        yield
    except (DsymfindError, OSError):
        raise
    except Exception as exc:
        if partial is not None:
            partial.discard()
        log_file = _log_bug(f"bug in source {where}", exc)
        # Only the type: the text may quote a signed URL or a header.
        raise SourceBug(
            f"{where}: internal error ({type(exc).__name__}); details in {log_file}"
        ) from exc


def _log_bug(message: str, exc: BaseException) -> str:
    from dsymfind.log import configured_log_file, get_logger

    log_file = configured_log_file(os.environ)
    get_logger(log_file).error(message, exc_info=exc)
    return log_file


def header_value_problem(text: str) -> str | None:
    """Why a header value cannot be sent (HTTP carries visible ASCII and spaces), or None."""
    bad = next((c for c in text if not (" " <= c <= "~" or c == "\t")), None)
    return None if bad is None else f"{bad!r} cannot be sent in an HTTP header"


def redact(location: str) -> str:
    """A location fit for a message: no user name or password, no query (presigned URLs
    sign there), no fragment."""
    if os.path.isabs(location):
        return location
    try:
        parts = urllib.parse.urlsplit(location)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
