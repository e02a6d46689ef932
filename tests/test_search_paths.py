"""Search paths with their persistent index, and `dsymfind id`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS
from support.processes import run_cli

from dsymfind import search_paths
from dsymfind.apple import bundle, macho
from dsymfind.search_paths import SearchCatalog


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "DerivedData" / "Build" / "Products"
    root.mkdir(parents=True)
    shutil.copytree(FIXTURES / "hello.dSYM", root / "Debug" / "hello.dSYM")
    shutil.copytree(FIXTURES / "universal.dSYM", root / "Release" / "universal.dSYM")
    return root


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count Mach-O reads and folder listings made by the index."""
    counts = {"read": 0, "scandir": 0}
    real_read, real_scandir = macho.read_slices, os.scandir

    def read(path: str) -> list[macho.Slice]:
        counts["read"] += 1
        return real_read(path)

    def scandir(path: str) -> object:
        counts["scandir"] += 1
        return real_scandir(path)

    monkeypatch.setattr(macho, "read_slices", read)
    monkeypatch.setattr(search_paths._bare_os, "scandir", scandir)
    monkeypatch.setattr(bundle.os, "scandir", scandir)
    return counts


def test_index_finds_and_persists(tree: Path, tmp_path: Path) -> None:
    catalogs_dir = tmp_path / "index"
    found = SearchCatalog(str(catalogs_dir), str(tree)).find(UNIVERSAL_UUIDS["x86_64"])
    assert found is not None
    assert found[0].endswith("universal.dSYM/Contents/Resources/DWARF/universal")
    assert found[1].arch == "x86_64"
    reloaded = SearchCatalog(str(catalogs_dir), str(tree))
    assert reloaded.by_uuid[HELLO_UUID] == [
        str(tree / "Debug" / "hello.dSYM" / "Contents" / "Resources" / "DWARF" / "hello")
    ]


def test_refresh_of_an_unchanged_tree_reads_no_file(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SearchCatalog(str(tmp_path / "index"), str(tree))
    index.refresh()
    counts = counting(monkeypatch)
    SearchCatalog(str(tmp_path / "index"), str(tree)).refresh()
    assert counts["read"] == 0
    assert counts["scandir"] == 2  # only the two DWARF folders are listed; no other folder is


def test_a_new_bundle_is_found_after_the_refresh_interval(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalogs_dir = str(tmp_path / "index")
    assert SearchCatalog(catalogs_dir, str(tree)).find(GREET_UUID) is None
    shutil.copytree(FIXTURES / "libgreet.dylib.dSYM", tree / "Debug" / "libgreet.dylib.dSYM")
    assert SearchCatalog(catalogs_dir, str(tree)).find(GREET_UUID) is None  # within the interval
    monkeypatch.setattr(search_paths, "REFRESH_INTERVAL", 0.0)
    monkeypatch.setattr(search_paths, "WALK_INTERVAL_FACTOR", 0.0)
    counts = counting(monkeypatch)
    assert SearchCatalog(catalogs_dir, str(tree)).find(GREET_UUID) is not None
    assert counts["read"] == 2  # the new DWARF file, then its verification


def test_id_shows_slices_and_server_keys() -> None:
    dwarf = FIXTURES / "hello.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    done = run_cli("id", str(dwarf), str(FIXTURES / "universal"))
    assert done.returncode == 0, done.stderr
    hexa = HELLO_UUID.replace("-", "").lower()
    assert f"arm64    {HELLO_UUID}  MH_DSYM" in done.stdout
    assert f"_.dwarf/mach-uuid-sym-{hexa}/_.dwarf" in done.stdout
    assert (
        f"universal/mach-uuid-{UNIVERSAL_UUIDS['x86_64'].replace('-', '').lower()}/universal"
        in done.stdout
    )
    report = json.loads(run_cli("id", "--json", str(FIXTURES / "universal")).stdout)
    assert {s["uuid"] for s in report[0]["slices"]} == set(UNIVERSAL_UUIDS.values())


def test_id_of_a_bad_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a Mach-O")
    done = run_cli("id", str(bad))
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and str(bad) in done.stderr


def test_a_tree_slow_to_walk_is_walked_less_often(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalogs_dir = str(tmp_path / "index")
    index = SearchCatalog(catalogs_dir, str(tree))
    assert index.find(GREET_UUID) is None  # the first walk
    index.walk_seconds = 60.0  # as if that walk had taken a minute
    index.refreshed -= 100  # due for a quick tree, not for this one (10 x 60 s)
    shutil.copytree(FIXTURES / "libgreet.dylib.dSYM", tree / "Debug" / "libgreet.dylib.dSYM")
    assert index.find(GREET_UUID) is None
    index.refreshed -= 600
    assert index.find(GREET_UUID) is not None


def test_id_into_a_closed_pipe_says_nothing(tmp_path: Path) -> None:
    """`dsymfind id ... | head -1`: the reader leaving early is no error."""
    import subprocess

    from support.processes import BIN

    files = [str(FIXTURES / "universal")] * 3000  # far more output than a pipe buffer holds
    producer = subprocess.Popen(
        [str(BIN / "dsymfind"), "id", *files], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert producer.stdout is not None and producer.stderr is not None
    producer.stdout.readline()
    producer.stdout.close()
    assert producer.stderr.read() == b""
    assert producer.wait(timeout=60) == 141
