"""`dsymfind status` as a real process: an empty or missing cache, a populated one, and
download records left by real processes, one holding its lock and one gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.crash_reports import KERNEL_UUID
from support.fixtures import GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS
from support.negative import negative_marker, remember_absent
from support.processes import run_cli
from support.served import DWARF_FILES, server_env
from test_fetch_command import server

from dsymfind import markers, paths, processes
from dsymfind.cache import records
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry, uuid_hex

__all__ = ["server"]  # the fixture, shared with the fetch tests

LIVE_UUID = "0D3A5C1E-7F29-3B48-9E61-2C5D8A4F7B03"
STALE_UUID = "5E8F2A97-1C34-3D6B-A0F5-7B9C3E2D1A48"
# A child that writes a download's status record the way the downloader does, with
# progress, optionally under the download lock; it waits for its stdin to close.
DOWNLOADER_STAND_IN = """
import sys, time
from dsymfind.cache import locks, records
from dsymfind.paths import CachePaths
cache = CachePaths(sys.argv[1])
uuid, hold = sys.argv[2], sys.argv[3] == "hold"
lock = locks.download_lock(cache, uuid)
if hold:
    lock.acquire()
writer = records.StatusWriter(cache, uuid)
time.sleep(records.MIN_WRITE_INTERVAL * 2)  # a first progress write is never throttled
writer.progress("http://127.0.0.1:9/x", 2048, 8192)
print("ready", flush=True)
sys.stdin.read()
"""


def status_json(env: dict[str, str] | None = None) -> dict[str, object]:
    done = run_cli("status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


@pytest.fixture
def stand_in(cache_dir: Path) -> Iterator[object]:
    children: list[subprocess.Popen[str]] = []

    def start(uuid: str, *, hold: bool) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                DOWNLOADER_STAND_IN,
                str(cache_dir),
                uuid,
                "hold" if hold else "no",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(child)
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        return child

    yield start
    for child in children:
        child.kill()
        child.wait()


def test_missing_cache_is_reported_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "no-cache-here"
    env = dict(os.environ, DSYMFIND_CACHE_DIR=str(missing))
    report = status_json(env)
    assert report == {
        "cache_dir": str(missing),
        "exists": False,
        "size_bytes": 0,
        "dsym_entries": 0,
        "executables": 0,
        "uuid_links": 0,
        "system_image_slices": 0,
        "system_image_files": 0,
        "system_os_builds": [],
        "source_worktrees": 0,
        "source_worktrees_bytes": 0,
        "negative_cache": 0,
        "negative_entries": [],
        "negative_entries_unused": 0,
        "servers_in_backoff": [],
        "downloads": [],
        "resident_downloader": None,
    }
    text = run_cli("status", env=env)
    assert text.returncode == 0
    assert text.stdout.splitlines()[0] == f"cache: {missing} (not created yet)"
    assert "downloads: none in flight" in text.stdout
    assert not missing.exists()


def test_counts_after_real_fetches(server: ss.SymbolServer, cache_dir: Path) -> None:
    env = server_env(server)
    fetched = run_cli(
        "fetch", HELLO_UUID, GREET_UUID, UNIVERSAL_UUIDS["arm64"], KERNEL_UUID, env=env
    )
    assert fetched.returncode == 1  # the kernel's UUID is not on the server
    cache = CachePaths(str(cache_dir))
    expired = remember_absent(cache_dir, STALE_UUID, env)
    os.utime(expired, (time.time() - 7200, time.time() - 7200))  # older than the 3600 s TTL
    markers.mark(cache.failing_server_marker(f"{server.url}/"))

    report = status_json(env)

    assert report["exists"] is True
    assert report["dsym_entries"] == 3  # hello, libgreet, and one bundle for both universal slices
    assert report["uuid_links"] == 4
    assert report["executables"] == 0
    assert report["negative_cache"] == 1
    # The miss asked for the executable alone too: both are remembered, for one UUID.
    kinds = {e["what"]: e for e in report["negative_entries"]}  # type: ignore[union-attr]
    assert set(kinds) == {"dSYM", "executable"}
    absent = kinds["dSYM"]
    assert absent["uuid"] == kinds["executable"]["uuid"] == KERNEL_UUID
    assert absent["not_found"] == [f"{server.url}/{tree_entry('', KERNEL_UUID).lstrip('/')}"]
    assert 3500 < absent["seconds_left"] <= 3600
    served_bytes = sum(
        DWARF_FILES[u].stat().st_size for u in (HELLO_UUID, GREET_UUID, UNIVERSAL_UUIDS["arm64"])
    )
    assert isinstance(report["size_bytes"], int)
    assert report["size_bytes"] >= served_bytes
    (backoff,) = report["servers_in_backoff"]  # type: ignore[misc]
    assert backoff["url"] == f"{server.url}/"
    assert 0 < backoff["seconds_left"] <= 60
    text = run_cli("status", env=env).stdout
    assert "entries: 3 dSYMs, 0 executables, 4 UUID links" in text
    assert "negative cache: 1 UUIDs no server had recently" in text
    assert f"  {KERNEL_UUID} dSYM: not on {server.url}/" in text
    assert f"server in backoff: 127.0.0.1:{server.url.rsplit(':', 1)[1]}" in text


def test_download_in_flight_and_stale_record(stand_in, cache_dir: Path) -> None:  # type: ignore[no-untyped-def]
    live = stand_in(LIVE_UUID, hold=True)
    gone = stand_in(STALE_UUID, hold=False)
    gone.kill()
    gone.wait()

    downloads = {d["uuid"]: d for d in status_json()["downloads"]}  # type: ignore[attr-defined]

    assert set(downloads) == {LIVE_UUID, STALE_UUID}
    flying = downloads[LIVE_UUID]
    assert flying["state"] == "in-flight"
    assert (flying["pid"], flying["pid_alive"], flying["lock_held"]) == (live.pid, True, True)
    assert (flying["bytes_done"], flying["bytes_total"]) == (2048, 8192)
    assert flying["rate"] > 0
    assert flying["age"] >= 0
    stale = downloads[STALE_UUID]
    assert stale["state"] == "stale"
    assert (stale["pid"], stale["pid_alive"], stale["lock_held"]) == (gone.pid, False, False)
    text = run_cli("status").stdout
    assert f"download {LIVE_UUID}: [" in text
    assert "2.0 KiB/8.0 KiB" in text
    assert f"download {STALE_UUID}: stale: its downloader (pid {gone.pid}) is gone" in text

    live.kill()
    live.wait()
    after = {d["uuid"]: d["state"] for d in status_json()["downloads"]}  # type: ignore[attr-defined]
    assert after == {LIVE_UUID: "stale", STALE_UUID: "stale"}


def tree(root: Path) -> dict[str, int]:
    """Every path below `root` with its mode: what a read-only command must leave alone."""
    return {str(p.relative_to(root)): p.lstat().st_mode for p in root.rglob("*")}


def test_status_creates_nothing(cache_dir: Path) -> None:
    cache = CachePaths(str(cache_dir))
    cache_dir.mkdir(parents=True, mode=0o700)
    # A record left by a downloader that never took its lock (killed at start-up): its
    # lock file does not exist, so nobody holds it, and probing it must not create it.
    records.StatusWriter(cache, STALE_UUID)
    before = tree(cache_dir)
    assert "locks" not in before

    report = status_json()
    assert run_cli("status").returncode == 0

    (stale,) = report["downloads"]  # type: ignore[misc]
    assert (stale["uuid"], stale["state"], stale["lock_held"]) == (STALE_UUID, "stale", False)
    assert stale["pid_alive"] is True  # this test's own process
    assert tree(cache_dir) == before


def test_only_dsym_markers_of_these_settings_count_as_uuids_no_server_had(
    cache_dir: Path,
) -> None:
    remember_absent(cache_dir, LIVE_UUID)
    executable = negative_marker(cache_dir, STALE_UUID, executable=True)
    markers.mark(str(executable))
    other_settings = cache_dir / "negative" / ("0" * 16) / uuid_hex(STALE_UUID)
    markers.mark(str(other_settings))
    earlier = cache_dir / "negative" / uuid_hex(STALE_UUID)  # before fingerprints
    markers.mark(str(earlier))
    markers.mark(str(cache_dir / "negative" / ("pdb-" + paths.short_name("http://x/|a.pdb/K"))))

    report = status_json()

    assert report["negative_cache"] == 1
    listed = {(e["uuid"], e["what"]) for e in report["negative_entries"]}  # type: ignore[attr-defined]
    assert listed == {(LIVE_UUID, "dSYM"), (STALE_UUID, "executable")}
    assert report["negative_entries_unused"] == 3
    text = run_cli("status").stdout
    assert "3 more learned under other store settings or by an earlier version" in text


@pytest.mark.parametrize("pid", [0, -1, True, "1", None, 2**40, 2**80])
def test_a_record_naming_no_possible_process_is_not_alive(pid: object) -> None:
    assert processes.alive(pid) is False
    assert processes.alive(os.getpid()) is True


def test_a_record_with_an_impossible_pid_is_stale(cache_dir: Path) -> None:
    cache = CachePaths(str(cache_dir))
    record = records.StatusWriter(cache, STALE_UUID).record
    Path(cache.record_file(uuid_hex(STALE_UUID))).write_text(json.dumps({**record, "pid": 2**80}))
    (stale,) = status_json()["downloads"]  # type: ignore[misc]
    assert (stale["state"], stale["pid"], stale["pid_alive"]) == ("stale", 2**80, False)
