"""Bundle names from a server's zip that lldb could not use as they are: control characters
are refused with a reason, an odd-cased `.dSYM` extension is published under the canonical
name. Real helper processes and downloaders, a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import io
import os
import plistlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, dwarf_of, link_of, write_config
from support.processes import run_helper, settled_record

from dsymfind.cache_layout import CacheLayout
from dsymfind.fetch import records
from dsymfind.store import check
from dsymfind.uuids import tree_parts

HELLO = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
KEY = "/" + "/".join(tree_parts(HELLO_UUID))
HEX = HELLO_UUID.replace("-", "")
DWARF = "Contents/Resources/DWARF"
SETTLE = 30.0


@pytest.fixture
def server(config_file: Path) -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer() as running:
        write_config(
            config_file, f"timeout = 10\n[[servers]]\nurl = '{running.url}/'\nlayout = 'native'\n"
        )
        yield running


def zipped(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def bundle(name: str, dwarf: str = "hello") -> dict[str, bytes]:
    return {
        f"{name}/{DWARF}/{dwarf}": HELLO,
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
    entries: dict[str, bytes], server: ss.SymbolServer, cache_dir: Path
) -> None:
    server.route(KEY, ss.body(zipped(entries), content_type="application/zip"))

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
    extension: str, server: ss.SymbolServer, cache_dir: Path
) -> None:
    server.route(KEY, ss.body(zipped(bundle(f"hello{extension}")), content_type="application/zip"))

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    dsym = Path(entry["DBGDSYMPath"])
    assert dsym == cache_dir / "dsyms" / HEX / "hello.dSYM" / DWARF / "hello"
    assert dsym.read_bytes() == HELLO
    assert os.listdir(cache_dir / "dsyms" / HEX) == ["hello.dSYM"]
    assert link_of(cache_dir, HELLO_UUID).resolve() == dsym.resolve()
    assert settled_record(cache_dir, HELLO_UUID, timeout=SETTLE)["state"] == records.DONE
    assert (dsym.parent.parent / f"{HELLO_UUID}.plist").is_file()
    requests = len(server.requests)
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(dsym)
    assert len(server.requests) == requests  # answered from the cache
    report = check.Checker(CacheLayout(str(cache_dir)), stale_after=3600).run()
    assert report.count(check.INVALID) == 0
