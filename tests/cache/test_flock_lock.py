"""The download lock without filelock: it excludes, and is excluded by, filelock's lock on
the same file, in other processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import filelock
import pytest

from dsymfind.cache import locks
from dsymfind.paths import CachePaths

UUID = "6EE904C0-FD1E-A896-B3EB-A5E4C40C334C"


def _holder(path: str, kind: str) -> subprocess.Popen[str]:
    """Another process holding `path` with `kind`'s lock until its stdin closes."""
    take = {
        "filelock": "import filelock; lock = filelock.FileLock(path); lock.acquire()",
        "flock": "from dsymfind.cache import locks; lock = locks.FlockLock(path); lock.acquire()",
    }[kind]
    code = textwrap.dedent(f"""
        import sys
        path = sys.argv[1]
        {take}
        print("held", flush=True)
        sys.stdin.read()
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", code, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "held\n"
    return child


def _let_go(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    assert child.wait(timeout=60) == 0


@pytest.mark.parametrize("kind", ["filelock", "flock"])
def test_a_lock_held_elsewhere_times_out_then_is_taken(tmp_path: Path, kind: str) -> None:
    cache = CachePaths(str(tmp_path / "cache"))
    lock = locks.download_lock(cache, UUID)
    holder = _holder(lock.lock_file, kind)
    try:
        with pytest.raises(locks.LockTimeout):
            lock.acquire(timeout=0)
        with pytest.raises(TimeoutError):
            lock.acquire(timeout=0.2)
        assert not lock.is_locked
        assert locks.is_held(cache, UUID)
    finally:
        _let_go(holder)
    with lock.acquire(timeout=0):
        assert lock.is_locked
        assert locks.is_held(cache, UUID)
    assert not lock.is_locked
    assert not locks.is_held(cache, UUID)


def test_filelock_waits_for_the_download_lock(tmp_path: Path) -> None:
    cache = CachePaths(str(tmp_path / "cache"))
    lock = locks.download_lock(cache, UUID)
    with lock, pytest.raises(filelock.Timeout):
        filelock.FileLock(lock.lock_file).acquire(timeout=0)
    other = filelock.FileLock(lock.lock_file)
    other.acquire(timeout=0)
    other.release()


def test_nested_acquisitions_release_at_the_outermost(tmp_path: Path) -> None:
    cache = CachePaths(str(tmp_path / "cache"))
    lock = locks.download_lock(cache, UUID)
    with lock.acquire():
        with lock:
            assert lock.is_locked
        assert lock.is_locked
        assert locks.is_held(cache, UUID)
    assert not lock.is_locked
    assert not locks.is_held(cache, UUID)
    lock.release()  # released already: nothing happens
    assert not lock.is_locked
