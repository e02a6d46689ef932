"""Ctrl-C in `dsymfind fetch` leaves no staging folder behind, and never removes another
run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import (
    HELLO_UUID,
)
from support.processes import BIN
from test_fetch_command import cached, server, server_env, slowly, url_path, wait_for_bytes

from dsymfind.uuids import uuid_hex

__all__ = ["server"]  # the fixture, shared with the fetch tests


def staging_leftovers(cache_dir: Path, uuid: str) -> list[str]:
    tmp = cache_dir / "tmp"
    if not tmp.is_dir():
        return []
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(uuid_hex(uuid)))


def start_fetch(server: ss.SymbolServer, uuid: str) -> subprocess.Popen[str]:
    """`dsymfind fetch UUID` as a process of its own, to be interrupted."""
    return subprocess.Popen(
        [str(BIN / "dsymfind"), "fetch", uuid],
        env=server_env(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_in_fetch_leaves_no_staging_folder(server: ss.SymbolServer, cache_dir: Path) -> None:
    server.route(url_path(HELLO_UUID), slowly(HELLO_UUID))
    proc = start_fetch(server, HELLO_UUID)
    wait_for_bytes(cache_dir, HELLO_UUID, proc)
    (staging,) = staging_leftovers(cache_dir, HELLO_UUID)
    assert (cache_dir / "tmp" / staging / "download").is_file()  # one store: no candidate folder

    proc.send_signal(signal.SIGINT)

    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert err == ""
    assert staging_leftovers(cache_dir, HELLO_UUID) == []
    assert not cached(cache_dir, HELLO_UUID)


STAGING_OWNER = """
import sys
from dsymfind.cache import locks
from dsymfind.paths import CachePaths, staging_prefix
from dsymfind.uuids import uuid_hex
cache = CachePaths(sys.argv[1])
lock = locks.download_lock(cache, sys.argv[2])
lock.acquire()
staging = cache.new_staging(staging_prefix(uuid_hex(sys.argv[2])))
print(staging.name, flush=True)
sys.stdin.read()
"""


def threads_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


@pytest.fixture
def other_downloader(cache_dir: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Another process holding HELLO's download lock, with a staging folder of its own."""
    child = subprocess.Popen(
        [sys.executable, "-c", STAGING_OWNER, str(cache_dir), HELLO_UUID],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    staging = Path(child.stdout.readline().strip())
    assert staging.is_dir()
    yield child, staging
    child.kill()
    child.wait()


def test_ctrl_c_while_waiting_for_another_download_leaves_its_staging_alone(
    server: ss.SymbolServer,
    cache_dir: Path,
    other_downloader: tuple[subprocess.Popen[str], Path],
) -> None:
    _, theirs = other_downloader
    proc = start_fetch(server, HELLO_UUID)
    deadline = time.monotonic() + 30
    while threads_of(proc.pid) < 2:  # its download thread has started
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    # The lock gives no sign of a waiter (filelock polls it): the thread gets time to reach it.
    time.sleep(1.0)
    assert proc.poll() is None
    assert theirs.is_dir()

    proc.send_signal(signal.SIGINT)

    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert theirs.is_dir()
    assert staging_leftovers(cache_dir, HELLO_UUID) == [theirs.name]
