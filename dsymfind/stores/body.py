"""A response body from the socket to the disk, at the pace of the link: the file opened
where the body starts, the room for it checked, the bytes written. Whether and where to
continue, and what to refuse, is stores/transfer.py's policy.

Two costs set a big download's pace on a fast link (BENCHMARKS.md, the "Cold fetch" finding):

- Reading: the client (stores/http11.py) hands the body over as the socket delivers it,
  READ_BYTES at a time (a TLS record at a time over HTTPS), with no copy in Python.
- Writing, hashing and the fsync of each checkpoint are disk and CPU work that would hold
  the socket unread. A `Sink` writes in a thread of its own and hashes in another (os.write,
  hashlib and fsync all release the GIL): SHA-256 of a 199 MB body is about 120 ms of CPU,
  which in the writer's thread lay on the transfer's path. The reader hands pieces over in
  batches of about READ_BYTES, at most IN_FLIGHT of them waiting in memory.
"""

from __future__ import annotations

import base64
import binascii
import errno
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import hashlib

    from dsymfind.stores.base import ProgressCallback
    from dsymfind.stores.partial import Kept

# Bodies are renamed into a cache that lldb and other users read.
FILE_MODE = 0o644
# What a batch for the writer holds (the size of the client's reads, http11.READ_BYTES).
READ_BYTES = 256 * 1024
# Batches waiting for the writer: at most IN_FLIGHT, each under 2 x READ_BYTES, so about
# 16 MiB in memory at worst, many fsyncs' worth of link. A batch is handed over once it
# holds READ_BYTES, BATCH_PIECES pieces (one writev each: IOV_MAX is 1024 on macOS and
# Linux, and a chunked answer may come in bytes) or is BATCH_AGE old, so that a slow link's
# bytes still reach the disk (and a checkpoint) as they come.
IN_FLIGHT = 32
BATCH_PIECES = 512
BATCH_AGE = 0.1
# The sidecar is rewritten, after an fsync of the bytes it counts, after this long or this
# many bytes, whichever comes first: a killed run loses at most that much transfer (on a
# link of 1 GB/s a second would be most of a file).
CHECKPOINT_INTERVAL = 1.0
CHECKPOINT_BYTES = 32 * 1024 * 1024
# The size of a SHA-256 digest (hashlib, which loads libcrypto, only when one is checked).
SHA256_BYTES = 32
# Reading a kept prefix back into the digest of a resumed transfer.
PREFIX_READ_BYTES = 1024 * 1024

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# RFC 9530 dictionary members (`sha-256=:<base64>:`) and RFC 3230 ones (`SHA-256=<base64>`).
_DIGEST_MEMBER = re.compile(r"\s*([A-Za-z0-9_.*-]+)\s*=\s*(.*?)\s*")


class DigestProblem(ValueError):
    """A digest header that does not say a SHA-256 we can check."""


def published_sha256(headers: Mapping[str, str], *, whole_body: bool) -> tuple[str, str] | None:
    """(header name, hex SHA-256) of the object, as the answer publishes it; None when it
    publishes none we know.

    In order: `x-amz-meta-sha256` (hex; what `dsymfind publish` puts on an S3 object,
    also seen through an HTTP front of the bucket), `Repr-Digest` (RFC 9530: of the whole
    object, so it holds for a 206 continuing it too), `Content-Digest` (of this answer's
    content, so only when `whole_body`), and the obsolete `Digest` (RFC 3230).
    """
    value = headers.get("x-amz-meta-sha256")
    if value is not None:
        expected = value.strip().lower()
        if not _SHA256_HEX.fullmatch(expected):
            raise DigestProblem(f"x-amz-meta-sha256 is not a SHA-256 digest ({value[:80]!r})")
        return "x-amz-meta-sha256", expected
    names = ("repr-digest", "content-digest", "digest") if whole_body else ("repr-digest",)
    for name in names:
        value = headers.get(name)
        if value is None:
            continue
        found = _sha256_member(value)
        if found is not None:
            return name, found
    return None


