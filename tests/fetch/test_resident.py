"""The resident downloader: real helpers, real downloaders, a real HTTP server on 127.0.0.1.

The first miss leaves a resident beside its downloader; a later miss is downloaded by a
child the resident forks (no interpreter start), in the asking helper's environment, and
the resident goes when idle, when its socket goes, or when asked by other code. A resident
that does not answer costs a helper a spawned downloader, never its deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import GREET_UUID, HELLO_UUID, write_config
from support.processes import BIN, run_helper, started_as_downloader, wait_for
from support.served import native_tree, url_path

from dsymfind import settings
from dsymfind.fetch import resident
from dsymfind.paths import CachePaths


def _processes_of(uuid: str, home: Path) -> list[int]:
    """Processes started as the downloader of `uuid` for this test's HOME: the downloader,
    the resident it forked, and the resident's children (a fork keeps its parent's words)."""
    return started_as_downloader(uuid, str(home))


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer(native_tree(tmp_path / "served")) as server:
        yield server


@pytest.fixture
def with_resident(
    served: ss.SymbolServer,
    config_file: Path,
    cache_dir: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[int]:
    """The first miss made (HELLO), its resident listening; the resident's pid. Every
    process of this test's downloaders is gone afterwards."""
    write_config(
        config_file,
        f"timeout = 30\n[[servers]]\nurl = '{served.url}/'\nlayout = 'native'\n"
        "headers = { X-Asker = '${ASKER}' }\n",
    )
    monkeypatch.setenv(settings.RESIDENT_ENV, "60")
    monkeypatch.setenv("ASKER", "first")
    run = run_helper(HELLO_UUID)
    assert "DBGDSYMPath" in run.entry(HELLO_UUID)
    # The downloader exits once done; what stays is its resident.
    wait_for(lambda: len(_processes_of(HELLO_UUID, isolated_home)) == 1)
    (pid,) = _processes_of(HELLO_UUID, isolated_home)
    assert os.path.exists(resident.socket_path(CachePaths(str(cache_dir))))
    try:
        yield pid
    finally:
        for uuid in (HELLO_UUID, GREET_UUID):
            for leftover in _processes_of(uuid, isolated_home):
                with_signal(leftover, signal.SIGCONT)
                with_signal(leftover, signal.SIGKILL)


