"""`dsymfind fetch` and `dsymfind prefetch` as real processes against a real HTTP server
on 127.0.0.1 serving the real fixture dSYMs in the native UUID-tree layout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.crash_reports import APPLE_UUIDS, CRASH_REPORTS, KERNEL_UUID
from support.fixtures import GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS
from support.negative import negative_marker
from support.processes import BIN, on_a_terminal, run_cli
from support.served import DWARF_FILES, HELLO_DWARF, native_tree, server_env, url_path

from dsymfind.cache import records
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ss.SymbolServer]:
    """The fixture dSYMs in a native UUID tree; Apple's libraries' UUIDs are absent."""
    with ss.SymbolServer(native_tree(tmp_path / "served")) as running:
        yield running


def cached(cache_dir: Path, uuid: str) -> bool:
    return os.path.exists(tree_entry(str(cache_dir / "uuids"), uuid))


def slowly(uuid: str) -> ss.Route:
    return ss.slow_pieces(DWARF_FILES[uuid].read_bytes(), 20, interval=0.1)


def wait_for_bytes(cache_dir: Path, uuid: str, proc: subprocess.Popen[str]) -> None:
    """Until the download's status record shows bytes arriving (the process must live)."""
    cache = CachePaths(str(cache_dir))
    while True:
        assert proc.poll() is None, proc.communicate()
        record = records.read(cache, uuid)
        if record and record["state"] == records.RUNNING and records.bytes_done(record)[0]:
            return
        time.sleep(0.05)


def test_fetch_prints_one_line_per_uuid_and_fails_on_a_miss(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    given = [HELLO_UUID.replace("-", "").lower(), GREET_UUID, UNIVERSAL_UUIDS["arm64"], KERNEL_UUID]

    done = run_cli("fetch", *given, env=server_env(server))

    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    lines = dict(line.split("  ", 1) for line in done.stdout.splitlines())
    assert set(lines) == {HELLO_UUID, GREET_UUID, UNIVERSAL_UUIDS["arm64"], KERNEL_UUID}
    for uuid in (HELLO_UUID, GREET_UUID, UNIVERSAL_UUIDS["arm64"]):
        state, path = lines[uuid].split("  ")
        assert state == "found"
        assert Path(path).is_file()
        assert Path(path).is_relative_to(cache_dir / "dsyms")
        assert cached(cache_dir, uuid)
    assert cached(cache_dir, UNIVERSAL_UUIDS["x86_64"])  # published with its bundle
    assert lines[KERNEL_UUID].startswith("not found: not on http://127.0.0.1")
    assert not cached(cache_dir, KERNEL_UUID)


def test_fetch_json_local_hits_and_asking_again_past_the_negative_cache(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, env=env).returncode == 0
    assert run_cli("fetch", KERNEL_UUID, env=env).returncode == 1
    assert negative_marker(cache_dir, KERNEL_UUID, env=env).exists()

    done = run_cli("fetch", "--json", HELLO_UUID, KERNEL_UUID, env=env)

    assert done.returncode == 1
    hello, kernel = json.loads(done.stdout)
    assert hello["uuid"] == HELLO_UUID
    assert hello["state"] == "found"
    assert hello["message"] == "already on this machine"
    assert Path(hello["path"]).is_file()
    # Run on purpose, fetch asks again about what the negative cache holds.
    assert kernel == {
        "uuid": KERNEL_UUID,
        "state": "not-found",
        "path": None,
        "message": f"not on {server.url}{url_path(KERNEL_UUID)}",
    }
    assert server.count(url_path(KERNEL_UUID)) == 2
    assert server.count(url_path(HELLO_UUID)) == 1  # already on this machine
    again = run_cli("fetch", "--json", "--ignore-negative-cache", KERNEL_UUID, env=env)
    assert json.loads(again.stdout)[0]["state"] == "not-found"
    assert server.count(url_path(KERNEL_UUID)) == 3


def test_fetch_exit_zero_when_all_found_and_failures_named(server: ss.SymbolServer) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, GREET_UUID, env=env).returncode == 0
    wrong = UNIVERSAL_UUIDS["x86_64"]
    server.route(url_path(wrong), ss.body(HELLO_DWARF))  # another UUID's
    done = run_cli("fetch", wrong, env=env)
    assert done.returncode == 1
    assert done.stdout.startswith(f"{wrong}  failed: 127.0.0.1:")
    assert f"answer does not carry {wrong}" in done.stdout
    assert len(done.stdout.splitlines()) == 1