def _sha256_member(value: str) -> str | None:
    found = None
    for member in value.split(","):
        parsed = _DIGEST_MEMBER.fullmatch(member)
        if parsed is not None and parsed[1].lower() == "sha-256":
            # A dictionary's last member of a name wins (RFC 8941, 4.2.2); parameters
            # follow ";" and say nothing about the bytes.
            found = member, parsed[2].split(";", 1)[0].strip()
    if found is None:
        return None
    member, value = found
    if value.startswith(":") and value.endswith(":") and len(value) > 1:
        value = value[1:-1]  # RFC 9530's byte sequence; RFC 3230 has bare base64
    try:
        raw = base64.b64decode(value, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != SHA256_BYTES:
        raise DigestProblem(f"its sha-256 is not a base64 SHA-256 digest ({member[:80]!r})")
    return raw.hex()


@contextmanager
def opened(path: str, start: int) -> Iterator[int]:
    """`path` open for writing at `start`, closed on leaving: the `start` bytes before it are
    kept and everything after them cut off (bytes past the last checkpoint may never have
    landed); with `start` 0, a new or emptied file."""
    if start:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        if start:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


class NoRoom(OSError):
    """The disk beside a body has not the room for the `needed` bytes still to come."""

    def __init__(self, needed: int, free: int) -> None:
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.needed, self.free = needed, free


def check_space(path: str, needed: int) -> None:
    """Raise NoRoom when the file system of `path` has less than `needed` bytes free. Call it
    once the file is truncated to where the body starts, so its old bytes count as free."""
    st = os.statvfs(os.path.dirname(path) or ".")
    free = st.f_bavail * st.f_frsize
    if needed > free:
        raise NoRoom(needed, free)


class Sink:
    """Writes and checkpoints a body's pieces in a thread of its own, and hashes them in
    another (a Digester), so that neither waits for the other.

    `fd` is open for writing at `start`, the bytes before it kept from an earlier attempt
    (hashed from `path` first, when there is a digest to compute). Every checkpoint fsyncs
    the bytes written and then, with `kept`, records their count in the sidecar: a kill at
    any instant leaves a sidecar that never counts a byte not on disk. Leaving it as a
    context manager closes it (see close).
    """

    def __init__(
        self,
        fd: int,
        path: str,
        start: int,
        digest: hashlib._Hash | None,
        kept: Kept | None,
    ) -> None:
        self.fd, self.kept = fd, kept
        self.written = start
        self._hasher = Digester(digest, path, start) if digest is not None else None
        # Pieces gathered on the reader's side: a TLS stream yields 16 KiB records, and a
        # hand-over between the threads per record costs more than the record (a 300 MB
        # HTTPS body took three times as long as httpx's own iterator).
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._batch_since = time.monotonic()
        self._checkpointed = (time.monotonic(), start)
        # Started with the first batch handed over before the end: a body that fits one
        # batch (a small dSYM) is written in the caller's thread at close, with no thread
        # to start and hand the GIL to.
        self._writer: _Worker | None = None

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()  # fsync'ed: the caller renames the body into the cache next

    def put(self, piece: bytes) -> None:
        """Queue a piece; raises the writer's or the hasher's error (a full disk) as soon
        as it is known."""
        if self._writer is not None:
            self._writer.check()
        if self._hasher is not None:
            self._hasher.worker.check()
        self._batch.append(piece)
        self._batch_bytes += len(piece)
        if (
            self._batch_bytes >= READ_BYTES
            or len(self._batch) >= BATCH_PIECES
            or time.monotonic() - self._batch_since >= BATCH_AGE
        ):
            self._hand_over()

    def close(self) -> int:
        """Wait until every piece is written and the file fsync'ed (and the sidecar says so)
        and hashed: the bytes on disk. Raises the writer's or the hasher's error, if any."""
        workers = [] if self._hasher is None else [self._hasher.worker]
        if self._writer is None:
            batch = self._taken()
            for worker in workers:
                worker.give(batch)
            try:
                if batch:
                    self._write(batch)
                self._last_checkpoint()
            finally:
                for worker in workers:
                    worker.end()
        else:
            self._hand_over()
            workers.insert(0, self._writer)
            for worker in workers:
                worker.end()
        for worker in workers:
            worker.check()
        return self.written

    def _taken(self) -> list[bytes]:
        """The batch gathered so far, no longer this side's."""
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        self._batch_since = time.monotonic()
        return batch

    def _hand_over(self) -> None:
        # Taken before it is given: an exception while a full queue blocks one of the
        # gives (a cancel) must not leave it here for close() to give the writer again.
        batch = self._taken()
        if batch:
            if self._writer is None:
                self._writer = _Worker("body-writer", self._write, self._last_checkpoint)
            self._writer.give(batch)
            if self._hasher is not None:
                self._hasher.worker.give(batch)  # the same bytes objects: no copy

    def _write(self, batch: list[bytes]) -> None:
        size = sum(map(len, batch))
        for first in range(0, len(batch), BATCH_PIECES):
            pieces = batch[first : first + BATCH_PIECES]
            done = os.writev(self.fd, pieces)
            if done < sum(map(len, pieces)):  # a short write (a signal, a nearly full disk)
                view = memoryview(b"".join(pieces))[done:]
                while view:
                    view = view[os.write(self.fd, view) :]
        self.written += size
        # Without a sidecar too: the fsync before publication then flushes one checkpoint's
        # bytes, not the whole file, and the disk works while the link does.
        since, at = self._checkpointed
        if self.written - at >= CHECKPOINT_BYTES or time.monotonic() - since >= CHECKPOINT_INTERVAL:
            self._checkpoint()

    def _checkpoint(self, *, final: bool = False) -> None:
        os.fsync(self.fd)  # the caller renames the body into the cache next, or resumes it
        # A whole body's sidecar is removed next (Kept.finish), or the body discarded: the
        # count of the last checkpoint stays true meanwhile, as it never says more than is
        # on disk.
        whole = final and self.kept is not None and self.kept.total == self.written
        if self.kept is not None and not whole:
            self.kept.record(self.written)
        self._checkpointed = (time.monotonic(), self.written)

    def _last_checkpoint(self) -> None:
        self._checkpoint(final=True)


class Digester:
    """Feeds `digest` the `start` bytes kept at the head of `path`, then every batch given,
    in order, in a thread of its own: a resumed body is hashed whole, its prefix once."""

    def __init__(self, digest: hashlib._Hash, path: str, start: int) -> None:
        self.digest, self.path, self.start = digest, path, start
        self.worker = _Worker("body-hasher", self._hash, first=self._hash_prefix)

    def _hash(self, batch: list[bytes]) -> None:
        for piece in batch:
            self.digest.update(piece)

    def _hash_prefix(self) -> None:
        with open(self.path, "rb") as kept:
            left = self.start
            while left > 0:
                block = kept.read(min(left, PREFIX_READ_BYTES))
                if not block:
                    raise OSError(f"{self.path}: shorter than its {self.start} bytes kept")
                self.digest.update(block)
                left -= len(block)


class _Worker:
    """A thread that runs `first`, then `each` batch given in order, then `last` once the
    end is given. Its error is kept for the reader, as an OSError, and the batches still
    given are taken and dropped, so that the reader never blocks on a full queue."""

    def __init__(
        self,
        name: str,
        each: Callable[[list[bytes]], None],
        last: Callable[[], None] | None = None,
        first: Callable[[], None] | None = None,
    ) -> None:
        self.name, self.each, self.last, self.first = name, each, last, first
        self.error: OSError | None = None
        self._queue: queue.Queue[list[bytes] | None] = queue.Queue(IN_FLIGHT)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def give(self, batch: list[bytes]) -> None:
        self._queue.put(batch)

    def end(self) -> None:
        """Give the end marker and wait for the thread."""
        self._queue.put(None)
        self._thread.join()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        ended = False  # the reader's end marker was taken
        try:
            if self.first is not None:
                self.first()
            while (batch := self._queue.get()) is not None:
                self.each(batch)
            ended = True
            if self.last is not None:
                self.last()
        except BaseException as exc:  # noqa: BLE001 - the reader raises it, in its own thread
            failed = OSError(f"{self.name} failed: {exc!r}")
            self.error = exc if isinstance(exc, OSError) else failed
            while not ended and self._queue.get() is not None:
                pass


# Progress is for a human watching: ten updates a second is smooth, more is noise.
PROGRESS_INTERVAL = 0.1
PROGRESS_BYTES = 1024**2


class Meter:
    """Calls the progress callback when 100 ms or 1 MiB have gone by, and once at the end."""

    def __init__(self, callback: ProgressCallback | None, total: int | None) -> None:
        self.callback = callback
        self.total = total
        self.last_time = time.monotonic()
        self.last_bytes = 0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last_time < PROGRESS_INTERVAL and done - self.last_bytes < PROGRESS_BYTES:
            return
        self.last_time, self.last_bytes = now, done
        if self.callback is not None:
            self.callback(done, self.total)

    def finish(self, done: int) -> None:
        if self.callback is not None:
            self.callback(done, self.total)
