"""The build record `dsymfind publish` writes (stores/builds.py, publish/build_record.py):
written last, after every object it names, on the real S3 engine (SeaweedFS on loopback)
and in folders; what it holds, read from an `.xcarchive` made here and from the command
line; the CI run; a build ID taken once."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.archives import xcarchive
from support.fixtures import FIXTURES, GREET_UUID, HELLO_UUID
from support.portable_pdb import write_portable_pair
from support.s3_publish import counting, publish_args
from support.seaweed import SYMBOLS, SeaweedS3

from dsymfind import main as cli
from dsymfind.publish import recording
from dsymfind.stores import builds


def publish(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["publish", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def only_record(store: Path) -> dict[str, object]:
    (path,) = (store / "_builds").iterdir()
    document: dict[str, object] = json.loads(path.read_bytes())
    return document


def test_on_s3_the_record_is_written_after_every_object_it_names(
    s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"records-{uuid.uuid4().hex[:12]}"
    requests = counting(s3, "ci", monkeypatch)

    assert cli.main(publish_args(s3, prefix, FIXTURES / "hello.dSYM", "--build-id", "ci-1")) == 0

    written = requests.written
    record_key = written[-1]
    assert (
        record_key.startswith("_builds/")
        and f"build record {record_key}" in capsys.readouterr().out
    )
    assert written[0] == "_build-ids/ci-1" and written[1] == "_publishing/ci-1.json"
    record = json.loads(
        s3.client("reader").get_object(Bucket=SYMBOLS, Key=f"{prefix}/{record_key}")["Body"].read()
    )
    (image,) = record["images"]
    assert image["key"] in written[: written.index(record_key)]
    assert f"_uuids/{image['uuid']}/ci-1" in written[: written.index(record_key)]
    listed = s3.client("admin").list_objects_v2(Bucket=SYMBOLS, Prefix=f"{prefix}/_publishing/")
    assert listed.get("KeyCount", 0) == 0  # the intent is gone


def test_the_record_holds_the_app_version_build_commit_and_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = xcarchive(tmp_path)
    store = tmp_path / "store"

    code, _, err = publish(capsys, "--to", store, "--build-id", "2.3-812", archive)

    assert code == 0, err
    record = only_record(store)
    assert {k: record[k] for k in ("format", "id", "app", "bundle_id", "version", "build")} == {
        "format": 2,
        "id": "2.3-812",
        "app": "MyApp",
        "bundle_id": "com.example.myapp",
        "version": "2.3",
        "build": "812",
    }
    assert record["host"] and str(record["published_at"]).endswith("Z")
    images = sorted(record["images"], key=lambda image: image["name"])  # type: ignore[arg-type]
    assert [(i["name"], i["uuid"], i["kind"]) for i in images] == [
        ("hello", HELLO_UUID.replace("-", ""), "dsym"),
        ("libgreet.dylib", GREET_UUID.replace("-", ""), "dsym"),
    ]
    for image in images:
        assert image["size"] == (store / image["key"]).stat().st_size
        assert (store / "_uuids" / image["uuid"] / "2.3-812").is_file()
    objects = {o["key"] for o in record["objects"]}  # type: ignore[union-attr]
    assert {i["key"] for i in images} <= objects
    assert not list((store / "_publishing").iterdir())
    summary = builds.parse_summary(f"_builds/{next((store / '_builds').iterdir()).name}")
    assert (summary.app, summary.version, summary.build, summary.images) == (
        "MyApp",
        "2.3",
        "812",
        2,
    )


def test_the_command_line_says_the_version_and_build_over_the_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = xcarchive(tmp_path)
    store = tmp_path / "store"

    code, _, err = publish(
        capsys, "--to", store, "--app-version", "2.3.1", "--build-number", "813", archive
    )

    assert code == 0, err
    record = only_record(store)
    assert (record["app"], record["version"], record["build"]) == ("MyApp", "2.3.1", "813")
    assert builds.check_id(str(record["id"])).startswith(str(record["published_at"])[:4])


def test_a_build_id_is_taken_once_and_the_second_run_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert publish(capsys, "--to", store, "--build-id", "ci-9", FIXTURES / "hello.dSYM")[0] == 0
    before = sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file())

    code, out, err = publish(
        capsys, "--to", store, "--build-id", "ci-9", FIXTURES / "libgreet.dylib.dSYM"
    )

    assert code == 1 and out == ""
    assert err == f"dsymfind: error: build ID ci-9 exists in {store}\n"
    assert sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file()) == before


def test_a_bad_build_id_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = publish(
        capsys, "--to", tmp_path / "s", "--build-id", "a/b", FIXTURES / "hello.dSYM"
    )
    assert code == 1 and "build ID 'a/b' is not 1 to 100 of the characters" in err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("env", "ci"),
    [
        (
            {
                "GITHUB_ACTIONS": "true",
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_REPOSITORY": "example/app",
                "GITHUB_RUN_ID": "99",
            },
            {
                "system": "github",
                "run": "99",
                "url": "https://github.com/example/app/actions/runs/99",
            },
        ),
        (
            {
                "GITLAB_CI": "true",
                "CI_JOB_ID": "5",
                "CI_JOB_URL": "https://gl.example/app/-/jobs/5",
            },
            {"system": "gitlab", "run": "5", "url": "https://gl.example/app/-/jobs/5"},
        ),
    ],
)
def test_the_ci_run_is_recorded(
    env: dict[str, str],
    ci: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("GITHUB_ACTIONS", "GITLAB_CI", "CI_BUILD_ID", "BUILD_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    store = tmp_path / "store"

    assert publish(capsys, "--to", store, FIXTURES / "hello.dSYM")[0] == 0

    assert only_record(store)["ci"] == ci


def test_a_dry_run_says_the_record_and_writes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    code, out, _ = publish(
        capsys, "--to", store, "--dry-run", "--build-id", "try", FIXTURES / "hello.dSYM"
    )
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("would write build record ")]
    assert builds.parse_summary(line.rpartition(" ")[2]).id == "try"
    assert not [p for p in store.rglob("*") if p.is_file()]


def test_a_retire_at_work_is_waited_out_and_what_it_deleted_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tombstone naming this run's UUID is noted before any object is put; the objects a
    retire deletes meanwhile (here: right after they were put) are written again once its
    lease has run out, before the record that names them."""
    store = tmp_path / "store"
    hex_uuid = HELLO_UUID.replace("-", "")
    tombstone = builds.Tombstone("tx-1", time.time(), 1.0, (hex_uuid,), ())
    store.mkdir()
    (store / "_retiring").mkdir()
    (store / builds.tombstone_key("tx-1")).write_bytes(builds.encode_tombstone(tombstone))
    settle = recording.Recording.settle

    def retired_meanwhile(self: recording.Recording, *args: Any) -> None:
        for path in store.rglob("*"):
            if path.is_file() and not str(path.relative_to(store)).startswith("_"):
                path.unlink()
        settle(self, *args)

    monkeypatch.setattr(recording.Recording, "settle", retired_meanwhile)

    code, _, err = publish(capsys, "--to", store, "--build-id", "b-1", FIXTURES / "hello.dSYM")

    assert code == 0, err
    assert time.time() >= tombstone.expires
    (image,) = only_record(store)["images"]  # type: ignore[misc]
    dwarf = FIXTURES / "hello.dSYM/Contents/Resources/DWARF/hello"
    assert (store / image["key"]).read_bytes() == dwarf.read_bytes()


def test_a_portable_pdb_is_recorded_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exe, pdb = write_portable_pair(tmp_path / "bin", uuid.UUID(int=0x1234), 0x5F00)
    store = tmp_path / "store"

    code, _, err = publish(capsys, "--to", store, exe, pdb)

    assert code == 0, err
    kinds = {image["name"]: image["kind"] for image in only_record(store)["images"]}  # type: ignore[union-attr]
    assert kinds == {"hello64.exe": "pe", "hello64.pdb": "portable-pdb"}
