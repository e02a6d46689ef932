"""SymCache files in the cache: a bad one is rebuilt, `check` judges them, `gc` removes the
unused."""

from __future__ import annotations

import binascii
import json
import os
import random
import stat
import subprocess
import threading
from pathlib import Path
from typing import NamedTuple

import pytest
from support.fixtures import FIXTURES, folder_with, toml_list, write_config
from support.fixtures import HELLO_UUID as HELLO
from support.processes import BIN, modules_loaded_running, run_cli
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_UUIDS,
    TEXT_VMADDR,
    ips_report,
    return_addresses,
    symbolizer,
)

from dsymfind.cache import symcache_files
from dsymfind.main import main
from dsymfind.paths import CachePaths
from dsymfind.symbolicate import symcaches
from dsymfind.uuids import uuid_hex

ARM, X86 = CRASHY_UUIDS["arm64"], CRASHY_UUIDS["x86_64"]


@pytest.fixture
def tables(cache_dir: Path) -> dict[str, Path]:
    """A good table, a damaged one, one of an older format and a stranger's file."""
    cache = CachePaths(str(cache_dir))
    version = symcaches.current_version()
    symcaches.load(cache, str(CRASHY_DWARF), ARM)
    folder = Path(cache.symcaches)
    made = {
        "good": folder / f"{uuid_hex(ARM)}.v{version}",
        "damaged": folder / f"{uuid_hex(X86)}.v{version}",
        "old": folder / f"{uuid_hex(X86)}.v{version - 1}",
        "foreign": folder / "notes.txt",
    }
    for name in ("damaged", "old", "foreign"):
        made[name].write_bytes(b"x" * 64)
    return made


def test_check_judges_symcaches_and_repair_removes_the_bad(tables, capsys):
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert str(tables["damaged"]) in out and str(tables["old"]) in out
    assert str(tables["foreign"]) in out
    main(["check", "--repair"])
    left = sorted(p.name for p in tables["good"].parent.iterdir())
    assert left == sorted([tables["good"].name, tables["foreign"].name])


