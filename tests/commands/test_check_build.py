"""`dsymfind check-build`, and publish's completeness check (`--require-complete`,
`--xcode`), on a real build (support/products.py) against a folder store and a real S3
engine (SeaweedFS)."""

from __future__ import annotations

import json
import shutil
import uuid as uuids
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import products as built_products
from support.processes import run_cli
from support.products import Built, copy_of
from support.s3_publish import keys_env
from support.seaweed import REGION, SYMBOLS, SeaweedS3

from dsymfind import main as cli
from dsymfind.stores.s3 import upload as s3_target

SHIPPED = ("App", "App.debug.dylib", "Kit", "Vendor", "libloose.dylib", "Widget")


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return built_products.built(tmp_path_factory.mktemp("products"))


def statuses(images: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {(image["name"], image["arch"]): image["status"] for image in images}


def checked(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict[str, Any]]:
    status = cli.main(["check-build", "--json", *map(str, args)])
    return status, json.loads(capsys.readouterr().out)


def test_an_archive_with_a_vendor_framework_is_incomplete(
    build: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = checked(capsys, build.archive)
    assert status == 1
    assert report["complete"] is False
    assert statuses(report["images"]) == {
        ("App", "arm64"): "stub",
        ("App.debug.dylib", "arm64"): "inputs",
        ("Kit", "arm64"): "inputs",
        ("Kit", "x86_64"): "inputs",
        ("Vendor", "arm64"): "missing",
        ("libloose.dylib", "arm64"): "inputs",
        ("Widget", "arm64"): "inputs",
    }
    by_name = {(i["name"], i["arch"]): i for i in report["images"]}
    vendor = by_name["Vendor", "arm64"]
    assert vendor == {
        "path": "Products/Applications/App.app/Frameworks/Vendor.framework/Vendor",
        "name": "Vendor",
        "uuid": build.uuid("Vendor"),
        "arch": "arm64",
        "status": "missing",
        "reason": "vendor binary shipped without a dSYM: no Vendor dSYM among the inputs",
    }
    assert "App.debug.dylib" in by_name["App", "arm64"]["reason"]
    assert by_name["Kit", "x86_64"]["reason"] == (
        "dSYMs/Kit.framework.dSYM/Contents/Resources/DWARF/Kit"
    )
    assert {i["uuid"] for i in report["images"]} == {
        u for name in SHIPPED for u in build.uuids[name].values()
    }


def test_the_text_is_a_line_per_image_and_a_summary(
    build: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["check-build", str(build.app)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8
    assert lines[4] == (
        f"Frameworks/Vendor.framework/Vendor  {build.uuid('Vendor')}  arm64  missing  "
        "vendor binary shipped without a dSYM: no Vendor dSYM among the inputs"
    )
    assert lines[-1] == (
        "INCOMPLETE: 7 images: 5 in the inputs, 0 in the store, 1 stubs, 1 missing"
    )


def test_a_stale_dsym_is_named_with_its_own_uuid(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of(build.build, tmp_path / "build")
    shutil.rmtree(folder / "Kit.framework.dSYM")
    shutil.copytree(build.stale_kit, folder / "Kit.framework.dSYM")
    status, report = checked(capsys, folder)
    assert status == 1
    kit = {i["arch"]: i for i in report["images"] if i["name"] == "Kit"}
    for arch in ("arm64", "x86_64"):
        assert kit[arch]["status"] == "missing"
        assert kit[arch]["reason"] == (
            f"stale dSYM: the Kit dSYM given is for {build.uuids['stale Kit'][arch]}, "
            "another build's"
        )


def test_an_ipa_with_its_dsyms_given_is_complete_but_for_the_vendor(
    build: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    status, report = checked(capsys, build.ipa, *build.dsyms.values())
    assert status == 1
    missing = [i["name"] for i in report["images"] if i["status"] == "missing"]
    assert missing == ["Vendor"]


def test_nothing_missing_exits_0(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    shutil.rmtree(app / "Frameworks/Vendor.framework")
    status, report = checked(capsys, app, *build.dsyms.values())
    assert status == 0
    assert report["complete"] is True
    assert len(report["images"]) == 6


def test_a_folder_store_holds_what_the_inputs_lack(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    vendor_only = tmp_path / "vendor"
    assert cli.main(["publish", "--to", str(store), str(build.archive / "dSYMs")]) == 0
    capsys.readouterr()
    status, report = checked(capsys, build.ipa, "--store", store)
    assert status == 1
    assert statuses(report["images"]) == {
        ("App", "arm64"): "stub",
        ("App.debug.dylib", "arm64"): "store",
        ("Kit", "arm64"): "store",
        ("Kit", "x86_64"): "store",
        ("Vendor", "arm64"): "missing",
        ("libloose.dylib", "arm64"): "store",
        ("Widget", "arm64"): "store",
    }
    vendor = next(i for i in report["images"] if i["name"] == "Vendor")
    assert vendor["reason"].endswith("no Vendor dSYM among the inputs or in the store")
    kit = next(i for i in report["images"] if i["name"] == "Kit")
    assert kit["reason"].startswith(str(store))
    assert not vendor_only.exists()


def test_bad_input_is_a_line_each_and_never_a_traceback(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    (app / "Frameworks/Vendor.framework/Vendor").write_text("#!/bin/sh\n")
    loose = app / "Frameworks/libloose.dylib"
    loose.write_bytes(loose.read_bytes()[:600])
    (app / "Frameworks/a").symlink_to("b")
    (app / "Frameworks/b").symlink_to("a")
    done = run_cli("check-build", str(app))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = done.stderr.splitlines()
    assert len(errors) == 4, errors
    assert all(line.startswith("dsymfind: App.app: Frameworks/") for line in errors)
    assert done.stdout.splitlines()[-1].endswith("; 4 not readable")
    missing = run_cli("check-build", str(tmp_path / "nowhere.app"))
    assert missing.returncode == 1
    assert (
        missing.stderr == f"dsymfind: error: {tmp_path / 'nowhere.app'}: no such file or folder\n"
    )


# --- S3 -----------------------------------------------------------------------------------


class Requests:
    """Every request the writer's boto3 client sends, by operation (in-process)."""

    def __init__(self) -> None:
        self.operations: dict[str, int] = {}

    def __call__(self, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            self.operations[model.name] = self.operations.get(model.name, 0) + 1


@pytest.fixture
def counted(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[Requests]:
    for name, value in keys_env(s3, "ci").items():
        monkeypatch.setenv(name, value)
    requests = Requests()
    real = s3_target.make_client

    def make_client(options: s3_target.S3Options) -> Any:
        client = real(options)
        client.meta.events.register("before-call.s3", requests)
        return client

    monkeypatch.setattr(s3_target, "make_client", make_client)
    yield requests


def s3_flags(s3: SeaweedS3) -> list[str]:
    return ["--endpoint-url", s3.endpoint_url, "--region", REGION]


def test_an_s3_store_one_head_per_uuid_not_in_the_inputs(
    build: Built, s3: SeaweedS3, counted: Requests, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"s3://{SYMBOLS}/check-{uuids.uuid4().hex[:12]}"
    kit = build.dsyms["Kit"]
    assert cli.main(["publish", "--to", store, *s3_flags(s3), str(kit)]) == 0
    capsys.readouterr()
    counted.operations.clear()
    status, report = checked(capsys, build.ipa, "--store", store, *s3_flags(s3))
    assert status == 1
    got = statuses(report["images"])
    assert got["Kit", "arm64"] == got["Kit", "x86_64"] == "store"
    assert [n for (n, _), s in got.items() if s == "missing"] == [
        "App.debug.dylib",
        "Vendor",
        "libloose.dylib",
        "Widget",
    ]
    kit_image = next(i for i in report["images"] if i["name"] == "Kit")
    assert kit_image["reason"].startswith(store + "/")
    # Six UUIDs need a dSYM (the stub needs none): six HEADs, and the one listing that
    # opening a store makes (it tells a refused key from an absent object): seven requests
    # for seven UUIDs.
    assert counted.operations == {"HeadObject": 6, "ListObjectsV2": 1}


def test_publish_to_s3_names_the_missing_and_require_complete_fails(
    build: Built, s3: SeaweedS3, counted: Requests, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"s3://{SYMBOLS}/gate-{uuids.uuid4().hex[:12]}"
    args = ["publish", "--to", store, *s3_flags(s3), str(build.archive)]
    assert cli.main([*args, "--require-complete"]) == 1
    out = capsys.readouterr().out.splitlines()
    summary = next(n for n, line in enumerate(out) if line.startswith("summary: "))
    assert out[summary].startswith("summary: 5 published")
    assert out[summary + 1].startswith(
        "missing dSYM: Products/Applications/App.app/Frameworks/Vendor.framework/Vendor  "
    )
    assert out[-1] == "INCOMPLETE: 7 images: 5 in the inputs, 0 in the store, 1 stubs, 1 missing"
    assert cli.main(args) == 0
    assert "missing dSYM: " in capsys.readouterr().out


# --- publish ------------------------------------------------------------------------------


def test_publish_prints_the_missing_after_its_summary(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert cli.main(["publish", "--to", str(store), str(build.archive)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3].startswith("summary: 5 published")
    assert out[-2] == (
        "missing dSYM: Products/Applications/App.app/Frameworks/Vendor.framework/Vendor  "
        f"{build.uuid('Vendor')}  arm64  missing  vendor binary shipped without a dSYM: "
        "no Vendor dSYM among the inputs or in the store"
    )
    assert out[-1].startswith("INCOMPLETE: ")


def test_require_complete_fails_after_publishing_everything_it_could(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert cli.main(["publish", "--require-complete", "--to", str(store), str(build.archive)]) == 1
    assert "summary: 5 published" in capsys.readouterr().out
    assert cli.main(["publish", "--require-complete", "--to", str(store), str(build.archive)]) == 1
    capsys.readouterr()


def test_require_complete_passes_once_the_store_has_the_rest(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    app = copy_of(build.app, tmp_path / "App.app")
    shutil.rmtree(app / "Frameworks/Vendor.framework")
    assert cli.main(["publish", "--to", str(store), str(build.dsyms["Kit"])]) == 0
    capsys.readouterr()
    others = [str(build.dsyms[name]) for name in ("App.debug.dylib", "libloose.dylib", "Widget")]
    assert cli.main(["publish", "--require-complete", "--to", str(store), str(app), *others]) == 0
    out = capsys.readouterr().out
    assert "missing" not in out
    assert "INCOMPLETE" not in out


def test_publish_of_dsyms_alone_checks_nothing(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    args = ["publish", "--require-complete", "--to", str(store), str(build.dsyms["Kit"])]
    assert cli.main(args) == 0
    assert "missing" not in capsys.readouterr().out


def test_publish_json_keeps_stdout_json(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert cli.main(["publish", "--json", "--to", str(store), str(build.archive)]) == 0
    captured = capsys.readouterr()
    assert isinstance(json.loads(captured.out), list)
    assert "missing dSYM: " in captured.err


# --- publish --xcode ------------------------------------------------------------------------


def xcode_env(build: Built, monkeypatch: pytest.MonkeyPatch, dsym: str = "App.app.dSYM") -> None:
    monkeypatch.setenv("DWARF_DSYM_FOLDER_PATH", str(build.build))
    monkeypatch.setenv("DWARF_DSYM_FILE_NAME", dsym)
    monkeypatch.setenv("TARGET_BUILD_DIR", str(build.build))
    monkeypatch.setenv("WRAPPER_NAME", "App.app")
    monkeypatch.setenv("INFOPLIST_PATH", "App.app/Info.plist")


def test_xcode_publishes_the_dsym_its_settings_name_and_warns(
    build: Built,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    xcode_env(build, monkeypatch)
    store = tmp_path / "store"
    assert cli.main(["publish", "--xcode", "--to", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"App.app.dSYM {build.uuid('App.debug.dylib')} arm64: published" in out
    assert not any("Kit.framework.dSYM" in line and "published" in line for line in out)
    warned = [line for line in out if line.startswith("warning: missing dSYM: ")]
    # The app's other dSYMs lie beside it (inputs of the check, published by their targets).
    assert [line.split("  ")[0] for line in warned] == [
        "warning: missing dSYM: Frameworks/Vendor.framework/Vendor"
    ]
    assert (
        out[-1]
        == "warning: INCOMPLETE: 7 images: 5 in the inputs, 0 in the store, 1 stubs, 1 missing"
    )
    assert cli.main(["publish", "--xcode", "--require-complete", "--to", str(store)]) == 1
    errors = capsys.readouterr().out
    assert "error: missing dSYM: Frameworks/Vendor.framework/Vendor" in errors


def test_xcode_never_fails_the_build(
    build: Built,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    xcode_env(build, monkeypatch, dsym="Nothing.app.dSYM")
    store = tmp_path / "store"
    assert cli.main(["publish", "--xcode", "--to", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"warning: dsymfind: no dSYM at {build.build / 'Nothing.app.dSYM'}")
    for name in ("DWARF_DSYM_FOLDER_PATH", "TARGET_BUILD_DIR"):
        monkeypatch.delenv(name)
    assert cli.main(["publish", "--xcode", "--to", str(store)]) == 0
    assert "warning: dsymfind: DWARF_DSYM_FOLDER_PATH" in capsys.readouterr().out
    xcode_env(build, monkeypatch)
    unwritable = tmp_path / "file"
    unwritable.write_text("")
    assert cli.main(["publish", "--xcode", "--to", str(unwritable / "store")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("warning: dsymfind publish")
    assert cli.main(["publish", "--xcode", "--require-complete", "--to", str(store)]) == 1
    capsys.readouterr()


def test_publish_of_an_ipa_checks_it_and_publishes_the_dsyms_beside(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    args = ["publish", "--to", str(store), str(build.ipa), str(build.archive / "dSYMs")]
    assert cli.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3].startswith("summary: 5 published, 0 exists, 0 skipped, 0 refused")
    assert out[-2].startswith("missing dSYM: Payload/App.app/Frameworks/Vendor.framework/Vendor  ")


def test_lone_files_a_dwarf_file_counts_and_others_are_named(
    build: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    kit = build.app / "Frameworks/Kit.framework/Kit"
    dwarf = build.dsyms["Kit"] / "Contents/Resources/DWARF/Kit"
    status, report = checked(capsys, kit, dwarf)
    assert status == 0
    assert statuses(report["images"]) == {("Kit", "arm64"): "inputs", ("Kit", "x86_64"): "inputs"}
    assert cli.main(["check-build", str(text)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "dsymfind: notes.txt: not an .xcarchive, .app, .ipa, folder, .dSYM or Mach-O file\n"
    )
