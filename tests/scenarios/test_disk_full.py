"""A full disk: the cache on a tiny tmpfs. A clean DBGError, no partial file under a final
name, existing entries intact, and no server blamed for our disk."""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, GREET_UUID, HELLO_UUID, dwarf_of
from support.negative import negative_markers
from support.processes import run_helper, settled_record
from support.tmpfs import small_file_system

from dsymfind.cache import check, records
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry, tree_parts

TMPFS_SIZE = "256k"
BIG = 1 << 20  # four times the file system


@pytest.fixture
def small_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with small_file_system(tmp_path / "small", TMPFS_SIZE) as mount_point:
        monkeypatch.setenv("DSYMFIND_CACHE_DIR", str(mount_point / "cache"))
        yield mount_point / "cache"


def zip_unpacking_to(size: int) -> bytes:
    """A small zip whose bundle unpacks to `size` bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("libgreet.dylib.dSYM/Contents/Resources/DWARF/libgreet.dylib", bytes(size))
    return out.getvalue()


def wait_until_settled(cache: Path, uuid: str) -> dict[str, object]:
    return settled_record(cache, uuid, timeout=30)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda: ss.body(b"\xcf\xfa\xed\xfe" + bytes(BIG)), id="while-downloading"),
        pytest.param(lambda: ss.body(zip_unpacking_to(BIG)), id="while-unpacking"),
    ],
)
def test_a_full_disk_is_a_clean_error(
    small_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: object
) -> None:
    store = tmp_path / "store"
    hello_path = Path(tree_entry(str(store), HELLO_UUID))
    hello_path.parent.mkdir(parents=True)
    shutil.copyfile(dwarf_of(FIXTURES / "hello.dSYM"), hello_path)
    with ss.SymbolServer(store) as server:
        server.route("/" + "/".join(tree_parts(GREET_UUID)), answer())  # type: ignore[operator]
        monkeypatch.setenv("DSYMFIND_SERVERS", f"native={server.url}/")
        hello = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"]
        before = Path(hello).read_bytes()

        run = run_helper(GREET_UUID)
        record = wait_until_settled(small_cache, GREET_UUID)
        again = run_helper(GREET_UUID)
    assert record["state"] == records.FAILED
    assert "No space left on device" in str(record["message"])
    for answered in (run, again):
        entry = answered.plist.get(GREET_UUID, {})
        assert "DBGDSYMPath" not in entry
    assert "No space left on device" in again.entry(GREET_UUID).get("DBGError", "")
    # Nothing of it under a final name, nothing left in staging.
    greet_hex = GREET_UUID.replace("-", "")
    assert not (small_cache / "dsyms" / greet_hex).exists()
    assert not os.path.lexists(tree_entry(str(small_cache / "uuids"), GREET_UUID))
    assert list((small_cache / "tmp").iterdir()) == []
    # Our disk, not the server: neither the negative cache nor the server's backoff.
    assert negative_markers(small_cache) == []
    assert not list((small_cache / "failing-servers").glob("*"))
    # What was there is intact and still answered.
    assert Path(hello).read_bytes() == before
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == hello
    report = check.Checker(CachePaths(str(small_cache)), stale_after=3600).run()
    assert report.count(check.INVALID) == 0