def test_a_bad_uuid_stops_everything_before_any_fetch(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    done = run_cli("fetch", HELLO_UUID, "4C4C449A-5555-3144-A19A", env=server_env(server))
    assert done.returncode == 1
    assert done.stderr == "dsymfind: error: not a UUID: '4C4C449A-5555-3144-A19A'\n"
    assert done.stdout == ""
    assert server.requests == []
    assert not cached(cache_dir, HELLO_UUID)


def test_fetch_waits_for_the_same_download_in_another_process(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    server.route(url_path(HELLO_UUID), slowly(HELLO_UUID))
    env = server_env(server)
    other = subprocess.Popen([str(BIN / "dsymfind"), "_download", HELLO_UUID], env=env, text=True)
    wait_for_bytes(cache_dir, HELLO_UUID, other)

    done = run_cli("fetch", HELLO_UUID, env=env)

    assert other.wait(timeout=60) == 0
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith(f"{HELLO_UUID}  found  ")
    assert server.count(url_path(HELLO_UUID)) == 1


def test_ctrl_c_exits_130_and_leaves_nothing_partial(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    server.route(url_path(HELLO_UUID), slowly(HELLO_UUID))
    env = server_env(server)
    proc = subprocess.Popen(
        [str(BIN / "dsymfind"), "fetch", HELLO_UUID, GREET_UUID],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_bytes(cache_dir, HELLO_UUID, proc)

    proc.send_signal(signal.SIGINT)

    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err == ""
    assert HELLO_UUID not in out
    assert not cached(cache_dir, HELLO_UUID)
    assert not (cache_dir / "dsyms" / HELLO_UUID.replace("-", "")).exists()
    status = json.loads(run_cli("status", "--json", env=env).stdout)
    assert [(d["uuid"], d["state"]) for d in status["downloads"]] == [(HELLO_UUID, "stale")]
    server.route(url_path(HELLO_UUID), ss.serve_root)
    again = run_cli("fetch", HELLO_UUID, env=env)
    assert again.returncode == 0
    assert list((cache_dir / "tmp").iterdir()) == []  # the interrupted run's staging is gone


def test_fetch_on_a_terminal_draws_live_bars(server: ss.SymbolServer) -> None:
    server.route(url_path(HELLO_UUID), slowly(HELLO_UUID))
    command = [str(BIN / "dsymfind"), "fetch", HELLO_UUID, GREET_UUID]
    status, text = on_a_terminal(command, server_env(server))
    assert status == 0
    assert f"{HELLO_UUID}  [" in text  # a bar while bytes arrived
    assert "\x1b[" in text  # redrawn in place
    assert f"{HELLO_UUID}  found  " in text
    assert f"{GREET_UUID}  found  " in text


def test_prefetch_fetches_each_image_once_and_skips_local_ones(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, env=env).returncode == 0
    reports = [
        CRASH_REPORTS / name
        for name in ("hello-macos.ips", "universal-ios.crash", "greet-macos-legacy.crash")
    ]
    before = server.count(url_path(HELLO_UUID))

    done = run_cli("prefetch", "--all", "--json", *map(str, reports), env=env)

    assert done.returncode == 1  # the system libraries are not on the server
    result = json.loads(done.stdout)
    assert result["reports"] == [
        {"report": str(reports[0]), "images": 4},
        {"report": str(reports[1]), "images": 5},
        {"report": str(reports[2]), "images": 5},
    ]
    images = {image["uuid"]: image for image in result["images"]}
    assert len(result["images"]) == len(images) == 8
    assert images[HELLO_UUID]["already_local"] is True
    assert server.count(url_path(HELLO_UUID)) == before
    for uuid in (GREET_UUID, *UNIVERSAL_UUIDS.values()):
        assert images[uuid]["state"] == "found"
        assert cached(cache_dir, uuid)
    assert server.count(url_path(GREET_UUID)) == 1  # named by all three reports
    assert images[GREET_UUID]["name"] == "libgreet.dylib"  # the first report's name
    assert images[GREET_UUID]["message"] == f"from {server.url}{url_path(GREET_UUID)}"
    for uuid in APPLE_UUIDS:
        assert images[uuid]["state"] == "not-found"
        assert images[uuid]["path"] is None


def test_prefetch_summary_and_bad_reports(server: ss.SymbolServer, tmp_path: Path) -> None:
    truncated = tmp_path / "cut.ips"
    truncated.write_text((CRASH_REPORTS / "hello-macos.ips").read_text()[:1500])
    note = tmp_path / "notes.crash"
    note.write_text("Nothing crashed today.\n")
    args = [
        str(CRASH_REPORTS / "hello-ios14.ips"),
        str(tmp_path / "gone.ips"),
        str(truncated),
        str(note),
        str(tmp_path),
    ]

    done = run_cli("prefetch", *args, env=server_env(server))

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"dsymfind: {tmp_path / 'gone.ips'}: cannot read it: No such file or directory",
        f"dsymfind: {truncated}: the report body is truncated JSON (Unterminated string starting at, line 29)",
        f'dsymfind: {note}: not a crash report: neither JSON nor a text report with "Binary Images:"',
        f"dsymfind: {tmp_path}: cannot read it: Is a directory",
    ]
    lines = done.stdout.splitlines()
    assert lines[0] == "1 of 5 reports read, 2 images with a UUID"
    assert lines[1] == "found: 1 (0 already here, 1 fetched)"
    assert lines[2].split()[:2] == ["hello", HELLO_UUID]
    assert lines[3:] == ["1 Apple system image skipped (--all includes them)"]  # libdyld


def test_prefetch_exit_zero_when_every_image_has_its_dsym(
    server: ss.SymbolServer, tmp_path: Path
) -> None:
    report = tmp_path / "mine.ips"
    header = '{"bug_type":"309","name":"hello"}\n'
    images = [
        {"source": "P", "arch": "arm64", "uuid": uuid.lower(), "name": name, "path": f"/x/{name}"}
        for uuid, name in ((HELLO_UUID, "hello"), (GREET_UUID, "libgreet.dylib"))
    ]
    report.write_text(header + json.dumps({"usedImages": [*images, {"source": "A", "size": 0}]}))
    done = run_cli("prefetch", str(report), env=server_env(server))
    assert done.returncode == 0, done.stdout
    assert "found: 2 (0 already here, 2 fetched)" in done.stdout