def with_signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def test_a_later_miss_is_downloaded_by_a_child_of_the_resident(
    with_resident: int,
    served: ss.SymbolServer,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = threading.Event()

    def held(exchange: ss.Exchange) -> None:
        gate.wait(30)
        ss.serve_root(exchange)

    served.route(url_path(GREET_UUID), held)
    monkeypatch.setenv("ASKER", "second")
    helper = subprocess.Popen(
        [str(BIN / "dsymForUUID"), GREET_UUID],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: served.count(url_path(GREET_UUID)) > 0)
        # Its download runs in a process forked by the resident, none spawned for GREET.
        children = [pid for pid in _processes_of(HELLO_UUID, isolated_home) if pid != with_resident]
        assert len(children) == 1
        assert _parent_of(children[0]) == with_resident
        assert _processes_of(GREET_UUID, isolated_home) == []
    finally:
        gate.set()
        out, err = helper.communicate(timeout=60)
    assert err == b"" and helper.returncode == 0
    assert b"DBGDSYMPath" in out and GREET_UUID.encode() in out
    # In the asking helper's environment, not the resident's.
    asked = [r for r in served.requests if r.path == url_path(GREET_UUID)]
    assert asked and all(r.headers.get("x-asker") == "second" for r in asked)
    # And the resident is still there for the next one.
    assert _processes_of(HELLO_UUID, isolated_home) == [with_resident]


def test_a_stopped_resident_costs_a_spawned_downloader_not_the_deadline(
    with_resident: int, isolated_home: Path
) -> None:
    os.kill(with_resident, signal.SIGSTOP)
    try:
        started = time.monotonic()
        run = run_helper(GREET_UUID)
        waited = time.monotonic() - started
    finally:
        os.kill(with_resident, signal.SIGCONT)
    assert "DBGDSYMPath" in run.entry(GREET_UUID)
    assert waited < 30  # the configured timeout: answered by a spawned downloader instead


def test_a_resident_asked_by_other_code_exits(with_resident: int, cache_dir: Path) -> None:
    path = resident.socket_path(CachePaths(str(cache_dir)))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as asking:
        asking.settimeout(30)
        resident._connect(asking, path)  # by its folder when the path is too long
        asking.sendall(resident._encoded(("another version",), ["_download", GREET_UUID], {}))
        asking.shutdown(socket.SHUT_WR)
        assert asking.recv(64) == resident.STALE
    wait_for(lambda: not _alive(with_resident))
    assert not os.path.exists(path)
    # The next miss gets a downloader, and that one a resident, of this code.
    run = run_helper(GREET_UUID)
    assert "DBGDSYMPath" in run.entry(GREET_UUID)


def test_a_resident_whose_cache_went_exits(with_resident: int, cache_dir: Path) -> None:
    os.unlink(resident.socket_path(CachePaths(str(cache_dir))))
    wait_for(lambda: not _alive(with_resident))


def test_a_resident_left_idle_exits(
    with_resident: int, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = resident.socket_path(CachePaths(str(cache_dir)))
    os.kill(with_resident, signal.SIGKILL)
    wait_for(lambda: not _alive(with_resident))
    # A killed resident's socket stays behind: the next downloader replaces it.
    assert os.path.exists(path)
    monkeypatch.setenv(settings.RESIDENT_ENV, "0.5")
    run_helper(GREET_UUID)
    wait_for(lambda: not os.path.exists(path))


def test_garbage_asked_of_a_resident_gets_no_answer_and_it_goes_on(
    with_resident: int, cache_dir: Path
) -> None:
    path = resident.socket_path(CachePaths(str(cache_dir)))
    for garbage in (b"", b"\0", b"9\0x\0", b"1\0s\0" + b"5\0w\0", b"x" * 100):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as asking:
            asking.settimeout(30)
            resident._connect(asking, path)  # by its folder when the path is too long
            asking.sendall(garbage)
            asking.shutdown(socket.SHUT_WR)
            assert asking.recv(64) == b""
    assert _alive(with_resident)
    run = run_helper(GREET_UUID)
    assert "DBGDSYMPath" in run.entry(GREET_UUID)


def test_no_resident_when_turned_off(
    served: ss.SymbolServer, config_file: Path, cache_dir: Path, isolated_home: Path
) -> None:
    write_config(
        config_file,
        f"timeout = 30\nresident_downloader = 0\n[[servers]]\nurl = '{served.url}/'\n"
        "layout = 'native'\n",
    )
    os.environ.pop(settings.RESIDENT_ENV, None)
    try:
        run = run_helper(HELLO_UUID)
    finally:
        os.environ[settings.RESIDENT_ENV] = "0"
    assert "DBGDSYMPath" in run.entry(HELLO_UUID)
    wait_for(lambda: _processes_of(HELLO_UUID, isolated_home) == [])
    assert not os.path.exists(resident.socket_path(CachePaths(str(cache_dir))))


def test_requests_round_trip_and_malformed_ones_are_refused() -> None:
    env = {"HOME": "/h", "EMPTY": "", "EQUATION": "a=b"}
    request = resident._decoded(resident._encoded(("v", "py"), ["_download", "U"], env))
    assert request is not None
    assert (request.stamp, request.words) == (("v", "py"), ["_download", "U"])
    assert request.env == env
    for bad in (b"", b"1\0v", b"3\0v\0", b"0\0" + b"0\0" + b"NOEQUALS\0", b"x\0", b"0\0-1\0"):
        assert resident._decoded(bad) is None


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_resident_setting_in_the_environment_is_refused(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(settings.RESIDENT_ENV, value)
    with pytest.raises(settings.ConfigError, match=settings.RESIDENT_ENV):
        settings.load()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
