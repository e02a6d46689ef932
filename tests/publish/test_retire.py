"""`dsymfind retire` on a folder store and on the real S3 engine (SeaweedFS on loopback):
which builds go, what stays because another build or a publish under way names it, the dry
run, orphans, the transaction, refused credentials and what killed runs leave."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.build_records import Image, image, put_build, record
from support.s3_publish import keys_env
from support.seaweed import REGION, SYMBOLS, SeaweedS3

from dsymfind import main as cli
from dsymfind import stores
from dsymfind.stores import builds as records
from dsymfind.stores.base import Options
from dsymfind.stores.writers import Manager

DAY = 86400.0


class Store:
    """A store under test: its Manager and the arguments that name it to the command."""

    def __init__(self, manager: Manager, args: list[str]) -> None:
        self.manager = manager
        self.args = args

    def objects(self, prefix: str = "") -> set[str]:
        return {item.key for item in self.manager.listed(prefix)}

    def retire(self, *args: str) -> int:
        return cli.main(["retire", *self.args, *args])


def s3_store(s3: SeaweedS3, identity: str, monkeypatch: pytest.MonkeyPatch) -> Store:
    for name, value in keys_env(s3, identity).items():
        monkeypatch.setenv(name, value)
    url = f"s3://{SYMBOLS}/retire-{secrets.token_hex(4)}/"
    manager = stores.open_manager(
        url, Options(settings={"endpoint_url": s3.endpoint_url, "region": REGION})
    )
    return Store(manager, ["--store", url, "--endpoint-url", s3.endpoint_url, "--region", REGION])


@pytest.fixture(params=["folder", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    if request.param == "folder":
        root = tmp_path / "store"
        yield Store(stores.open_manager(str(root), Options()), ["--store", str(root)])
    else:
        yield s3_store(request.getfixturevalue("s3"), "admin", monkeypatch)


def three_builds(store: Store) -> None:
    """1.0 (1) 40 days old names images 1 and 2; 1.1 (2) 20 days old names 2 and 3; 1.2 (3),
    a minute old, names 4."""
    now = time.time()
    put_build(
        store.manager,
        "b1",
        now - 40 * DAY,
        [image(1), image(2)],
        version="1.0",
        build="1",
        commit="aaaa1111aaaa",
    )
    put_build(
        store.manager,
        "b2",
        now - 20 * DAY,
        [image(2), image(3)],
        version="1.1",
        build="2",
        commit="bbbb2222bbbb",
    )
    put_build(store.manager, "b3", now - 60, [image(4)], version="1.2", build="3")


def ids(store: Store) -> set[str]:
    return {key.removeprefix("_build-ids/") for key in store.objects("_build-ids/")}


def test_retiring_a_build_removes_what_only_it_names_and_keeps_what_another_names(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)

    assert store.retire("b1") == 0

    keys = store.objects()
    assert image(1).key not in keys and "_uuids/00000000000000000000000000000001/b1" not in keys
    assert image(2).key in keys  # b2 names it
    assert "_uuids/00000000000000000000000000000002/b2" in keys
    assert ids(store) == {"b2", "b3"}
    assert not store.objects("_retiring/")
    out = capsys.readouterr().out
    assert "retired 1.0 (1) MyApp (b1)" in out
    assert "deleted 1 objects (10 B); kept 1" in out


@pytest.mark.parametrize(
    ("name", "gone"), [("1.1 (2)", "b2"), ("1.0", "b1"), ("bbbb222", "b2"), ("b3", "b3")]
)
def test_a_build_is_named_as_builds_show_reads_it(store: Store, name: str, gone: str) -> None:
    three_builds(store)

    assert store.retire(name) == 0

    assert ids(store) == {"b1", "b2", "b3"} - {gone}


def test_a_build_published_a_minute_ago_is_removed_no_grace_period(store: Store) -> None:
    three_builds(store)

    assert store.retire("1.2") == 0

    assert image(4).key not in store.objects()


def test_a_name_no_build_has_is_an_error_and_nothing_goes(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)
    before = store.objects()

    assert store.retire("b1", "9.9") == 1

    assert "no build '9.9' in" in capsys.readouterr().err
    assert store.objects() == before


def test_older_than_retires_the_old_builds_less_those_kept(store: Store) -> None:
    three_builds(store)
    put_build(store.manager, "other", time.time() - 50 * DAY, [image(9)], app="Other")

    assert store.retire("--older-than", "10d", "--keep-last", "1", "--keep", "1.0") == 0

    # b1 pinned by --keep; b3 newer; Other's only build is its newest: only b2 goes.
    assert ids(store) == {"b1", "b3", "other"}
    assert image(3).key not in store.objects() and image(2).key in store.objects()


def test_a_dry_run_deletes_nothing_and_says_builds_objects_and_bytes(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)
    before = store.objects()

    assert store.retire("--older-than", "10d", "--dry-run") == 0

    assert store.objects() == before
    out = capsys.readouterr().out
    assert "would retire 1.0 (1) MyApp (b1)" in out and "would retire 1.1 (2) MyApp (b2)" in out
    assert "would delete 3 objects (30 B)" in out


def test_objects_no_record_names_are_left_unless_orphans_are_asked_for(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)
    store.manager.create_small("old/unnamed", b"12345")

    assert store.retire("b1") == 0
    assert "old/unnamed" in store.objects()

    # Just written: not older than a day, so left even with --orphans.
    assert store.retire("--older-than", "1d", "--orphans", "--keep-last", "5") == 0
    assert "old/unnamed" in store.objects()
    assert store.retire("--older-than", "0s", "--orphans", "--keep-last", "5") == 0

    assert "old/unnamed" not in store.objects()
    assert {image(2).key, image(3).key, image(4).key} <= store.objects()  # named by records
    assert "deleted 1 orphans (5 B)" in capsys.readouterr().out


def test_the_transaction_says_who_retired_what_and_is_listed(store: Store) -> None:
    three_builds(store)

    assert store.retire("b1", "b2") == 0

    [transaction], skipped = records.list_transactions(store.manager)
    assert not skipped
    assert "@" in transaction.who
    assert [b.id for b in transaction.builds] == ["b1", "b2"]
    assert transaction.objects == 3 and transaction.bytes == 30
    assert transaction.dry_run is False


def test_builds_retired_lists_the_transactions(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)
    assert store.retire("b1") == 0
    assert store.retire("b2") == 0
    capsys.readouterr()

    assert cli.main(["builds", *store.args, "--retired"]) == 0

    lines = capsys.readouterr().out.splitlines()
    # Both in one second: their order is the transactions' random ids'.
    said = sorted(line.partition("  ")[2].partition("  ")[2] for line in lines)
    assert said == [
        "1 builds, 1 objects, 10 B: MyApp 1.0 (1)",
        "1 builds, 2 objects, 20 B: MyApp 1.1 (2)",
    ]
    assert all("@" in line for line in lines)


def test_what_a_publish_under_way_names_is_kept(store: Store) -> None:
    three_builds(store)
    intent = records.Intent("b9", time.time(), (image(1).uuid,), ())
    records.write_intent(store.manager, intent)

    assert store.retire("b1") == 0

    assert image(1).key in store.objects()


def test_expired_tombstones_and_day_old_intents_are_removed_and_said(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)
    dead = records.Tombstone("x", time.time() - 700, 600, (), ())
    records.write_tombstone(store.manager, dead)
    records.write_tombstone(store.manager, dead._replace(id="y", started_at=time.time()))
    records.write_intent(
        store.manager, records.Intent("p", time.time() - 2 * DAY, (image(1).uuid,), ())
    )

    assert store.retire("b1") == 0

    assert store.objects("_retiring/") == {"_retiring/y.json"}
    assert not store.objects("_publishing/")
    assert image(1).key not in store.objects()  # the stale intent protected nothing
    out = capsys.readouterr().out
    assert "removed _retiring/x.json: the tombstone of a retire that did not finish" in out
    assert "removed _publishing/p.json: the intent of a publish that did not finish" in out


def test_a_lease_run_out_stops_the_run_before_the_next_batch(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)

    assert store.retire("b1", "--lease", "0.001") == 1

    assert "lease" in capsys.readouterr().err
    assert "b1" in ids(store) and image(1).key in store.objects()


def test_credentials_that_may_not_delete_get_one_line_and_nothing_is_touched(
    s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = s3_store(s3, "admin", monkeypatch)
    three_builds(admin)
    before = admin.objects()
    reader = s3_store(s3, "reader", monkeypatch)
    reader.args[1] = admin.args[1]

    assert reader.retire("b1") == 1

    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "may not delete" in err
    assert admin.objects() == before


def test_the_ci_identity_may_delete_as_seaweedfs_grants_write(
    s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SeaweedFS's Write action covers DeleteObject: a publisher's CI keys may retire."""
    ci = s3_store(s3, "ci", monkeypatch)
    three_builds(ci)

    assert ci.retire("b1") == 0

    assert "b1" not in ids(ci)


