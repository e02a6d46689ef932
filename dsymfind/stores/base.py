"""What every kind of store speaks, fetching and publishing alike.

A layout (stores/layouts.py) turns an identity into keys; a Reader turns a key into a local
file, a Writer writes one. Every Reader answers alike: the file, NotFound (the only answer
a negative cache may remember), or a TransferError saying whether trying again later may
help. Every Writer writes create-only, the first write of a key winning. The kinds
themselves, one module each, are listed in stores/__init__.py.

This module imports no third-party code: `dsymfind status` and `dsymfind config` use its
`redact`, and a folder's Reader needs no HTTP library.
"""

from __future__ import annotations

import os
import re
import threading
import traceback
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from dsymfind import atomic, paths
from dsymfind.errors import DsymfindError


class Server(TypedDict):
    """A configured store, as the settings snapshot keeps it (config_reader.py)."""

    name: str
    url: str
    # The scheme that picks its kind of store (stores/__init__.py): "https", "s3", ...
    kind: str
    layout: str
    casing: str
    # Values may hold ${VAR} references, expanded only when a request is made.
    headers: dict[str, str]
    template: str
    allow_scripts: bool
    # The keys its kind reads, checked there (an s3:// server's endpoint_url, ...).
    settings: dict[str, object]


# The downloader's overall limit for one file (config's download_timeout), far beyond a
# debugger's patience: the helper stops waiting long before, and the download goes on.
TOTAL_TIMEOUT = 900.0
# Larger than any real dSYM we know of (config's max_download_bytes); a cap so a hostile
# store cannot fill the disk.
MAX_BYTES = 4 << 30
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
# A `${VAR}` in a header's value: filled in from the environment when a request is made.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Where `dsymfind publish` keeps a store's build records (stores/builds.py), and where
# earlier versions kept its run manifests, beside its keys: a folder or prefix holding
# either is a store.
STORE_FOLDERS = ("_builds", "_manifests")


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
        # The first bytes of an error answer's body, for a Reader that can explain it
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


class ReaderBug(TransferError):
    """A Reader raised what no Reader should (see `contained`): a bug, and a failure of
    that one fetch; `details` is the traceback, for the log."""

    def __init__(self, message: str, *, details: str) -> None:
        super().__init__(message, retryable=False)
        self.details = details


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
    # The file is already on this machine (a chained helper's answer), left where it is and
    # adopted in place; nothing was written to the caller's path.
    in_place: str | None = None

    @property
    def is_html(self) -> bool:
        """A web page where a file was expected: an error or sign-in page, never a dSYM."""
        return self.content_type in HTML_TYPES


# Told the bytes done and the total (None: unknown) as a transfer goes.
ProgressCallback = Callable[[int, int | None], None]


@dataclass(frozen=True)
class Partial:
    """Where a download keeps its bytes while they arrive, so that a transfer cut part-way
    is continued by the next attempt (by any process) rather than started again. `identity`
    (redacted location and key) must match the sidecar's `source` (stores/transfer.py)."""

    path: str
    identity: str

    def discard(self) -> None:
        """The bytes and their sidecar go: the next attempt starts from byte 0."""
        atomic.unlink_quietly(self.path)
        atomic.unlink_quietly(paths.partial_meta(self.path))


def read_partial_meta(partial_file: str) -> dict[str, object] | None:
    """A partial download's sidecar as written (stores/partial.py); None when it is
    missing, unreadable or not a JSON object. Its values are unchecked: each reader checks
    types."""
    import json  # by the downloader and the commands that show partial downloads

    meta = paths.partial_meta(partial_file)
    try:
        data = json.loads(atomic.read_small_file(meta, paths.PARTIAL_META_MAX))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class Terms:
    """The terms of one fetch: its limits, who follows its progress, what cancels it."""

    limits: Limits = DEFAULT_LIMITS
    progress: ProgressCallback | None = None
    cancel: threading.Event | None = None
    partial: Partial | None = None  # sources that can continue a cut transfer use it


@dataclass(frozen=True)
class Options:
    """How a store is reached: headers for every request to it (tokens: HTTP sends them to
    its origin only), whether keys are URL references (the `template` layout), the server's
    configured name (for messages), the settings its kind reads (`read_settings` of the
    kind's module: an object store's endpoint, ...), and whether the caller asked that
    nothing remembered be trusted (a chained helper is told so too)."""

    headers: Mapping[str, str] = field(default_factory=dict)
    resolve_references: bool = False
    name: str = ""
    settings: Mapping[str, object] = field(default_factory=dict)
    ignore_negative_cache: bool = False


@dataclass(frozen=True)
class Surroundings:
    """What a listing of a store's location found (a kind's `surroundings`, for `doctor`):
    whether anything lies under it, and the places one level up that hold something, as a
    person would write them (a URL or a folder)."""

    holds_something: bool
    neighbours: tuple[str, ...] = ()


# Neighbours named at most: a bucket with hundreds of prefixes gives the first few.
NEIGHBOURS_SHOWN = 8


def nothing_under(parent: str, beside: Sequence[str]) -> Surroundings:
    """An empty location's surroundings, from the places beside it that hold something:
    the one above when it is a store itself (it holds publish's build records), else those."""
    names = {place.rstrip("/").rpartition("/")[2] for place in beside}
    if names.intersection(STORE_FOLDERS):
        return Surroundings(False, (parent,))
    return Surroundings(False, tuple(beside[:NEIGHBOURS_SHOWN]))


class Reader(Protocol):
    """A store reached one way (HTTP, a folder, ...), whatever its layout; made by its
    kind's `open_reader`."""

    location: str

    def where(self, key: str) -> str:
        """The key's location, fit for messages and the log (no credentials)."""
        ...

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        """The key's file written to `dest` (which the caller owns and discards on failure)."""
        ...


@contextmanager
def contained(where: str, partial: Partial | None = None) -> Iterator[None]:
    """Turn an exception that is neither a DsymfindError nor an OSError (a bug) into a
    ReaderBug naming `where`, its traceback kept for the caller's log: one broken store,
    or one answer that trips a bug, must not sink the other candidates or the lookups
    after it. The `partial` download goes too, since its bytes may be what trips the bug
    each time."""
    try:
        yield
    except (DsymfindError, OSError):
        raise
    except Exception as exc:
        if partial is not None:
            partial.discard()
        # Only the type in the message: the text may quote a signed URL or a header.
        raise ReaderBug(
            f"{where}: internal error ({type(exc).__name__})",
            details="".join(traceback.format_exception(exc)),
        ) from exc


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
