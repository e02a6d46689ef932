"""Small defects users met, each reproduced with the real CLI (a real process), real
fixtures and, where a server is needed, the loopback symbol server:

- `gc --max-size 0` evicts every download (those in use are kept);
- `id` on a `.dSYM` bundle and on a `.pdb` shows their identity;
- usage errors never list the hidden verbs the helper uses;
- Ctrl-C in `fetch` leaves no staging folder behind (and never removes another's);
- `status` counts the negative cache's PDB keys;
- `fetch FILE` fetches the dSYM of every slice of a Mach-O file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    PE_FIXTURES,
    UNIVERSAL_UUIDS,
    dwarf_of,
)
from support.processes import BIN, run_cli
from test_fetch_command import cached, server, server_env, slowly, url_path, wait_for_bytes

from dsymfind import locks
from dsymfind.cache_layout import CacheLayout
from dsymfind.uuids import uuid_hex

__all__ = ["server"]  # the fixture, shared with the fetch tests

PDB_IDENTITIES = json.loads((PE_FIXTURES / "identities.json").read_text())


def fail_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a refused command (exit 1, nothing on stdout)."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def staging_leftovers(cache_dir: Path, uuid: str) -> list[str]:
    tmp = cache_dir / "tmp"
    if not tmp.is_dir():
        return []
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(uuid_hex(uuid)))


# --- 1. gc --max-size 0 ------------------------------------------------------------------


def test_gc_max_size_0_evicts_every_download_but_one_in_use(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, GREET_UUID, env=env).returncode == 0
    layout = CacheLayout(str(cache_dir))
    in_use = locks.download_lock(layout, GREET_UUID)  # as a reader or a downloader holds it

    with in_use.acquire():
        done = run_cli("gc", "--max-size", "0", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    hello_entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)
    greet_entry = cache_dir / "dsyms" / uuid_hex(GREET_UUID)
    assert f"removed {hello_entry} (" in done.stdout
    assert f"kept {greet_entry}: in use or being downloaded" in done.stdout
    assert not hello_entry.exists()
    assert not cached(cache_dir, HELLO_UUID)
    assert greet_entry.is_dir()
    assert cached(cache_dir, GREET_UUID)


def test_gc_max_size_0_with_a_unit_and_in_a_dry_run(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, env=env).returncode == 0
    entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)

    dry = run_cli("gc", "--max-size", "0GiB", "--dry-run", env=env)

    assert dry.returncode == 0, dry.stderr
    assert f"would remove {entry} (" in dry.stdout
    assert entry.is_dir()


@pytest.mark.parametrize("size", ["-1", "0XB", "zero", ""])
def test_gc_max_size_still_refuses_what_is_not_a_size(size: str) -> None:
    line = fail_line(run_cli("gc", "--max-size", size))
    assert (
        line == f"dsymfind: error: --max-size: expected a size such as 2GiB or 500MB, got {size!r}"
    )


def test_max_cache_size_0_in_the_config_still_means_no_limit(
    server: ss.SymbolServer, cache_dir: Path, config_file: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, env=env).returncode == 0
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text("max_cache_size = 0\n")

    done = run_cli("gc", env=env)

    assert done.returncode == 0, done.stderr
    assert (cache_dir / "dsyms" / uuid_hex(HELLO_UUID)).is_dir()


# --- 2. id on a .dSYM and on a .pdb ------------------------------------------------------


def test_id_of_a_dsym_bundle_shows_each_dwarf_file() -> None:
    bundle = FIXTURES / "universal.dSYM"
    dwarf = dwarf_of(bundle)

    done = run_cli("id", str(bundle))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[0] == str(dwarf)
    for arch, uuid in UNIVERSAL_UUIDS.items():
        assert f"  {arch:<8} {uuid}  MH_DSYM" in done.stdout
        assert f"mach-uuid-sym-{uuid_hex(uuid).lower()}" in done.stdout
    (entry,) = json.loads(run_cli("id", "--json", str(bundle)).stdout)
    assert entry["file"] == str(dwarf)
    assert entry["bundle"] == str(bundle)
    assert {s["uuid"]: s["filetype"] for s in entry["slices"]} == {
        uuid: "MH_DSYM" for uuid in UNIVERSAL_UUIDS.values()
    }


def test_id_of_a_folder_without_dwarf_files_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "Empty.dSYM"
    empty.mkdir()

    line = fail_line(run_cli("id", str(empty)))

    assert line.startswith(f"dsymfind: {empty}: ")
    assert "DWARF" in line


@pytest.mark.parametrize("name", ["hello64.pdb", "greet32.pdb", "age2/hello64.pdb"])
def test_id_of_a_pdb_shows_guid_age_and_store_key(name: str) -> None:
    expected = PDB_IDENTITIES[name]
    path = PE_FIXTURES / name
    base = path.name
    key = f"{expected['guid'].replace('-', '')}{expected['age']:X}"

    done = run_cli("id", str(path))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert f"GUID {expected['guid']}  age {expected['age']}" in done.stdout
    assert f"{base}/{key}/{base}" in done.stdout
    (entry,) = json.loads(run_cli("id", "--json", str(path)).stdout)
    assert entry["file"] == str(path)
    assert entry["format"] == "PDB 7.0"
    assert entry["guid"] == expected["guid"]
    assert entry["age"] == expected["age"]
    assert entry["keys"] == {"pdb": f"{base}/{key}/{base}"}


PDBUTIL = shutil.which("llvm-pdbutil-14") or shutil.which("llvm-pdbutil")


@pytest.mark.skipif(PDBUTIL is None, reason="llvm-pdbutil is not installed")
def test_id_of_a_source_indexed_pdb_keys_it_by_its_dbi_age(tmp_path: Path) -> None:
    # pdbstr bumps only the info stream's age: the key is the DBI age's, as DbgHelp's.
    assert PDBUTIL is not None
    yaml = subprocess.run(
        [PDBUTIL, "pdb2yaml", "-pdb-stream", "-dbi-stream", str(PE_FIXTURES / "hello64.pdb")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    info_part, dbi_part = yaml.split("DbiStream:", 1)
    info_part = re.sub(r"^(\s+Age:\s+)\d+$", r"\g<1>3", info_part, flags=re.MULTILINE)
    (tmp_path / "ages.yaml").write_text(f"{info_part}DbiStream:{dbi_part}")
    indexed = tmp_path / "hello64.pdb"
    subprocess.run(
        [PDBUTIL, "yaml2pdb", "-pdb", str(indexed), str(tmp_path / "ages.yaml")],
        capture_output=True,
        check=True,
    )

    done = run_cli("id", str(indexed))

    guid = PDB_IDENTITIES["hello64.pdb"]["guid"]
    assert f"GUID {guid}  age 1  (info stream age 3)" in done.stdout
    (entry,) = json.loads(run_cli("id", "--json", str(indexed)).stdout)
    assert (entry["age"], entry["info_age"]) == (1, 3)
    key = f"{guid.replace('-', '')}1"
    assert entry["keys"] == {"pdb": f"hello64.pdb/{key}/hello64.pdb"}


def test_id_of_an_exe_and_its_pdb_give_the_same_pdb_key() -> None:
    done = run_cli(
        "id", "--json", str(PE_FIXTURES / "hello64.exe"), str(PE_FIXTURES / "hello64.pdb")
    )
    exe, pdb = json.loads(done.stdout)
    assert exe["keys"]["pdb"] == pdb["keys"]["pdb"]


def test_id_of_a_damaged_pdb_is_one_line(tmp_path: Path) -> None:
    damaged = tmp_path / "cut.pdb"
    damaged.write_bytes((PE_FIXTURES / "hello64.pdb").read_bytes()[:100])

    line = fail_line(run_cli("id", str(damaged)))

    assert line.startswith(f"dsymfind: {damaged}: ")


def test_id_loads_no_http_or_lock_code() -> None:
    probe = (
        "import sys\n"
        "from dsymfind.commands.id import ident\n"
        f"files = [{str(FIXTURES / 'hello.dSYM')!r}, {str(PE_FIXTURES / 'hello64.pdb')!r},\n"
        f"         {str(PE_FIXTURES / 'hello64.exe')!r}, {str(FIXTURES / 'universal')!r}]\n"
        "assert ident(files, as_json=True) == 0\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stderr.split())
    assert "dsymfind.commands.id" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("httpx", "filelock")}


# --- 3. hidden verbs ---------------------------------------------------------------------


def test_an_unknown_verb_lists_no_hidden_verb() -> None:
    line = fail_line(run_cli("frobnicate"))

    assert "invalid choice: 'frobnicate'" in line
    assert "'fetch'" in line
    assert "_download" not in line
    assert "_refresh" not in line


def test_help_lists_no_hidden_verb() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    assert "_download" not in done.stdout
    assert "_refresh" not in done.stdout


def test_the_hidden_verbs_still_run(tmp_path: Path) -> None:
    # What spawn.py starts: parsed and dispatched, with the usual error policy.
    line = fail_line(run_cli("_download", "not-a-uuid"))
    assert line == "dsymfind: error: not a UUID: 'not-a-uuid'"
    root = tmp_path / "symbols"
    root.mkdir()
    done = run_cli("_refresh", str(root))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# --- 4. Ctrl-C leaves no staging folder --------------------------------------------------


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
    assert (cache_dir / "tmp" / staging / "candidate-0" / "download").is_file()

    proc.send_signal(signal.SIGINT)

    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert err == ""
    assert staging_leftovers(cache_dir, HELLO_UUID) == []
    assert not cached(cache_dir, HELLO_UUID)


STAGING_OWNER = """
import sys
from dsymfind import locks
from dsymfind.cache_layout import CacheLayout, staging_prefix
from dsymfind.uuids import uuid_hex
layout = CacheLayout(sys.argv[1])
lock = locks.download_lock(layout, sys.argv[2])
lock.acquire()
staging = layout.new_staging(staging_prefix(uuid_hex(sys.argv[2])))
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


