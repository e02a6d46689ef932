"""One file to publish, open once: the bytes checked and hashed are the bytes written.

Inputs are verified when they are collected, and read again when their turn comes. A file
changed in between (a build still writing, a copy cut short) must not reach a create-only
store, where its key would then conflict with the good build forever. So the file is
opened once; the structural check runs again through that descriptor, the SHA-256 is taken
through it, and every writer reads through it. Its size and identity are checked after
each pass: a change aborts the write before the object gets its name.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from types import TracebackType

from dsymfind.stores.writers import PublishError

READ_CHUNK = 1 << 20
# What changes when a file's bytes do: ctime cannot be set back by its owner.
Stamp = tuple[int, int, int, int, int]


class Changed(PublishError):
    """The file is not what was verified, or changed while it was read: nothing written."""


class OpenedFile:
    """`size` and `sha256` describe the bytes `chunks()` yields, or it raises Changed."""

    def __init__(
        self,
        path: str,
        check: Callable[[int], str | None] | None = None,
        verified: Stamp | None = None,
    ) -> None:
        """`verified`: the file's stamp when it was verified; `check`: why the open file is
        no longer what was verified, or None."""
        self.path = path
        # Told each count of bytes a target has handed over for good (written, or a part
        # acknowledged): publish's progress.
        self.on_sent: Callable[[int], None] | None = None
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise PublishError(f"{path}: cannot read ({exc.strerror or exc})") from None
        try:
            self._stamp = self._fstat()
            why = "changed" if verified not in (None, self._stamp) else None
            why = why or (check(self._fd) if check is not None else None)
            if why is not None:
                raise Changed(f"{path}: {why} since it was verified; not published")
            self.size, self.sha256 = self._stamp[2], ""
            digest = hashlib.sha256()
            for _ in self._read(READ_CHUNK, digest):
                pass  # the one pass that takes the SHA-256 the later ones are held to
            self.sha256 = digest.hexdigest()
        except BaseException:
            os.close(self._fd)
            raise

    def chunks(self, size: int = READ_CHUNK) -> Iterator[bytes]:
        """The file's bytes in order; after the last one, Changed unless they were exactly
        the `size` bytes of SHA-256 `sha256` and the file did not change meanwhile."""
        return self._read(size, hashlib.sha256())

    def sent(self, count: int) -> None:
        """A target has handed `count` more bytes over for good."""
        if self.on_sent is not None:
            self.on_sent(count)

    def _read(self, size: int, digest: hashlib._Hash) -> Iterator[bytes]:
        """chunks(), hashing into `digest`: the checks end the last pass."""
        offset = 0
        while offset < self.size:
            chunk = os.pread(self._fd, min(size, self.size - offset), offset)
            if not chunk:
                break
            digest.update(chunk)
            offset += len(chunk)
            yield chunk
        if offset != self.size or self._fstat() != self._stamp:
            raise Changed(f"{self.path}: changed while being published; not published")
        if self.sha256 and digest.hexdigest() != self.sha256:
            raise Changed(f"{self.path}: its bytes changed while being published; not published")

    def _fstat(self) -> Stamp:
        try:
            st = os.fstat(self._fd)
        except OSError as exc:
            raise PublishError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(st.st_mode):
            raise Changed(f"{self.path}: not a regular file; not published")
        return stamp_of(st)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> OpenedFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
