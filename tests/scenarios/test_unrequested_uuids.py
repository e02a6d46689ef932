"""An answer publishes only the UUID asked for (and the other slices of that verified file).

A server's zip whose bundle holds a second DWARF file must not get that file's UUID linked
into the cache's tree: it would be answered from an unverified file and never asked of a
server again. A user's own bundle, indexed in place, still has every UUID linked. Real
helper and CLI processes, real downloaders, a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS, dwarf_of, link_of
from support.processes import run_cli, run_helper, settled_record
from support.served import GREET_DWARF, HELLO_DWARF, UNIVERSAL_DWARF, serve_zip, url_path

from dsymfind.cache import check
from dsymfind.paths import CachePaths

DWARF = "Contents/Resources/DWARF"
SETTLE = 30.0


def hello_bundle_with_greet(greet_name: str) -> dict[str, bytes]:
    """hello.dSYM as a server zips it, with libgreet's DWARF file beside hello's."""
    return {
        f"hello.dSYM/{DWARF}/hello": HELLO_DWARF,
        f"hello.dSYM/{DWARF}/{greet_name}": GREET_DWARF,
    }


def assert_check_is_clean(cache_dir: Path) -> None:
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()
    assert report.count(check.INVALID) == 0


# The extra file sorts first, before the one asked for, and also second.
@pytest.mark.parametrize("extra_name", ["aaa", "zzz"])
def test_a_second_dwarf_file_in_the_bundle_is_not_published(
    extra_name: str, native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    serve_zip(native_server, HELLO_UUID, hello_bundle_with_greet(extra_name))

    dsym = Path(run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"])

    assert dsym.read_bytes() == HELLO_DWARF
    assert sorted(os.listdir(dsym.parent)) == ["hello"]
    settled_record(cache_dir, HELLO_UUID, timeout=SETTLE)
    assert not os.path.lexists(link_of(cache_dir, GREET_UUID))
    assert run_helper(GREET_UUID).plist == {}  # asked of the server, which has no such file
    assert native_server.count(url_path(GREET_UUID)) == 1
    assert_check_is_clean(cache_dir)


def test_relinking_the_entry_links_only_what_was_asked_for(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    """`check --repair` relinks an entry whose links a crash lost: from what it holds."""
    serve_zip(native_server, HELLO_UUID, hello_bundle_with_greet("libgreet.dylib"))
    dsym = Path(run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"])
    settled_record(cache_dir, HELLO_UUID, timeout=SETTLE)
    link_of(cache_dir, HELLO_UUID).unlink()  # as a crash before the links were made

    repaired = run_cli("check", "--repair")

    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert link_of(cache_dir, HELLO_UUID).resolve() == dsym.resolve()
    assert not os.path.lexists(link_of(cache_dir, GREET_UUID))


def test_every_slice_of_the_verified_universal_file_is_published_but_nothing_else(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    arm64 = UNIVERSAL_UUIDS["arm64"]
    serve_zip(
        native_server,
        arm64,
        {
            f"universal.dSYM/{DWARF}/universal": UNIVERSAL_DWARF,
            f"universal.dSYM/{DWARF}/libgreet.dylib": GREET_DWARF,
        },
    )

    dsym = Path(run_helper(arm64).entry(arm64)["DBGDSYMPath"])

    settled_record(cache_dir, arm64, timeout=SETTLE)
    for uuid in UNIVERSAL_UUIDS.values():
        assert link_of(cache_dir, uuid).resolve() == dsym.resolve()
    assert not os.path.lexists(link_of(cache_dir, GREET_UUID))
    assert_check_is_clean(cache_dir)


def test_index_still_links_every_uuid_of_a_users_own_bundle(
    products: Path, cache_dir: Path
) -> None:
    """A user's bundle with two DWARF files, indexed in place: both are the user's own."""
    both = products / "both.dSYM"
    shutil.copytree(products / "hello.dSYM", both)
    shutil.copy(dwarf_of(products / "libgreet.dylib.dSYM"), both / DWARF / "libgreet.dylib")

    indexed = run_cli("index", str(both))

    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    assert link_of(cache_dir, HELLO_UUID).resolve() == (both / DWARF / "hello").resolve()
    assert link_of(cache_dir, GREET_UUID).resolve() == (both / DWARF / "libgreet.dylib").resolve()