def test_gc_removes_other_formats_and_everything_at_size_zero(tables, capsys):
    assert main(["gc"]) == 0
    assert not tables["old"].exists() and tables["good"].exists()
    out = capsys.readouterr().out
    assert f"removed SymCache {tables['old']}" in out and "1 SymCaches" in out
    assert str(tables["good"]) not in out
    assert main(["gc", "--max-size", "0", "--dry-run"]) == 0
    assert f"would remove SymCache {tables['good']}" in capsys.readouterr().out
    assert main(["gc", "--max-size", "0"]) == 0
    assert sorted(p.name for p in tables["good"].parent.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("kept", [0, 16, 64, 0.5, -1])
def test_a_table_cut_short_under_its_final_name_is_rebuilt(cache_dir: Path, kept) -> None:
    """Tables are renamed into place without an fsync: after a power loss a file system
    may leave one empty or partial under its final name. It must never be read as a table.
    (Cut after its header, it parses in symbolic: only the digest refuses it.)"""
    cache = CachePaths(str(cache_dir))
    symcaches.load(cache, str(CRASHY_DWARF), ARM)
    path = Path(cache.symcache_file(uuid_hex(ARM), symcaches.current_version()))
    whole = path.read_bytes()
    end = int(len(whole) * kept) if isinstance(kept, float) else kept % len(whole)
    path.write_bytes(whole[:end])

    table = symcaches.load(cache, str(CRASHY_DWARF), ARM)

    assert path.read_bytes() == whole
    assert symcache_files.header(table.data()) + table.data() == whole


def test_tables_to_build_are_built_at_once_one_thread_per_core(cache_dir: Path, monkeypatch):
    """symbolic builds with the GIL released: a cold report of many images is built on
    every core. Each build here waits for the other one, which only a second thread ends."""
    both_building = threading.Barrier(2, timeout=60)
    real_build = symcaches.build

    def build_beside_another(dwarf_path: str, uuid: str) -> symcaches.SymCache:
        both_building.wait()
        return real_build(dwarf_path, uuid)

    monkeypatch.setattr(symcaches, "build", build_beside_another)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    cache = CachePaths(str(cache_dir))

    loaded = symcaches.load_all(cache, {ARM: str(CRASHY_DWARF), X86: str(CRASHY_DWARF)})

    assert {uuid: table.arch for uuid, table in loaded.items()} == {ARM: "arm64", X86: "x86_64"}
    for uuid in (ARM, X86):
        kept = symcaches.open_checked(
            cache.symcache_file(uuid_hex(uuid), loaded[uuid].version), uuid
        )
        assert kept is not None and kept.data() == loaded[uuid].data()


def test_a_dsym_that_cannot_serve_its_uuid_is_said_beside_the_others(cache_dir: Path):
    cache = CachePaths(str(cache_dir))
    loaded = symcaches.load_all(cache, {ARM: str(CRASHY_DWARF), HELLO: str(CRASHY_DWARF)})
    assert loaded[ARM].arch == "arm64"
    assert isinstance(loaded[HELLO], symcaches.UnusableDsym)


# What is under a table's name, and then what the tests below see symbolicated.

# A symbolicate or check run takes about a second; a hang (a FIFO opened for reading
# waits for a writer forever) ends the test here instead of the suite's run.
HANG_LIMIT = 120
# crashy's arm64 slice: the crash inside twice() inlined into leaf().
CRASH_OFFSET = 0x338
NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod and chown need root")


@pytest.fixture
def crashy_report(tmp_path: Path, config_file: Path) -> Path:
    """A report of a crash in crashy (arm64): the pc, then every caller the code has, its
    dSYM in a search path."""
    folder = folder_with(tmp_path / "builds", "crashy.dSYM")
    write_config(config_file, f"search_paths = {toml_list([folder])}\n")
    report = tmp_path / "crashy.ips"
    report.write_text(ips_report(ARM, "arm64", [CRASH_OFFSET, *_return_offsets()]))
    return report


def _return_offsets() -> list[int]:
    return [a - TEXT_VMADDR for a in return_addresses(FIXTURES / "crashy", "arm64")]


def oracle_names() -> list[tuple[str, str, int]]:
    """llvm-symbolizer's frames for the report: the pc, then each call before a return."""
    addresses = [TEXT_VMADDR + CRASH_OFFSET]
    addresses += [TEXT_VMADDR + offset - 4 for offset in _return_offsets()]
    return [
        (frame["FunctionName"], os.path.normpath(frame["FileName"]), frame["Line"])
        for frames in symbolizer(CRASHY_DWARF, "arm64", addresses)
        for frame in frames
    ]


def named(json_output: str) -> list[tuple[str, str, int]]:
    doc = json.loads(json_output)
    return [
        (frame.get("symbol"), os.path.normpath(frame.get("file") or ""), frame.get("line"))
        for thread in doc["threads"]
        for frame in thread["frames"]
    ]


def symbolicated(report: Path) -> subprocess.CompletedProcess[str]:
    done = run_cli("symbolicate", "--format", "json", str(report), timeout=HANG_LIMIT)
    assert done.returncode == 0, done.stderr
    return done


def table_of(cache_dir: Path) -> Path:
    return cache_dir / "symcaches" / f"{uuid_hex(ARM)}.v{symcaches.current_version()}"


def plant(kind: str, table: Path, good: bytes, tmp_path: Path) -> Path | None:
    """Something other than a table of ours under the table's name; what a link leads to."""
    target = None
    if kind == "fifo":
        os.mkfifo(table)
    elif kind == "folder":
        table.mkdir()
        (table / "inside").write_bytes(good)
    elif kind == "link to a table":
        target = tmp_path / "elsewhere" / table.name
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(good)
    elif kind == "link to a fifo":
        target = tmp_path / "elsewhere" / "fifo"
        target.parent.mkdir(exist_ok=True)
        if not target.exists():
            os.mkfifo(target)
    elif kind == "link to /dev/null":
        table.symlink_to("/dev/null")
    elif kind == "device":
        os.mknod(table, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    if target is not None:
        table.symlink_to(target)
    return target


BAD_ENTRIES = [
    "fifo",
    "folder",
    "link to a table",
    "link to a fifo",
    "link to /dev/null",
    pytest.param("device", marks=needs_root),
]
# How check describes each (what was found there: never opened as a table).
DESCRIBED = {
    "fifo": "a FIFO",
    "folder": "a folder",
    "link to a table": "a symlink",
    "link to a fifo": "a symlink",
    "link to /dev/null": "a symlink",
    "device": "a device",
}


class Planted(NamedTuple):
    kind: str
    table: Path  # the table's name, with something else under it
    good: bytes  # the table that was there
    target: Path | None  # what a link there leads to


@pytest.fixture(params=BAD_ENTRIES)
def planted(request, crashy_report, cache_dir, tmp_path) -> Planted:
    """The table built by a run, then something else put in its place."""
    symbolicated(crashy_report)
    table = table_of(cache_dir)
    good = table.read_bytes()
    table.unlink()
    return Planted(request.param, table, good, plant(request.param, table, good, tmp_path))


def test_what_is_not_a_table_of_ours_is_replaced_by_symbolicate(planted, crashy_report):
    done = symbolicated(crashy_report)

    assert named(done.stdout) == oracle_names()
    assert stat.S_ISREG(planted.table.lstat().st_mode)
    assert planted.table.read_bytes() == planted.good
    if planted.target is not None and planted.kind == "link to a table":
        assert planted.target.read_bytes() == planted.good  # written beside, not through


def test_check_reports_what_is_not_a_table_of_ours_and_repair_removes_it(planted, crashy_report):
    table, target = planted.table, planted.target
    checked = run_cli("check", timeout=HANG_LIMIT)
    assert checked.returncode == 1, checked.stdout
    assert f"invalid: {table}: {DESCRIBED[planted.kind]}" in checked.stdout
    repaired = run_cli("check", "--repair", timeout=HANG_LIMIT)
    assert repaired.returncode == 0, repaired.stdout
    assert f"repaired invalid: {table}" in repaired.stdout
    assert not os.path.lexists(table)
    if target is not None:
        assert target.exists()  # the link went, never what it leads to
    assert named(symbolicated(crashy_report).stdout) == oracle_names()


@needs_root
def test_a_table_another_user_owns_is_not_trusted(crashy_report, cache_dir):
    symbolicated(crashy_report)
    table = table_of(cache_dir)
    good = table.read_bytes()
    os.chown(table, NOBODY, -1)

    checked = run_cli("check", timeout=HANG_LIMIT)
    assert checked.returncode == 1
    assert f"invalid: {table}: owned by uid {NOBODY}" in checked.stdout
    assert named(symbolicated(crashy_report).stdout) == oracle_names()
    assert table.stat().st_uid == os.getuid() and table.read_bytes() == good  # rebuilt
    os.chown(table, NOBODY, -1)
    assert run_cli("check", "--repair", timeout=HANG_LIMIT).returncode == 0
    assert not os.path.lexists(table)


# Damaged bytes at this many positions, from a fixed seed: each must be caught.
FLIPS = 30
FLIP_SEED = 20240527


def test_a_flipped_byte_anywhere_in_a_table_is_caught_by_check_and_symbolicate(
    crashy_report, cache_dir, capsys
):
    def run(*argv: str) -> tuple[int, str]:
        status = main(list(argv))
        return status, capsys.readouterr().out

    assert run("symbolicate", "--format", "json", str(crashy_report))[0] == 0
    table = table_of(cache_dir)
    good = table.read_bytes()
    expected = oracle_names()
    rng = random.Random(FLIP_SEED)
    positions = {0, len(good) - 1, *rng.sample(range(len(good)), FLIPS - 2)}
    for position in sorted(positions):
        damaged = bytearray(good)
        damaged[position] ^= rng.randrange(1, 256)
        table.write_bytes(damaged)

        status, out = run("check")
        assert status == 1 and f"invalid: {table}" in out, (position, out)
        status, out = run("symbolicate", "--format", "json", str(crashy_report))
        assert status == 0 and named(out) == expected, position
        assert table.read_bytes() == good, position  # rebuilt
    assert run("check")[0] == 0


def test_a_table_written_before_tables_carried_a_digest_is_a_leftover(crashy_report, cache_dir):
    """symbolic's table alone, as earlier releases kept it: never trusted, rebuilt when
    next used; check calls it a leftover, not damage."""
    table = table_of(cache_dir)
    table.parent.mkdir(parents=True)
    table.write_bytes(symcaches.build(str(CRASHY_DWARF), ARM).data())

    checked = run_cli("check", timeout=HANG_LIMIT)
    assert checked.returncode == 0
    assert f"leftover: {table}: a SymCache without a digest" in checked.stdout
    assert named(symbolicated(crashy_report).stdout) == oracle_names()
    assert symcaches.open_checked(str(table), ARM) is not None
    assert run_cli("check", timeout=HANG_LIMIT).stdout.count(str(table)) == 0


def test_four_builders_at_once_leave_one_whole_table(crashy_report, cache_dir):
    """Four runs building the same table at once, each renaming its own copy into place:
    every run names the frames, and what stays is one table that verifies."""
    runs = [
        subprocess.Popen(
            [str(BIN / "dsymfind"), "symbolicate", "--format", "json", str(crashy_report)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [run.communicate(timeout=HANG_LIMIT) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0, 0], outputs
    assert all(named(out) == oracle_names() for out, _ in outputs)
    table = table_of(cache_dir)
    assert [p.name for p in table.parent.iterdir()] == [table.name]
    assert symcaches.open_checked(str(table), ARM) is not None


def test_the_digest_is_binasciis_crc32_of_the_table():
    table = symcaches.build(str(CRASHY_DWARF), ARM).data()
    digest = symcache_files.header(table)[len(symcache_files.HEADER_MARK) :][
        : symcache_files.DIGEST_BYTES
    ]
    assert digest == binascii.crc32(table).to_bytes(4, "big")


def test_a_warm_run_checks_digests_without_loading_openssl(crashy_report):
    # hashlib loads OpenSSL's _hashlib: about 6 ms of a warm run, for a check it does not need.
    argv = ["symbolicate", str(crashy_report)]
    modules_loaded_running(argv)  # the settings snapshot made, the SymCache built
    assert {"hashlib", "_hashlib"} & modules_loaded_running(argv) == set()


def test_a_table_of_an_images_own_symbols_gives_way_to_its_dsyms(cache_dir: Path) -> None:
    """An executable fetched before its build's dSYM was published is symbolicated from its
    own symbol table (no files, no lines); once the dSYM is there, its table is built and
    kept instead of the kept one being read again, and the other way round."""
    cache = CachePaths(str(cache_dir))
    path = Path(cache.symcache_file(uuid_hex(ARM), symcaches.current_version()))
    from_dsym = symcaches.build(str(CRASHY_DWARF), ARM).data()
    from_symbols = symcaches.build(str(FIXTURES / "crashy"), ARM).data()
    assert from_dsym != from_symbols

    own = symcaches.load_all(cache, {ARM: str(FIXTURES / "crashy")}, {ARM})[ARM]
    assert isinstance(own, symcaches.SymCache) and own.data() == from_symbols
    assert path.read_bytes()[len(symcache_files.HEADER_MARK) + 4 :][:1] == b"T"
    # Read again as what it is: the kept table, not rebuilt.
    assert symcaches.open_checked(str(path), ARM, symbol_table=True) is not None
    assert symcaches.open_checked(str(path), ARM) is None

    assert symcaches.load(cache, str(CRASHY_DWARF), ARM).data() == from_dsym
    assert path.read_bytes() == symcache_files.header(from_dsym) + from_dsym
    again = symcaches.load_all(cache, {ARM: str(FIXTURES / "crashy")}, {ARM})[ARM]
    assert isinstance(again, symcaches.SymCache) and again.data() == from_symbols
