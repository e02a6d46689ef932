"""apple/bundle.py on what a store or a user's folder may hold."""

from __future__ import annotations

from pathlib import Path

from support.fixtures import FIXTURES, HELLO_UUID
from support.plists import deep_binary_plist

from dsymfind.apple import bundle


def test_a_per_uuid_plist_nested_past_the_limit_reads_as_none(tmp_path: Path) -> None:
    """A downloaded bundle's own plist is read when it is admitted: a RecursionError there
    killed the downloader on every retry, so the UUID could never be admitted."""
    resources = tmp_path / "x.dSYM" / "Contents" / "Resources"
    resources.mkdir(parents=True)
    (resources / f"{HELLO_UUID}.plist").write_bytes(deep_binary_plist(5000))
    assert bundle.read_uuid_plist(str(tmp_path / "x.dSYM"), HELLO_UUID) == {}


def test_a_bundles_own_plist_still_reads() -> None:
    assert isinstance(bundle.read_uuid_plist(str(FIXTURES / "hello.dSYM"), HELLO_UUID), dict)
