"""CI's side: `dsymfind publish`, run in a real git clone that built C sources by absolute
path, records the build's source root, commit and remote beside each DWARF file and in
the build record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import git_builds
from support.fixtures import FIXTURES
from support.processes import run_cli

from dsymfind.stores import layouts
from dsymfind.vcs import provenance

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def ci_clone(tmp_path: Path) -> tuple[Path, str]:
    """A CI runner's clone of a fresh origin, and the commit it has checked out."""
    ci = git_builds.clone(git_builds.origin(tmp_path), tmp_path / "runner" / "work" / "app")
    return ci, git_builds.git(ci, "rev-parse", "HEAD")


def published_meta(store: Path, uuid: str) -> dict[str, object]:
    key = layouts.debug_file_key(layouts.UNIFIED, uuid)
    meta: dict[str, object] = json.loads((store / key).with_name("meta").read_bytes())
    return meta


def record_of(store: Path) -> dict[str, object]:
    (record,) = (store / "_builds").iterdir()
    document: dict[str, object] = json.loads(record.read_bytes())
    return document


def test_publish_records_the_build_root_commit_and_remote(tmp_path: Path) -> None:
    ci, commit = ci_clone(tmp_path)
    built = git_builds.build(ci)
    store = tmp_path / "store"
    done = run_cli("publish", "--to", str(store), str(built.dsym), cwd=ci)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    record = {
        "root": str(ci),
        "commit": commit,
        "remote": str(tmp_path / "origin.git"),
        "path": "",
        "dirty": False,
    }
    assert published_meta(store, built.uuid)["source"] == record
    assert record_of(store)["sources"] == [{"uuid": built.uuid, **record}]


def test_changes_to_tracked_files_are_flagged_and_said(tmp_path: Path) -> None:
    ci, _ = ci_clone(tmp_path)
    built = git_builds.build(ci)
    (ci / "Sources" / "main.c").write_text("/* edited after the commit */\n")
    store = tmp_path / "store"
    done = run_cli("publish", "--to", str(store), str(built.dsym), cwd=ci)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.startswith("dsymfind: warning: ")
    assert "changes to tracked files" in done.stderr
    source = published_meta(store, built.uuid)["source"]
    assert isinstance(source, dict) and source["dirty"] is True


def test_a_remotes_credentials_are_never_recorded(tmp_path: Path) -> None:
    ci, _ = ci_clone(tmp_path)
    git_builds.git(
        ci,
        "remote",
        "set-url",
        "origin",
        "https://x-access-token:s3cret@git.example.com/team/app.git",
    )
    built = git_builds.build(ci)
    store = tmp_path / "store"
    assert run_cli("publish", "--to", str(store), str(built.dsym), cwd=ci).returncode == 0
    source = published_meta(store, built.uuid)["source"]
    assert isinstance(source, dict)
    assert source["remote"] == "https://git.example.com/team/app.git"
    assert "s3cret" not in "".join(
        p.read_text(errors="replace") for p in store.rglob("*") if p.is_file()
    )


def test_dwarf_paths_outside_the_repository_record_nothing(tmp_path: Path) -> None:
    """The committed fixtures were built with relative paths: no root lies below the clone."""
    ci, _ = ci_clone(tmp_path)
    store = tmp_path / "store"
    done = run_cli("publish", "--to", str(store), str(FIXTURES / "hello.dSYM"), cwd=ci)
    assert done.returncode == 0, done.stdout + done.stderr
    metas = [json.loads(p.read_bytes()) for p in store.rglob("meta")]
    assert metas and all("source" not in m for m in metas)
    assert record_of(store)["sources"] == []


def test_source_root_names_the_root_and_its_place_in_the_repository(tmp_path: Path) -> None:
    ci, commit = ci_clone(tmp_path)
    built = git_builds.build(ci)
    store = tmp_path / "store"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli("publish", "--to", str(store), "--source-root", str(ci / "Sources"),
                   str(built.dsym), cwd=elsewhere)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    source = published_meta(store, built.uuid)["source"]
    assert isinstance(source, dict)
    assert (source["root"], source["path"], source["commit"]) == (
        str(ci / "Sources"),
        "Sources",
        commit,
    )


def test_publish_outside_a_repository_records_nothing_and_says_nothing(tmp_path: Path) -> None:
    built = git_builds.build(git_builds.clone(git_builds.origin(tmp_path), tmp_path / "ci"))
    store = tmp_path / "store"
    outside = tmp_path / "outside"
    outside.mkdir()
    done = run_cli("publish", "--to", str(store), str(built.dsym), cwd=outside)
    assert done.returncode == 0 and done.stderr == ""
    assert "source" not in published_meta(store, built.uuid)


GOOD = {
    "root": "/ci/app",
    "commit": COMMIT,
    "remote": "https://h/o/app",
    "path": "",
    "dirty": False,
}


@pytest.mark.parametrize(
    "change",
    [
        {"root": "ci/app"},
        {"root": "/ci/../etc"},
        {"root": "/ci/app\n"},
        {"commit": COMMIT[:12]},
        {"commit": COMMIT.upper()},
        {"commit": "--upload-pack=touch /tmp/x"},
        {"path": "../x"},
        {"path": "/abs"},
        {"dirty": "no"},
        {"remote": 7},
    ],
)
def test_a_record_read_back_must_be_plain(change: dict[str, object]) -> None:
    assert provenance.checked(GOOD) is not None
    assert provenance.checked({**GOOD, **change}) is None


def test_metadata_that_is_no_record_reads_as_none() -> None:
    assert provenance.from_meta(b"not json") is None
    assert provenance.from_meta(b"[1]") is None
    assert provenance.from_meta(json.dumps({"source": GOOD}).encode()) == provenance.checked(GOOD)
