"""A store's build records, intents, tombstones and transactions (stores/builds.py), on a
folder store: what they are written as, what is read back, and what is refused."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from dsymfind import stores
from dsymfind.errors import DsymfindError
from dsymfind.stores import builds
from dsymfind.stores.base import Options
from dsymfind.stores.writers import Manager

UUID_A = "4C4C44A1-5555-3144-A1B2-000000000001".replace("-", "")
UUID_B = "1A2B3C4D5E6F70819203A4B5C6D7E8F9"


@pytest.fixture
def manager(tmp_path: Path) -> Manager:
    return stores.open_manager(str(tmp_path / "store"), Options())


def record(**changes: object) -> builds.Record:
    fields: dict[str, object] = {
        "id": "ci-812",
        "app": "My App, beta",
        "bundle_id": "com.example.app",
        "version": "2.3",
        "build": "812",
        "published_at": "2026-12-02T13:26:13Z",
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "remote": "git@example.com:app.git",
        "dirty": False,
        "ci": builds.CIRun("github", "42", "https://github.com/o/r/actions/runs/42"),
        "host": "mac-1",
        "images": (
            builds.Image("MyKit", UUID_A, "arm64", "dsym", "mykit/key", 1000),
            builds.Image("App", UUID_B, "x86_64", "executable", "app/key", 24),
        ),
        "objects": ({"key": "mykit/key", "state": "published"},),
    }
    fields.update(changes)
    return builds.Record(**fields)  # type: ignore[arg-type]


def test_a_record_is_read_back_as_written() -> None:
    written = record()

    read = builds.decode_record(builds.encode_record(written), written.key)

    assert read == written
    assert json.loads(builds.encode_record(written))["format"] == 2


def test_the_key_spells_the_summary_and_is_read_back() -> None:
    written = record()

    assert written.key == (
        "_builds/20261202T132613Z,ci-812,My%20App%2C%20beta,2.3,812,"
        "0123456789abcdef0123456789abcdef01234567,2,1024.json"
    )
    summary = builds.parse_summary(written.key)
    assert summary == builds.Summary(
        "20261202T132613Z", "ci-812", "My App, beta", "2.3", "812", written.commit, 2, 1024
    )
    assert summary.key == written.key


@pytest.mark.parametrize(
    "key",
    [
        "_builds/nonsense.json",
        "_builds/20261202T132613Z,id,app,1,2,c,2.json",
        "_builds/2026-12-02,id,app,1,2,c,2,3.json",
        "_builds/20261202T132613Z,bad id,app,1,2,c,2,3.json",
        "_builds/20261202T132613Z,id,app,1,2,c,two,3.json",
        "_builds/20261202T132613Z,id,app,1,2,c,2,3",
        "_builds/20261202T132613Z,id,%FF,1,2,c,2,3.json",
    ],
)
def test_a_key_that_spells_no_summary_is_refused_by_name(key: str) -> None:
    with pytest.raises(builds.BadRecord, match="_builds/"):
        builds.parse_summary(key)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"format": 1}', "format"),
        (json.dumps({**json.loads(builds.encode_record(record())), "app": 3}), "app is not text"),
        (
            json.dumps({**json.loads(builds.encode_record(record())), "app": "x" * 201}),
            "longer than 200",
        ),
        (
            json.dumps({**json.loads(builds.encode_record(record())), "dirty": "no"}),
            "dirty is not true or false",
        ),
        (
            json.dumps({**json.loads(builds.encode_record(record())), "published_at": "x"}),
            "ISO 8601",
        ),
        (
            json.dumps({**json.loads(builds.encode_record(record())), "images": [{"kind": "x"}]}),
            "kind",
        ),
        (
            json.dumps(
                {
                    **json.loads(builds.encode_record(record())),
                    "images": [{**record().images[0]._asdict(), "uuid": "nothex"}],
                }
            ),
            "not a UUID",
        ),
        (
            json.dumps(
                {
                    **json.loads(builds.encode_record(record())),
                    "images": [{**record().images[0]._asdict(), "size": -1}],
                }
            ),
            "size is not a count",
        ),
        (json.dumps({**json.loads(builds.encode_record(record())), "id": "a/b"}), "build ID"),
        (b"[" * 100_000, "not JSON"),
    ],
)
def test_a_bad_record_is_one_error_naming_its_key(data: str | bytes, why: str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    with pytest.raises(builds.BadRecord, match=f"^_builds/x.json: .*{why}"):
        builds.decode_record(raw, "_builds/x.json")


def test_a_record_its_reader_would_refuse_is_not_encoded() -> None:
    with pytest.raises(DsymfindError, match="not written"):
        builds.encode_record(record(app="x" * 300))


def test_ids_are_checked_and_made_unique() -> None:
    assert builds.check_id("2.3-812_a") == "2.3-812_a"
    for bad in ("", "a/b", "a b", "x" * 101, "é"):
        with pytest.raises(DsymfindError, match="build ID"):
            builds.check_id(bad)
    moment = datetime.datetime(2026, 12, 2, 13, 26, 13, tzinfo=datetime.UTC)
    made = {builds.new_id(moment) for _ in range(50)}
    assert len(made) == 50
    assert all(builds.check_id(one).startswith("20261202T132613Z-") for one in made)


def test_records_are_listed_newest_first_and_bad_keys_are_named(manager: Manager) -> None:
    older = record(id="one", published_at="2026-12-01T10:00:00Z")
    newer = record(id="two", published_at="2026-12-02T10:00:00Z")
    for one in (newer, older):
        assert builds.write_record(manager, one) == one.key
    manager.create_small("_builds/stray.json", b"{}")

    summaries, skipped = builds.list_summaries(manager)

    assert [summary.id for summary in summaries] == ["two", "one"]
    assert skipped == [("_builds/stray.json", "_builds/stray.json: not a build record's key")]
    assert builds.read_record(manager, newer.key) == newer
    assert builds.read_record(manager, "_builds/none.json") is None


def test_a_record_is_created_once(manager: Manager) -> None:
    builds.write_record(manager, record())
    with pytest.raises(DsymfindError, match="exists already"):
        builds.write_record(manager, record())


def test_a_record_whose_body_is_bad_is_named_when_read(manager: Manager) -> None:
    key = record().key
    manager.create_small(key, b"{truncated")

    with pytest.raises(builds.BadRecord, match=f"^{key}: not JSON"):
        builds.read_record(manager, key)


def test_a_record_under_another_builds_key_is_refused(manager: Manager) -> None:
    key = record(id="other").key
    manager.create_small(key, builds.encode_record(record()))

    with pytest.raises(builds.BadRecord, match="holds the record of build ci-812"):
        builds.read_record(manager, key)


def test_a_build_id_is_claimed_once(manager: Manager) -> None:
    assert builds.claim(manager, "ci-812")
    assert not builds.claim(manager, "ci-812")
    assert [item.key for item in manager.listed(builds.BUILD_IDS)] == ["_build-ids/ci-812"]


def test_uuid_refs_name_the_builds_of_a_uuid(manager: Manager) -> None:
    builds.write_uuid_refs(manager, "one", [UUID_A, UUID_B, UUID_A])
    builds.write_uuid_refs(manager, "two", [UUID_A])
    manager.create_small(f"_uuids/{UUID_A}/bad id", b"")
    manager.create_small("_uuids/stray", b"")

    assert builds.builds_naming(manager, UUID_A) == ["one", "two"]
    assert builds.list_uuid_refs(manager) == {UUID_A: {"one", "two"}, UUID_B: {"one"}}


def test_intents_and_tombstones_are_read_back_and_bad_ones_named(manager: Manager) -> None:
    intent = builds.Intent("ci-812", 1700000000.5, (UUID_A,), ("mykit/key",))
    tombstone = builds.Tombstone("tx-1", 1700000000.0, 600.0, (UUID_B,), ("app/key",))
    assert builds.write_intent(manager, intent) == "_publishing/ci-812.json"
    assert builds.write_tombstone(manager, tombstone) == "_retiring/tx-1.json"
    manager.create_small("_publishing/bad.json", b'{"id": "x", "started_at": "soon"}')

    intents, skipped = builds.read_intents(manager)
    tombstones, none_skipped = builds.read_tombstones(manager)

    assert intents == [("_publishing/ci-812.json", intent)]
    assert skipped == [("_publishing/bad.json", "_publishing/bad.json: started_at is not a number")]
    assert tombstones == [("_retiring/tx-1.json", tombstone)]
    assert none_skipped == []
    assert tombstone.expires == 1700000600.0


def test_transactions_are_listed_newest_first(manager: Manager) -> None:
    gone = (builds.RetiredBuild("ci-800", "App", "2.2", "800"),)
    first = builds.Transaction("tx-1", "ci@mac", "2026-12-01T10:00:00Z", gone, 20, 4096)
    second = builds.Transaction("tx-2", "ci@mac", "2026-12-02T10:00:00Z", (), 0, 0)
    assert builds.write_transaction(manager, first) == "_retired/20261201T100000Z-tx-1.json"
    builds.write_transaction(manager, second)
    manager.create_small("_retired/zz.json", b"[]")

    transactions, skipped = builds.list_transactions(manager)

    assert transactions == [second, first]
    assert skipped == [("_retired/zz.json", "_retired/zz.json: not a JSON object")]
