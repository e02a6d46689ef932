"""Stores in a folder: a local or mounted symbol store (`file:///srv/symbols/` or a path).

Keys are relative paths below the folder and never leave it. Only regular files are
copied, opened without blocking (a FIFO planted in a store must not hang a fetch), and
bounded by the same size limit as a download.
"""

from __future__ import annotations

import errno
import os
import stat
import urllib.parse
import urllib.request
from typing import BinaryIO

from dsymfind.fetch.sources import (
    Fetched,
    Limits,
    NotFound,
    Options,
    Session,
    Terms,
    TooLarge,
    TransferError,
)

_COPY_CHUNK = 1024**2
# Absent, or a path through something that is not a folder: the store does not have it.
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR})


class FolderSource:
    def __init__(self, location: str, session: Session, options: Options) -> None:
        self.location = location
        self.root = os.path.normpath(folder_of(location))

    def path(self, key: str) -> str:
        """The key's file; refused when the key would lead out of the folder."""
        relative = urllib.parse.unquote(key).lstrip("/")
        path = os.path.normpath(os.path.join(self.root, relative))
        if os.path.commonpath([path, self.root]) != self.root or path == self.root:
            raise TransferError(
                f"{self.root}: refused key {key!r}: it leaves the store", retryable=False
            )
        return path

    def where(self, key: str) -> str:
        try:
            return self.path(key)
        except TransferError:
            return f"{self.root}/{key}"

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in _ABSENT:
                raise NotFound(f"{path}: not found") from exc
            raise TransferError(f"{path}: cannot read ({exc.strerror})", retryable=False) from exc
        with open(fd, "rb") as src:
            size = _regular_size(src.fileno(), path, terms.limits)
            _copy(src, dest, path, size, terms)
        return Fetched(path, size, None)


def folder_of(location: str) -> str:
    """The folder a `file:` URL or an absolute path names."""
    if os.path.isabs(location):
        return location
    parts = urllib.parse.urlsplit(location)
    if parts.netloc not in ("", "localhost"):
        raise TransferError(
            f"{location}: a file: URL names a folder on this machine", retryable=False
        )
    return urllib.request.url2pathname(parts.path)


def _regular_size(fd: int, path: str, limits: Limits) -> int:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotFound(f"{path}: not a regular file")
    if st.st_size > limits.max_bytes:
        raise TooLarge(f"{path}: {st.st_size} bytes, over the {limits.max_bytes}-byte limit")
    return st.st_size


def _copy(src: BinaryIO, dest: str, path: str, size: int, terms: Terms) -> None:
    done = 0
    try:
        with open(dest, "xb") as out:
            while chunk := src.read(_COPY_CHUNK):
                if terms.cancel is not None and terms.cancel.is_set():
                    raise TransferError("cancelled", retryable=False)
                done += len(chunk)
                if done > size:
                    raise TransferError(f"{path}: grew while being read", retryable=True)
                out.write(chunk)
                if terms.progress is not None:
                    terms.progress(done, size)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise TransferError(
            f"{path}: cannot copy ({exc.strerror or exc})", retryable=False
        ) from exc


SOURCE = FolderSource
