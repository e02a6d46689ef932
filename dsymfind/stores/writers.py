"""Where `dsymfind publish` writes: create-only stores, where the first write of a key wins.

A Writer never replaces an object. A key that already holds the same bytes (same
SHA-256) is `exists`; one that holds other bytes is `conflict`, and is left alone. So
any number of publishers of the same build, at once, end with one object per key and
nobody fails. The targets themselves belong to their kinds of store: stores/folder.py,
stores/s3/store.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from dsymfind.errors import DsymfindError

PUBLISHED, EXISTS, CONFLICT, FAILED = "published", "exists", "conflict", "failed"
# Dry runs: what would happen.
WOULD_PUBLISH = "would publish"
_CHUNK = 1 << 20
# What read_small reads at most: the store's own small documents (build records, intents),
# never a symbol file. A larger object there is not one of ours.
SMALL_LIMIT = 16 * 1024 * 1024


class PublishError(DsymfindError):
    """One object could not be written or checked; the message names it and says why."""


class WriterUnusable(PublishError):
    """The target cannot be written at all (access denied, no credentials): the run stops."""


@dataclass(frozen=True)
class Outcome:
    state: str  # PUBLISHED, EXISTS, CONFLICT or WOULD_PUBLISH
    message: str = ""


class Body(Protocol):
    """What a writer writes from: publish's opened, verified file (publish/opened.py)."""

    size: int
    sha256: str

    def chunks(self, size: int = ...) -> Iterator[bytes]:
        """The bytes in order; PublishError after the last one when they were not what was
        verified."""
        ...

    def sent(self, count: int) -> None:
        """`count` more bytes were handed over for good (written, or a part acknowledged)."""
        ...


class Writer(Protocol):
    # Where the store lies on this machine (a folder), so it is never read back as an input;
    # None for a remote one.
    local_root: str | None

    def where(self, key: str) -> str:
        """The key as a person finds it: a path or an s3:// URL."""
        ...

    def check(self, key: str, sha256: str) -> Outcome:
        """What writing would do, writing nothing: EXISTS, CONFLICT or WOULD_PUBLISH."""
        ...

    def put(self, key: str, body: Body) -> Outcome:
        """Create `key` with the bytes of `body`, unless the key exists, telling `body.sent`
        of the bytes as they are handed over. A Changed from the body, or an interruption
        (KeyboardInterrupt), leaves no object behind, nor any part of one."""
        ...


class Listed(NamedTuple):
    """One object of a store, as a listing shows it: no read of the object itself."""

    key: str  # relative to the store's root or prefix
    size: int
    modified: float  # seconds since the epoch


class Manager(Writer, Protocol):
    """A writer that also lists, reads back and removes: what keeps a store's own records
    (builds, retirements) and what retires builds needs. Folders and S3 buckets are both."""

    def listed(self, prefix: str) -> Iterator[Listed]:
        """Every object whose key starts with `prefix`, in key order (S3's listing order);
        temporary files of a writer at work are not objects."""
        ...

    def read_small(self, key: str, limit: int = SMALL_LIMIT) -> bytes | None:
        """The object's bytes; None when it is absent; PublishError when it is larger than
        `limit` or cannot be read."""
        ...

    def create_small(self, key: str, data: bytes) -> bool:
        """Create `key` holding `data`, whole or not at all; False when the key is taken
        (whatever it holds), so two writers of one key never both succeed."""
        ...

    def delete(self, keys: Sequence[str]) -> list[tuple[str, str]]:
        """Remove the objects; an absent key is no failure. The failures, each with why."""
        ...

    def may_delete(self) -> str | None:
        """None when these credentials may delete here; else why not, in one line, asked
        before anything is deleted."""
        ...


def sha256_of(path: str) -> tuple[int, str]:
    """Size and SHA-256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def compared(sha256: str, theirs: str | None, where: str) -> Outcome:
    """The outcome for a key found taken: the same bytes are `exists`, anything else conflicts."""
    if theirs == sha256:
        return Outcome(EXISTS)
    if theirs is None:
        return Outcome(CONFLICT, f"{where} exists and its SHA-256 is unknown; left alone")
    return Outcome(CONFLICT, f"{where} holds other bytes (SHA-256 {theirs}); left alone")
