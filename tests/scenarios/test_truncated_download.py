"""A dSYM cut in half, through every path that reads one: the helper's download from a real
HTTP server on 127.0.0.1 (bare, gzipped, zipped), `dsymfind fetch`, `dsymfind check` on a
cache entry cut after it was published, and `dsymfind index` on a user's bundle.

Half of a real DWARF file keeps its MH_DSYM header and its UUID: only the ranges its
load commands name show that the DWARF behind them is gone.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, LAYOUT_PATHS, dwarf_of, link_of, write_config
from support.processes import run_cli, run_helper, settled_record

from dsymfind.fetch.downloader import run_download
from dsymfind.uuids import tree_entry, uuid_hex

HELLO_DWARF = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
HALF = HELLO_DWARF[: len(HELLO_DWARF) // 2]
NATIVE = f"/{LAYOUT_PATHS['native']}"
TRUNCATED = "truncated or malformed: segment __DWARF"


def zipped_half_bundle() -> bytes:
    """hello.dSYM as a server zips it, its DWARF file cut in half."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(
            FIXTURES / "hello.dSYM" / "Contents" / "Info.plist", "hello.dSYM/Contents/Info.plist"
        )
        archive.writestr("hello.dSYM/Contents/Resources/DWARF/hello", HALF)
    return buffer.getvalue()


@pytest.fixture
def server() -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer() as running:
        yield running


def configure(config_file: Path, server: ss.SymbolServer) -> None:
    write_config(
        config_file, f"timeout = 20\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
    )


def assert_nothing_published(cache_dir: Path) -> None:
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert not (cache_dir / "dsyms" / uuid_hex(HELLO_UUID)).exists()
    leftovers = list((cache_dir / "tmp").iterdir()) if (cache_dir / "tmp").exists() else []
    assert leftovers == []


@pytest.mark.parametrize(
    "answer",
    [HALF, gzip.compress(HALF), zipped_half_bundle()],
    ids=["bare", "gzip", "zipped-bundle"],
)
def test_half_a_dsym_served_is_never_published(
    answer: bytes, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(NATIVE, ss.body(answer))  # a complete HTTP answer: only the content is cut
    configure(config_file, server)

    run = run_helper(HELLO_UUID)

    entry = run.entry(HELLO_UUID)
    assert "DBGDSYMPath" not in entry
    assert entry["DBGError"].startswith(f"dsymfind: download of {HELLO_UUID} failed: ")
    if answer == HALF:  # the reason names the file served, not what a container held
        assert TRUNCATED in entry["DBGError"]
    record = settled_record(cache_dir, HELLO_UUID, timeout=30)
    assert record["state"] == "failed"
    assert_nothing_published(cache_dir)
    again = run_helper(HELLO_UUID).entry(HELLO_UUID)  # nothing remembered as found either
    assert "DBGDSYMPath" not in again


def test_dsymfind_fetch_reports_half_a_dsym_as_failed(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(NATIVE, ss.body(HALF))
    configure(config_file, server)
    done = run_cli("fetch", HELLO_UUID)
    assert done.returncode != 0
    assert done.stdout.startswith(f"{HELLO_UUID}  failed: ")
    assert TRUNCATED in done.stdout
    assert_nothing_published(cache_dir)


@pytest.fixture
def fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> Path:
    """A cache holding hello's whole dSYM, fetched by the real downloader from a real server."""
    store = Path(tree_entry(str(tmp_path / "store"), HELLO_UUID))
    store.parent.mkdir(parents=True)
    shutil.copyfile(dwarf_of(FIXTURES / "hello.dSYM"), store)
    with ss.SymbolServer(tmp_path / "store") as running:
        monkeypatch.setenv("DSYMFIND_SERVERS", f"native={running.url}/")
        status = run_download(
            HELLO_UUID, os.environ, ignore_negative_cache=True, copy_executable=False
        )
    assert status == 0
    return cache_dir


def test_check_calls_an_entry_cut_in_half_invalid_and_repair_removes_it(fetched: Path) -> None:
    entry = fetched / "dsyms" / uuid_hex(HELLO_UUID)
    assert run_cli("check").returncode == 0
    (dwarf,) = entry.glob("*.dSYM/Contents/Resources/DWARF/*")
    dwarf.write_bytes(dwarf.read_bytes()[: len(HELLO_DWARF) // 2])  # as a disk error leaves it

    done = run_cli("check")

    assert done.returncode == 1, done.stdout
    invalid = [line for line in done.stdout.splitlines() if line.startswith("invalid: ")]
    assert any(str(entry) in line and TRUNCATED in line for line in invalid), done.stdout
    assert run_cli("check", "--repair").returncode == 0
    assert not entry.exists()
    assert not os.path.lexists(link_of(fetched, HELLO_UUID))
    assert run_cli("check").returncode == 0


def test_index_refuses_a_bundle_whose_dwarf_file_is_cut_in_half(
    products: Path, cache_dir: Path
) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")
    dwarf.write_bytes(HALF)

    done = run_cli("index", str(products / "hello.dSYM"))

    assert done.returncode == 1
    assert f"invalid: {dwarf}: {TRUNCATED}" in done.stdout
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
