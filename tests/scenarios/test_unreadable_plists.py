"""A plist a store sends that cannot be read never costs the dSYM it came with: a store's
companion `<key>.plist` is left out, a zipped bundle's per-UUID plist is ignored, and the
verified download is kept. Real helper processes and downloaders, a real HTTP server on
127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import HELLO_UUID
from support.plists import POISONS
from support.processes import run_helper, settled_record
from support.served import HELLO_DWARF, serve_zip, url_path

from dsymfind.cache import check, records
from dsymfind.paths import CachePaths

HEX = HELLO_UUID.replace("-", "")
SETTLE = 30.0
# What plistlib raises on (or returns and a writer then fails on), a sample of POISONS:
# each runs a helper and a downloader.
SAMPLE = ["date", "base64", "digits", "wide-integer", "xml-nesting", "binary-cut", "null"]


def log_text(isolated_home: Path) -> str:
    return (isolated_home / ".state" / "dsymfind" / "dsymfind.log").read_text()


def assert_kept(cache_dir: Path, entry: dict[str, str]) -> Path:
    """The answer names the verified download in the cache, and the cache is sound."""
    dsym = Path(entry["DBGDSYMPath"])
    assert dsym.is_relative_to(cache_dir / "dsyms" / HEX), entry
    assert dsym.read_bytes() == HELLO_DWARF
    assert settled_record(cache_dir, HELLO_UUID, timeout=SETTLE)["state"] == records.DONE
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()
    assert report.count(check.INVALID) == 0
    return dsym


@pytest.mark.parametrize("poison", SAMPLE)
def test_an_unreadable_companion_plist_is_left_out_and_the_download_kept(
    poison: str, native_server: ss.SymbolServer, cache_dir: Path, isolated_home: Path
) -> None:
    native_server.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))
    native_server.route(url_path(HELLO_UUID) + ".plist", ss.body(POISONS[poison]))

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    dsym = assert_kept(cache_dir, entry)
    assert "DBGSourcePath" not in entry
    assert native_server.count(url_path(HELLO_UUID) + ".plist") == 1
    said = [line for line in log_text(isolated_home).splitlines() if ".plist: left out" in line]
    assert len(said) == 1 and "unreadable plist: " in said[0], said
    assert (dsym.parent.parent / f"{HELLO_UUID}.plist").is_file()  # the cache's own


@pytest.mark.parametrize("poison", SAMPLE)
def test_a_zipped_bundles_unreadable_plist_is_ignored_and_the_download_kept(
    poison: str, native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    serve_zip(
        native_server,
        HELLO_UUID,
        {
            "hello.dSYM/Contents/Resources/DWARF/hello": HELLO_DWARF,
            f"hello.dSYM/Contents/Resources/{HELLO_UUID}.plist": POISONS[poison],
        },
    )

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    dsym = assert_kept(cache_dir, entry)
    assert dsym == cache_dir / "dsyms" / HEX / "hello.dSYM/Contents/Resources/DWARF/hello"
    written = (dsym.parent.parent / f"{HELLO_UUID}.plist").read_bytes()
    assert b"<key>DBGDSYMPath</key>" in written and b"DBGPoison" not in written
