"""The folder kind of store: what a mounted or local symbol store may do to a fetch."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsymfind.stores import base, folder


def test_a_copy_ends_at_the_downloads_deadline(tmp_path: Path) -> None:
    """A slow network mount must not hold the downloader, and the UUID's lock, past the
    download's deadline: the copy gives up between chunks once it is spent."""
    store = tmp_path / "store"
    store.mkdir()
    (store / "key").write_bytes(b"\0" * (3 << 20))
    source = folder.FolderReader(str(store))
    spent = base.Terms(base.Limits(total_timeout=0))
    with pytest.raises(base.TransferError, match="gave up") as raised:
        source.get("key", str(tmp_path / "dest"), spent)
    assert raised.value.retryable
    got = source.get("key", str(tmp_path / "dest2"), base.Terms())
    assert got.size == 3 << 20


@pytest.mark.parametrize("records", ["_builds", "_manifests"])
def test_below_a_store_the_store_is_named_by_its_records(tmp_path: Path, records: str) -> None:
    store = tmp_path / "store"
    (store / records).mkdir(parents=True)
    (store / records / "one.json").write_text("{}")

    found = folder.surroundings(str(store / "arm64"), base.Options())

    assert found == base.Surroundings(False, (f"{store}/",))
