"""SymCache files in the cache: a bad one is rebuilt, `check` judges them, `gc` removes the
unused."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from support.fixtures import HELLO_UUID as HELLO
from support.symbolication import CRASHY_DWARF, CRASHY_UUIDS

from dsymfind.cache_layout import CacheLayout
from dsymfind.main import main
from dsymfind.symbolicate import symcaches
from dsymfind.uuids import uuid_hex

ARM, X86 = CRASHY_UUIDS["arm64"], CRASHY_UUIDS["x86_64"]


@pytest.fixture
def tables(cache_dir: Path) -> dict[str, Path]:
    """A good table, a damaged one, one of an older format and a stranger's file."""
    layout = CacheLayout(str(cache_dir))
    version = symcaches.current_version()
    symcaches.load(layout, str(CRASHY_DWARF), ARM)
    folder = Path(layout.symcaches)
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


@pytest.mark.parametrize("kept", [0, 16, 0.5, -1])
def test_a_table_cut_short_under_its_final_name_is_rebuilt(cache_dir: Path, kept) -> None:
    """Tables are renamed into place without an fsync: after a power loss a file system
    may leave one empty or partial under its final name. It must never be read as a table."""
    layout = CacheLayout(str(cache_dir))
    symcaches.load(layout, str(CRASHY_DWARF), ARM)
    path = Path(layout.symcache_file(uuid_hex(ARM), symcaches.current_version()))
    whole = path.read_bytes()
    end = int(len(whole) * kept) if isinstance(kept, float) else kept % len(whole)
    path.write_bytes(whole[:end])

    table = symcaches.load(layout, str(CRASHY_DWARF), ARM)

    assert table.data() == whole and path.read_bytes() == whole


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
    layout = CacheLayout(str(cache_dir))

    loaded = symcaches.load_all(layout, {ARM: str(CRASHY_DWARF), X86: str(CRASHY_DWARF)})

    assert {uuid: table.arch for uuid, table in loaded.items()} == {ARM: "arm64", X86: "x86_64"}
    for uuid in (ARM, X86):
        kept = symcaches.open_checked(
            layout.symcache_file(uuid_hex(uuid), loaded[uuid].version), uuid
        )
        assert kept is not None and kept.data() == loaded[uuid].data()


def test_a_dsym_that_cannot_serve_its_uuid_is_said_beside_the_others(cache_dir: Path):
    layout = CacheLayout(str(cache_dir))
    loaded = symcaches.load_all(layout, {ARM: str(CRASHY_DWARF), HELLO: str(CRASHY_DWARF)})
    assert loaded[ARM].arch == "arm64"
    assert isinstance(loaded[HELLO], symcaches.UnusableDsym)
