"""Reading untrusted binary files in checked ranges: the PE, PDB and CAB readers' one way in.

A file is opened read-only without blocking (a FIFO must not hang a reader), only
regular files are read, and every range is checked against the file's size by
subtraction, so no offset or length from the file can overflow or reach past it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple


def fits(offset: int, length: int, total: int) -> bool:
    """Whether [offset, offset + length) lies within [0, total), without adding the two."""
    return 0 <= offset <= total and 0 <= length <= total - offset


class BoundedFile(NamedTuple):
    fd: int
    size: int

    def read(self, offset: int, length: int) -> bytes | None:
        """Exactly `length` bytes at `offset`, or None when they are not all in the file."""
        if not fits(offset, length, self.size):
            return None
        data = os.pread(self.fd, length, offset)
        return data if len(data) == length else None  # None too if the file shrank meanwhile


@contextlib.contextmanager
def open_regular(path: str) -> Iterator[BoundedFile]:
    """The regular file at `path`; OSError (strerror set) for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        yield BoundedFile(fd, st.st_size)
    finally:
        os.close(fd)
