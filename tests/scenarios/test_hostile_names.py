"""Bundle names from a server's zip that lldb could not use as they are: control characters
are refused with a reason, an odd-cased `.dSYM` extension is published under the canonical
name. Real helper processes and downloaders, a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import os
import plistlib
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import HELLO_UUID, link_of
from support.processes import run_helper, settled_record
from support.served import HELLO_DWARF, serve_zip

from dsymfind.cache import check, records
from dsymfind.paths import CachePaths

HEX = HELLO_UUID.replace("-", "")
DWARF = "Contents/Resources/DWARF"
SETTLE = 30.0


def bundle(name: str, dwarf: str = "hello") -> dict[str, bytes]:
    return {
        f"{name}/{DWARF}/{dwarf}": HELLO_DWARF,
        f"{name}/Contents/Info.plist": plistlib.dumps({"CFBundlePackageType": "dSYM"}),
    }


CONTROL_CHARACTERS = {
    "in-the-bundle-name": bundle("he\x01llo.dSYM"),
    "in-the-dwarf-name": bundle("hello.dSYM", "he\x01llo"),
    "newline": bundle("he\nllo.dSYM"),
    "delete": bundle("hello\x7f.dSYM"),
    "c1-next-line": bundle("hello\x85.dSYM"),
    "beside-the-bundle": {**bundle("hello.dSYM"), "hello.dSYM/Contents/\x1b[31mred": b""},
}


@pytest.mark.parametrize("entries", CONTROL_CHARACTERS.values(), ids=list(CONTROL_CHARACTERS))
def test_a_name_with_a_control_character_is_refused_with_a_reason(
    entries: dict[str, bytes], native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    serve_zip(native_server, HELLO_UUID, entries)

    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]

    assert "control character" in error, error
    record = settled_record(cache_dir, HELLO_UUID, timeout=SETTLE)
    assert record["state"] == records.FAILED
    assert "control character" in str(record["message"])
    assert "internal error" not in str(record["message"])
    assert not (cache_dir / "dsyms" / HEX).exists()
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert list((cache_dir / "tmp").iterdir()) == []


@pytest.mark.parametrize("extension", [".DSYM", ".dsym", ".Dsym", ".dSym"])
def test_an_odd_cased_extension_is_published_as_dsym(
    extension: str, native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    serve_zip(native_server, HELLO_UUID, bundle(f"hello{extension}"))

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    dsym = Path(entry["DBGDSYMPath"])
    assert dsym == cache_dir / "dsyms" / HEX / "hello.dSYM" / DWARF / "hello"
    assert dsym.read_bytes() == HELLO_DWARF
    assert os.listdir(cache_dir / "dsyms" / HEX) == ["hello.dSYM"]
    assert link_of(cache_dir, HELLO_UUID).resolve() == dsym.resolve()
    assert settled_record(cache_dir, HELLO_UUID, timeout=SETTLE)["state"] == records.DONE
    assert (dsym.parent.parent / f"{HELLO_UUID}.plist").is_file()
    requests = len(native_server.requests)
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(dsym)
    assert len(native_server.requests) == requests  # answered from the cache
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()
    assert report.count(check.INVALID) == 0
