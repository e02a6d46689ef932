"""`dsymfind builds`, `builds show` and `builds find` over what real publish runs wrote, on
folder stores and on the real S3 engine (SeaweedFS on loopback): newest first, one build's
images, the builds of a UUID, a record that cannot be read named and skipped, and one
listing request per 1,000 records."""

from __future__ import annotations

import json
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, HELLO_UUID, UNIVERSAL_UUIDS, write_config
from support.s3_publish import counting
from support.seaweed import REGION, SYMBOLS, SeaweedS3

from dsymfind import main as cli
from dsymfind.stores import builds

HELLO_HEX = HELLO_UUID.replace("-", "")


def publish(capsys: pytest.CaptureFixture[str], store: str | Path, *args: str | Path) -> str:
    code = cli.main(["publish", "--to", str(store), *map(str, args)])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def builds_of(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["builds", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def record_at(store: Path, summary: builds.Summary, record: builds.Record) -> None:
    (store / summary.key).parent.mkdir(parents=True, exist_ok=True)
    (store / summary.key).write_bytes(builds.encode_record(record))


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Three builds of two apps, published one after another (their times rewritten a day
    apart, so that newest first is certain): hello 1.0 (1), hello 2.3 (812), universal."""
    folder = tmp_path / "store"
    publish(capsys, folder, "--build-id", "hello-1", FIXTURES / "hello.dSYM")
    publish(capsys, folder, "--build-id", "hello-812", "--app-version", "2.3",
            "--build-number", "812", FIXTURES / "hello.dSYM")  # fmt: skip
    publish(capsys, folder, "--build-id", "uni-5", "--build-number", "5",
            FIXTURES / "universal.dSYM")  # fmt: skip
    for day, key in enumerate(sorted((folder / "_builds").iterdir(), key=_id_order)):
        summary = builds.parse_summary(f"_builds/{key.name}")
        record = builds.decode_record(key.read_bytes(), summary.key)
        moved = record._replace(published_at=f"2026-11-0{day + 1}T10:00:00Z")
        key.unlink()
        record_at(folder, moved.summary, moved)
    return folder


def _id_order(path: Path) -> int:
    return ["hello-1", "hello-812", "uni-5"].index(builds.parse_summary(f"_builds/{path.name}").id)


def test_builds_lists_newest_first_with_version_app_date_commit_images_and_size(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = builds_of(capsys, "--store", store)

    assert code == 0 and err == ""
    lines = out.splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["1.0", "(5)", "universal"],
        ["2.3", "(812)", "hello"],
        ["1.0", "(1)", "hello"],
    ]
    assert "2026-11-03 10:00 UTC" in lines[0] and "2 images" in lines[0]
    assert "1 image " in lines[1] + " " and "9.0 KiB" in lines[1]


def test_builds_json_is_an_array_of_records(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = builds_of(capsys, "--store", store, "--json")

    listed = json.loads(out)
    assert code == 0
    assert [entry["id"] for entry in listed] == ["uni-5", "hello-812", "hello-1"]
    first = listed[1]
    assert {k: first[k] for k in ("app", "version", "build", "images", "store")} == {
        "app": "hello",
        "version": "2.3",
        "build": "812",
        "images": 1,
        "store": str(store),
    }
    assert first["published_at"] == "2026-11-02T10:00:00Z"
    assert first["bytes"] == (FIXTURES / "hello.dSYM/Contents/Resources/DWARF/hello").stat().st_size


@pytest.mark.parametrize("build", ["hello-812", "2.3 (812)", "2.3"])
def test_show_lists_one_builds_images(
    store: Path, build: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = builds_of(capsys, "show", build, "--store", store)

    assert code == 0
    assert out.splitlines()[0] == "hello 2.3 (812)  hello"
    assert "id         hello-812" in out
    (image,) = [line for line in out.splitlines() if line.startswith("  ")]
    assert image.split()[:4] == ["hello", HELLO_HEX, "arm64", "dsym"]


def test_show_json_is_the_record(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = builds_of(capsys, "--store", store, "show", "uni-5", "--json")

    record = json.loads(out)
    assert code == 0 and record["format"] == 2 and record["id"] == "uni-5"
    assert sorted(image["uuid"] for image in record["images"]) == sorted(
        u.replace("-", "") for u in UNIVERSAL_UUIDS.values()
    )
    assert {image["arch"] for image in record["images"]} == set(UNIVERSAL_UUIDS)


def test_show_by_a_commit_prefix_and_what_matches_nothing_or_too_much(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit = json.loads(builds_of(capsys, "--store", store, "--json")[1])[0]["commit"]
    if commit:  # the fixtures lie in this repository: its HEAD is every build's commit
        code, _, err = builds_of(capsys, "show", commit[:7], "--store", store)
        assert code == 1 and "matches several builds" in err and "name one by its ID" in err
    code, _, err = builds_of(capsys, "show", "9.9", "--store", store)
    assert code == 1 and err == f"dsymfind: error: no build '9.9' in {store}\n"
    code, _, err = builds_of(capsys, "show", "1.0", "--store", store)
    assert code == 1 and "'1.0' matches several builds (uni-5: " in err


def test_find_names_the_builds_carrying_a_uuid(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = builds_of(capsys, "find", HELLO_UUID.lower(), "--store", store)
    assert code == 0
    assert [line.split()[-1] for line in out.splitlines()] == ["hello-812", "hello-1"]

    code, out, _ = builds_of(capsys, "find", HELLO_HEX, "--store", store, "--json")
    assert [entry["id"] for entry in json.loads(out)] == ["hello-812", "hello-1"]

    code, out, err = builds_of(capsys, "find", str(uuid.uuid4()), "--store", store)
    assert code == 1 and out == "" and "carries" in err


def test_a_record_that_cannot_be_read_is_named_and_skipped(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (store / "_builds" / "notes.json").write_text("{}")
    (newest,) = [p for p in (store / "_builds").iterdir() if ",uni-5," in p.name]
    newest.write_text("{cut short")

    code, out, err = builds_of(capsys, "--store", store)
    assert code == 0 and len(out.splitlines()) == 3  # the key still says all it lists
    assert err == (
        f"dsymfind: warning: {store}: skipped _builds/notes.json: not a build record's key\n"
    )
    code, _, err = builds_of(capsys, "show", "uni-5", "--store", store)
    assert code == 1 and f"_builds/{newest.name}: not JSON" in err


def test_without_a_store_every_configured_folder_is_listed(
    store: Path, tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    publish(capsys, other, "--build-id", "lib-1", FIXTURES / "libgreet.dylib.dSYM")
    write_config(
        config_file,
        f'[[servers]]\nname = "team"\nurl = "{store.as_uri()}"\nlayout = "unified"\n'
        f'[[servers]]\nname = "lib"\nurl = "{other.as_uri()}"\nlayout = "unified"\n'
        '[[servers]]\nname = "web"\nurl = "https://symbols.example.com/"\nlayout = "unified"\n',
    )

    code, out, err = builds_of(capsys)

    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()] == ["team"] * 3 + ["lib"]
    code, out, _ = builds_of(capsys, "--store", "lib", "--json")
    assert [entry["store"] for entry in json.loads(out)] == ["lib"]


def test_retired_lists_the_transactions(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gone = (builds.RetiredBuild("old-1", "hello", "0.9", "1"),)
    transaction = builds.Transaction("tx-1", "ci@mac", "2026-11-04T10:00:00Z", gone, 4, 8192)
    (store / transaction.key).parent.mkdir(parents=True)
    (store / transaction.key).write_bytes(builds.encode_transaction(transaction))

    code, out, _ = builds_of(capsys, "--store", store, "--retired")
    assert code == 0
    assert out == ("2026-11-04 10:00 UTC  ci@mac  1 builds, 4 objects, 8.0 KiB: hello 0.9 (1)\n")
    code, out, _ = builds_of(capsys, "--store", store, "--retired", "--json")
    assert json.loads(out)[0]["builds"] == [
        {"id": "old-1", "app": "hello", "version": "0.9", "build": "1"}
    ]


def test_on_s3_1001_records_are_listed_in_two_requests(
    s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"builds-{uuid.uuid4().hex[:12]}"
    admin = s3.client("admin")
    summaries = [
        builds.Summary(
            f"20261101T{n // 3600:02d}{n // 60 % 60:02d}{n % 60:02d}Z",
            f"b{n}",
            "App",
            "1.0",
            str(n),
            "",
            1,
            10,
        )
        for n in range(1001)
    ]
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda s: admin.put_object(Bucket=SYMBOLS, Key=f"{prefix}/{s.key}", Body=b"{}"),
                summaries,
            )
        )
    admin.put_object(Bucket=SYMBOLS, Key=f"{prefix}/_builds/stray.json", Body=b"{}")
    requests = counting(s3, "reader", monkeypatch)

    code, out, err = builds_of(
        capsys, "--store", f"s3://{SYMBOLS}/{prefix}/", "--endpoint-url", s3.endpoint_url,
        "--region", REGION, "--json",
    )  # fmt: skip

    assert code == 0, err
    listed = json.loads(out)
    assert len(listed) == 1001 and listed[0]["id"] == "b1000" and listed[-1]["id"] == "b0"
    # The writer's probe (that the endpoint answers as S3 does), then a page per 1,000.
    assert requests.listed == ["", "_builds/", "_builds/"]
    assert requests.operations == {"ListObjectsV2": 3}
    assert "skipped _builds/stray.json: not a build record's key" in err


def test_on_s3_a_published_build_is_listed_shown_and_found(
    s3: SeaweedS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = f"builds-{uuid.uuid4().hex[:12]}"
    location = ["--endpoint-url", s3.endpoint_url, "--region", REGION]
    counting(s3, "ci", monkeypatch)
    dsym = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "Hello.app.dSYM")
    publish(capsys, f"s3://{SYMBOLS}/{prefix}", *location, "--build-id", "ci-7", dsym)
    counting(s3, "reader", monkeypatch)
    store = ["--store", f"s3://{SYMBOLS}/{prefix}", *location]

    code, out, _ = builds_of(capsys, *store)
    assert code == 0 and out.split()[:3] == ["1.0", "(1)", "Hello"]
    code, out, _ = builds_of(capsys, "show", "ci-7", *store, "--json")
    assert code == 0 and json.loads(out)["images"][0]["uuid"] == HELLO_HEX
    code, out, _ = builds_of(capsys, "find", HELLO_UUID, *store)
    assert code == 0 and out.split()[-1] == "ci-7"