def test_a_record_that_cannot_be_read_is_named_and_its_build_left(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    key = put_build(store.manager, "bad", time.time() - 5 * DAY, [Image("A" * 32, "k/a")])
    store.manager.delete([key])
    store.manager.create_small(key, b"not json")

    assert store.retire("bad") == 0

    assert "left 1.0 (1) MyApp (bad): _builds/" in capsys.readouterr().out
    assert "k/a" in store.objects()


def test_an_object_a_record_lists_without_a_uuid_is_never_deleted(store: Store) -> None:
    made = record("b1", time.time() - DAY, [image(1)])
    made = made._replace(objects=({"key": "meta/plain", "uuid": None, "size": 3},))
    records.claim(store.manager, "b1")
    store.manager.create_small(image(1).key, b"o")
    store.manager.create_small("meta/plain", b"abc")
    records.write_uuid_refs(store.manager, "b1", [image(1).uuid])
    records.write_record(store.manager, made)

    assert store.retire("b1") == 0

    assert "meta/plain" in store.objects() and image(1).key not in store.objects()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["b1", "--older-than", "1d"], "name the builds to retire, or give --older-than"),
        ([], "name the builds to retire, or give --older-than"),
        (["b1", "--orphans"], "--orphans needs --older-than"),
        (["b1", "--keep-last", "-1"], "--keep-last and --lease take a positive number"),
    ],
)
def test_what_to_retire_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert cli.main(["retire", "--store", str(tmp_path), *args]) == 1

    assert said in capsys.readouterr().err


def test_a_dry_run_of_orphans_says_them_and_keeps_them(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    three_builds(store)
    store.manager.create_small("old/unnamed", b"12345")

    assert store.retire("--older-than", "0s", "--orphans", "--keep-last", "5", "--dry-run") == 0

    assert "would delete 1 orphans (5 B)" in capsys.readouterr().out
    assert "old/unnamed" in store.objects() and not store.objects("_retired/")


def test_a_pdb_both_builds_name_by_its_store_id_stays(store: Store) -> None:
    pdb = Image(
        "5A9C2F61B3E04D7A8C1F2E3D4C5B6A7902", "app.pdb/5A9C2F61B3E04D7A8C1F2E3D4C5B6A7902/app.pdb"
    )
    put_build(store.manager, "b1", time.time() - 2 * DAY, [pdb, image(1)])
    put_build(store.manager, "b2", time.time() - DAY, [pdb])

    assert store.retire("b1") == 0

    assert pdb.key in store.objects() and image(1).key not in store.objects()
    assert store.retire("b2") == 0
    assert pdb.key not in store.objects()