# --- 5. status counts PDB negatives ------------------------------------------------------


def test_status_counts_pdb_keys_in_the_negative_cache(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("_NT_SYMBOL_PATH", raising=False)
    alone = tmp_path / "alone"  # away from its PDB, so only the server is asked
    alone.mkdir()
    shutil.copyfile(PE_FIXTURES / "hello64.exe", alone / "hello64.exe")
    shutil.copyfile(PE_FIXTURES / "greet64.dll", alone / "greet64.dll")
    with ss.SymbolServer(tmp_path / "empty") as empty:
        symbol_path = f"srv*{tmp_path / 'store'}*{empty.url}/"
        missed = run_cli(
            "pdb",
            "--symbol-path",
            symbol_path,
            str(alone / "hello64.exe"),
            str(alone / "greet64.dll"),
        )
    assert missed.returncode == 1, missed.stderr
    layout = CacheLayout(str(cache_dir))
    expired = layout.negative_marker("pdb-" + "0" * 16)
    Path(expired).touch()
    os.utime(expired, (time.time() - 7200, time.time() - 7200))  # older than the 3600 s TTL

    done = run_cli("status", "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["negative_cache"] == 0
    assert report["negative_pdb_keys"] == 2
    text = run_cli("status").stdout
    assert "negative cache: 0 UUIDs no server had recently, 2 PDB keys" in text


# --- 6. fetch FILE -----------------------------------------------------------------------


def test_fetch_a_universal_file_fetches_every_slice(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    done = run_cli("fetch", str(FIXTURES / "universal"), env=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = dict(line.split("  ", 1) for line in done.stdout.splitlines())
    assert set(lines) == set(UNIVERSAL_UUIDS.values())
    for uuid in UNIVERSAL_UUIDS.values():
        assert lines[uuid].startswith("found  ")
        assert cached(cache_dir, uuid)


def test_fetch_uuids_and_files_mixed(server: ss.SymbolServer, cache_dir: Path) -> None:
    given = [GREET_UUID, str(FIXTURES / "hello"), HELLO_UUID.lower()]

    done = run_cli("fetch", "--json", *given, env=server_env(server))

    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [r["uuid"] for r in results] == [GREET_UUID, HELLO_UUID]  # each once, in order
    assert all(r["state"] == "found" for r in results)
    assert cached(cache_dir, HELLO_UUID)


@pytest.mark.parametrize(
    "target",
    [
        PE_FIXTURES / "hello64.exe",  # a file, not a Mach-O
        FIXTURES / "hello.dSYM",  # a folder
        Path("no-such-file"),
        Path("0123-not-a-uuid"),
    ],
)
def test_fetch_of_neither_a_uuid_nor_a_mach_o_is_one_line(
    server: ss.SymbolServer, target: Path
) -> None:
    line = fail_line(run_cli("fetch", HELLO_UUID, str(target), env=server_env(server)))

    assert line.startswith(f"dsymfind: error: {str(target)!r} is neither a UUID nor a Mach-O file")
    assert server.requests == []  # nothing fetched before the mistake was found


def test_fetch_of_a_mistyped_uuid_says_so(server: ss.SymbolServer) -> None:
    # Hex digits and dashes naming no file: a UUID with a digit group missing.
    line = fail_line(run_cli("fetch", "4C4C449A-5555-3144-A19A", env=server_env(server)))

    assert line == "dsymfind: error: not a UUID: '4C4C449A-5555-3144-A19A'"
    assert server.requests == []


LC_UUID = 0x1B


def without_lc_uuid(source: Path, target: Path) -> Path:
    """A thin 64-bit Mach-O whose LC_UUID is renumbered to a command nobody knows."""
    data = bytearray(source.read_bytes())
    (ncmds,) = struct.unpack_from("<I", data, 16)
    at = 32  # after the mach_header_64
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == LC_UUID:
            struct.pack_into("<I", data, at, 0x7FFFFFFE)
        at += size
    target.write_bytes(data)
    return target


def test_fetch_of_a_mach_o_without_uuid_is_one_line(
    server: ss.SymbolServer, tmp_path: Path
) -> None:
    stripped = without_lc_uuid(FIXTURES / "hello", tmp_path / "hello")

    line = fail_line(run_cli("fetch", str(stripped), env=server_env(server)))

    assert (
        line
        == f"dsymfind: error: {stripped}: no slice has a UUID (LC_UUID), so no dSYM can match it"
    )
    assert server.requests == []
