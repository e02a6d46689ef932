"""The per-UUID locks: flocks on `<cache>/locks/<UUIDHEX>.lock` (one download, or one
removal, at a time) and `<UUIDHEX>.use.lock` (helpers answering from the UUID's cache
entries, shared, against their removal, exclusive).

Free again the instant their holder dies, so a killed process blocks nobody. Lock
files are never deleted: deleting one would let two processes hold "the" lock at once.
A module of its own so the helper can probe and claim locks without loading the
downloader.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

TYPE_CHECKING = False  # the helper's miss path imports this module: no typing import
if TYPE_CHECKING:
    import filelock

# How often a lock that is not free yet is tried again, as filelock does.
RETRY_INTERVAL = 0.05


def download_lock(cache: CachePaths, uuid: str) -> FlockLock:
    """The UUID's download lock: a plain flock (filelock's import costs the downloader more
    than its own start-up), on the same file and with the same semantics as `key_lock`'s."""
    # Its folder is made when the lock file's open finds it missing (FlockLock): not tried
    # before every lock, where it is there but in a new cache.
    return FlockLock(cache.lock_file(uuid_hex(uuid)))


class Held:
    """What `FlockLock.acquire` returns: leaving its `with` gives back that acquisition."""

    def __init__(self, lock: FlockLock) -> None:
        self.lock = lock

    def __enter__(self) -> FlockLock:
        return self.lock

    def __exit__(self, *_exc: object) -> None:
        self.lock.release()


class LockTimeout(TimeoutError):
    """The lock stayed held by another process past the timeout."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the lock {path} is held by another process")
        self.lock_file = path


class FlockLock:
    """An exclusive flock on `path`, as `filelock.FileLock` takes it on Unix (so processes
    using either exclude each other): `acquire(timeout=)` waits up to `timeout` seconds (a
    negative one: for ever, 0: one try), raising LockTimeout, and may be used as `with
    lock.acquire(...)` or `with lock`; acquiring an object that holds it already nests."""

    def __init__(self, path: str) -> None:
        self.lock_file = path
        self._fd: int | None = None
        self._depth = 0

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float = -1) -> Held:
        if self._fd is None:
            self._fd = self._taken(timeout)
        self._depth += 1
        return Held(self)

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth <= 0:
            fd, self._fd, self._depth = self._fd, None, 0
            os.close(fd)  # releases the flock

    def __enter__(self) -> FlockLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def _taken(self, timeout: float) -> int:
        fd = self._opened()
        ends = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno != errno.EACCES:  # contention on some file systems
                    os.close(fd)
                    raise
            else:
                return fd
            if timeout >= 0 and time.monotonic() >= ends:
                os.close(fd)
                raise LockTimeout(self.lock_file)
            left = RETRY_INTERVAL if timeout < 0 else ends - time.monotonic()
            time.sleep(min(RETRY_INTERVAL, max(left, 0.0)))

    def _opened(self) -> int:
        """The lock file, open; its folder (private) made when missing."""
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        try:
            return os.open(self.lock_file, flags, 0o600)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(self.lock_file), mode=0o700, exist_ok=True)
        return os.open(self.lock_file, flags, 0o600)


def key_lock(path: str, *, timeout: float = -1) -> filelock.BaseFileLock:
    """The flock that lets one process at a time fetch and place one key (a UUID in the
    cache, a PDB in a symbol store); its folder is made private when missing."""
    import filelock  # only for those who take a lock: the helper only probes them

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return filelock.FileLock(path, timeout=timeout)


def is_held(cache: CachePaths, uuid: str) -> bool:
    """Whether a download of `uuid` is under way somewhere, without waiting for it.

    A plain flock probe (what filelock takes on Unix), so probing costs no filelock
    import and creates nothing: no lock file means nobody ever held it.
    """
    return _probe(cache.lock_file(uuid_hex(uuid)))


def in_use(cache: CachePaths, uuid: str) -> bool:
    """Whether a helper is answering from the cache entries of `uuid` right now (its
    shared claim on their use lock, `answering`), without waiting or creating anything."""
    return _probe(cache.use_lock_file(uuid_hex(uuid)))


def answering(cache: CachePaths, entry_hex: str) -> int | None:
    """A shared claim on the use lock of the cache entries `dsyms/<HEX>` and
    `executables/<HEX>`, taken without waiting: held by a helper for as long as it may
    answer with a path inside them, so no removal (which claims it exclusively, without
    waiting) takes them meanwhile. The descriptor that holds it, or None while an entry
    of that name is being removed."""
    return try_claim(cache.use_lock_file(entry_hex), shared=True)


def _probe(path: str) -> bool:
    """Whether anyone holds an flock on `path`, by taking it exclusively without waiting."""
    try:
        # O_NONBLOCK: a FIFO planted in its place must not hang the probe.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        # Contention is EWOULDBLOCK, or EACCES on some file systems: both mean "held".
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)  # also releases the probe's own lock, if it won one
    return False


def try_claim(path: str, *, shared: bool = False) -> int | None:
    """An flock on `path` taken without waiting: the descriptor that holds it (closing it
    releases the claim; a killed holder frees it), or None while another process holds it
    exclusively (or, for an exclusive claim, at all). `shared`: many may hold it at once.

    Plain fcntl, for claims taken on the helper's own path, where filelock's import would
    cost more than the helper's start-up.
    """
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


# How often a shared claim that is not free yet is tried again.
SHARED_RETRY = 0.05


class SharedClaim:
    """A shared flock on `path`, waited for up to `timeout` seconds, held inside `with`:
    many holders at once (each making a worktree of one clone), none while `try_claim`
    holds it (gc removing that clone). Entering raises TimeoutError when it stays taken."""

    def __init__(self, path: str, *, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self._fd: int | None = None

    def __enter__(self) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        ends = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= ends:
                    os.close(fd)
                    raise TimeoutError(f"{self.path} is held past the deadline") from None
                time.sleep(SHARED_RETRY)
        self._fd = fd

    def __exit__(self, *_exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the claim
            self._fd = None
