"""A writer that also lists, reads back and removes (stores/writers.py Manager), on a
folder store and on the real S3 engine (SeaweedFS on loopback): what build records and
retiring stand on."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.s3_publish import keys_env
from support.seaweed import REGION, SYMBOLS, SeaweedS3

from dsymfind import stores
from dsymfind.stores.base import Options
from dsymfind.stores.writers import Manager, PublishError


def s3_manager(s3: SeaweedS3, identity: str, monkeypatch: pytest.MonkeyPatch) -> Manager:
    for name, value in keys_env(s3, identity).items():
        monkeypatch.setenv(name, value)
    prefix = f"manage-{secrets.token_hex(4)}/"
    settings = {"endpoint_url": s3.endpoint_url, "region": REGION}
    return stores.open_manager(f"s3://{SYMBOLS}/{prefix}", Options(settings=settings))


@pytest.fixture(params=["folder", "s3"])
def manager(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Manager]:
    if request.param == "folder":
        yield stores.open_manager(str(tmp_path / "store"), Options())
    else:
        yield s3_manager(request.getfixturevalue("s3"), "admin", monkeypatch)


def test_what_is_created_is_listed_in_key_order_and_read_back(manager: Manager) -> None:
    for key in ("_builds/b.json", "_builds/a.json", "_retired/x.json", "_buildsx/c"):
        assert manager.create_small(key, key.encode())

    listed = list(manager.listed("_builds/"))

    assert [item.key for item in listed] == ["_builds/a.json", "_builds/b.json"]
    assert [item.size for item in listed] == [len("_builds/a.json")] * 2
    assert all(item.modified > 0 for item in listed)
    assert manager.read_small("_builds/a.json") == b"_builds/a.json"
    assert manager.read_small("_builds/none.json") is None


def test_a_taken_key_is_not_created_again(manager: Manager) -> None:
    assert manager.create_small("_claims/one", b"first")
    assert not manager.create_small("_claims/one", b"second")
    assert manager.read_small("_claims/one") == b"first"


def test_an_object_larger_than_the_limit_is_refused(manager: Manager) -> None:
    manager.create_small("_builds/big.json", b"x" * 100)
    with pytest.raises(PublishError):
        manager.read_small("_builds/big.json", limit=99)
    assert manager.read_small("_builds/big.json", limit=100) == b"x" * 100


def test_deleted_keys_are_gone_and_absent_ones_are_no_failure(manager: Manager) -> None:
    keys = [f"objects/{n:04}" for n in range(5)]
    for key in keys:
        manager.create_small(key, b"o")

    assert manager.delete([*keys[:3], "objects/never"]) == []

    assert [item.key for item in manager.listed("objects/")] == keys[3:]
    assert manager.may_delete() is None


def test_an_empty_prefix_lists_nothing(manager: Manager) -> None:
    assert list(manager.listed("_nothing/")) == []


def test_a_folder_stores_hidden_names_are_not_objects(tmp_path: Path) -> None:
    manager = stores.open_manager(str(tmp_path / "store"), Options())
    manager.create_small("_builds/a.json", b"{}")
    (tmp_path / "store" / "_builds" / ".a.json.1234.tmp").write_bytes(b"half")
    (tmp_path / "store" / ".dsymfind-locks").mkdir()
    (tmp_path / "store" / ".dsymfind-locks" / "k").write_bytes(b"")

    assert [item.key for item in manager.listed("")] == ["_builds/a.json"]


def test_s3_listing_pages_through_more_than_a_thousand_keys(
    s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = s3_manager(s3, "admin", monkeypatch)
    client = s3.client("admin")
    prefix = manager.where("").removeprefix(f"s3://{SYMBOLS}/")
    for n in range(1003):
        client.put_object(Bucket=SYMBOLS, Key=f"{prefix}many/{n:05}", Body=b"")

    listed = [item.key for item in manager.listed("many/")]

    assert listed == [f"many/{n:05}" for n in range(1003)]
    assert manager.delete(listed) == []  # two DeleteObjects requests: at most 1,000 keys each
    assert list(manager.listed("many/")) == []


def test_s3_credentials_that_may_not_delete_are_named_before_anything_goes(
    s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = s3_manager(s3, "reader", monkeypatch)

    said = manager.may_delete()

    assert said is not None and "may not delete" in said
