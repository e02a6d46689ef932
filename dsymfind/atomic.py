"""Files others may read appear whole or not at all: temp sibling, then rename.

Imported on the helper's hot path: built-ins only.
"""

import _stat as stat  # built in: the stat module is Python, and os loads it
import marshal

from dsymfind import _bare_os, paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def read_marshal(path: str) -> "Any":
    """A marshalled value, or None when missing or damaged (a broken cache file is a miss).

    The caller checks the shape: a damaged or foreign file must read as a miss.
    """
    try:
        data = _read_whole(path)
    except OSError:
        return None
    try:
        # loads() of the whole file: load() from a file reads it object by object, which
        # made a 10,000-bundle index state take 110 ms instead of 16.
        return marshal.loads(data)  # noqa: S302 - our own files, in a private folder
    except (OSError, EOFError, ValueError, TypeError):
        return None


def _read_whole(path: str) -> bytes:
    """A file's bytes in four system calls (open, fstat, read, close): open() adds a
    buffered reader's ioctl, two lseeks, a second fstat and a read to find the end."""
    fd = _bare_os.open(path, _bare_os.O_RDONLY | _bare_os.O_CLOEXEC)
    try:
        return read_to_end(fd, _bare_os.fstat(fd).st_size, None)
    finally:
        _bare_os.close(fd)


def read_to_end(fd: int, size: int, limit: int | None) -> bytes:
    """The bytes of a file of `size` bytes (its fstat), at most `limit`.

    The buffer is sized by the file, not by the limit: a 1 MiB read of a 200-byte record
    costs an mmap, an mremap, a munmap and a page fault, on each poll of a waiting helper.
    A regular file's read comes back short only at its end: one byte more tells.
    """
    chunks, got, want = [], 0, size + 1
    while limit is None or got < limit:
        step = want if limit is None else min(want, limit - got)
        data = _bare_os.read(fd, step)
        chunks.append(data)
        got += len(data)
        if len(data) < step:
            break
        want = 1 << 20  # it grew meanwhile: read on until the end
    return b"".join(chunks)


def write_marshal(path: str, value: "Any") -> bool:
    """Best effort: False when it could not be written (a cache that only saves time)."""
    try:
        write_bytes(path, marshal.dumps(value), fsync=False)
    except (OSError, ValueError):
        return False
    return True


def write_bytes(path: str, data: bytes, *, fsync: bool = True, mode: int = 0o644) -> None:
    """Write `data` to `path` atomically, making the folder (private) when missing."""
    # A bare file name ("out.ips") lies in the working folder, whose name is not "".
    _bare_os.makedirs(_bare_os.dirname(path) or ".", mode=0o700, exist_ok=True)
    tmp = paths.temp_sibling(path)
    try:
        fd = _bare_os.open(
            tmp, _bare_os.O_WRONLY | _bare_os.O_CREAT | _bare_os.O_TRUNC | _bare_os.O_CLOEXEC, mode
        )
        with open(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                _bare_os.fsync(f.fileno())
        _bare_os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise


def write_small_marshal(path: str, value: "Any") -> bool:
    """write_marshal of a small value into a folder that exists (write_into_folder)."""
    try:
        write_into_folder(path, marshal.dumps(value))
    except OSError:
        return False
    return True


def write_into_folder(path: str, data: bytes) -> None:
    """`data` into `path`, in a folder that exists, for writers of thousands (`dsymfind
    index`, a batch of reports): no folder made, the bytes in one write call, no file
    object. OSError when it cannot be written."""
    tmp = paths.temp_sibling(path)
    try:
        _write_file(tmp, data)
        _bare_os.replace(tmp, path)
    except OSError:
        unlink_quietly(tmp)
        raise


class StagedFiles:
    """Files written into a staging folder, under their own names: nobody reads a staging
    folder, which takes its final name whole, in one rename (a crash before it leaves only
    debris). `sync` fsyncs them all once all are written, before that rename: once named,
    they must survive a crash as the name does. Written first, then fsynced: the first
    fsync's journal commit carries the others, which then cost little. Leaving the `with`
    closes what was not synced."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def __enter__(self) -> "StagedFiles":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            _bare_os.close(fd)

    def write(self, path: str, data: bytes) -> None:
        """`data` as the file `path` (made or emptied), in a folder that exists."""
        self._fds.append(_written(path, data))

    def adopt(self, path: str) -> None:
        """A file written before (an unpacked archive's), fsynced with the others."""
        flags = _bare_os.O_RDONLY | _bare_os.O_CLOEXEC | _bare_os.O_NOFOLLOW
        self._fds.append(_bare_os.open(path, flags))

    def sync(self) -> None:
        for fd in self._fds:
            _bare_os.fsync(fd)
        self.close()


def _write_file(path: str, data: bytes) -> None:
    """`data` into the file `path`, made or emptied. OSError when it cannot be written."""
    _bare_os.close(_written(path, data))


def _written(path: str, data: bytes) -> int:
    """The descriptor of the file `path`, made or emptied, holding `data`: the bytes in one
    write call, no file object (a fstat and a buffer less)."""
    fd = _bare_os.open(
        path, _bare_os.O_WRONLY | _bare_os.O_CREAT | _bare_os.O_TRUNC | _bare_os.O_CLOEXEC, 0o644
    )
    try:
        written = _bare_os.write(fd, data)
    except BaseException:
        _bare_os.close(fd)
        raise
    if written != len(data):
        _bare_os.close(fd)
        raise OSError(f"{path}: short write")
    return fd


def replace_verified(
    final: str, fill: "Callable[[str], object]", check: "Callable[[str], None]"
) -> None:
    """Make `final` from a temp sibling that `fill` writes and `check` accepts (it raises
    to refuse); a refused or failed file never takes the final name and is removed."""
    tmp = paths.temp_sibling(final)
    try:
        fill(tmp)
        check(tmp)
        _bare_os.replace(tmp, final)
    finally:
        unlink_quietly(tmp)


def unlink_quietly(path: str) -> None:
    try:  # noqa: SIM105 - contextlib would cost the hot path an import
        _bare_os.unlink(path)
    except OSError:
        pass


def read_small_file(path: str, limit: int) -> bytes:
    """A regular file's bytes, at most `limit`; never blocks on a FIFO or device."""
    fd = _bare_os.open(path, _bare_os.O_RDONLY | _bare_os.O_NONBLOCK | _bare_os.O_CLOEXEC)
    try:
        st = _bare_os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        return read_to_end(fd, st.st_size, limit)
    finally:
        _bare_os.close(fd)
