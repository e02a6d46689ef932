"""Build records of kind `system` (`publish --system`) beside an app's, in a folder store:
`builds` shows and filters the kind, `builds show` the install paths, `why` says an
Apple image's symbol table is published, `retire --keep-last` keeps an OS's builds apart
from an app of the same name; records written before kinds existed read as an app's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support
from support.fixtures import FIXTURES

from dsymfind import main as cli
from dsymfind.stores import builds

ONE = (("/System/Library/Frameworks/Foundation.framework/Foundation", ("arm64",)),)


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> list[DeviceSupportTree]:
    parent = tmp_path_factory.mktemp("devicesupport")
    return [
        build_device_support(parent, version="17.5.1", build="21F90", libraries=ONE),
        build_device_support(parent, version="17.6", build="21G80", libraries=ONE),
    ]


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main([*map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def store(
    trees: list[DeviceSupportTree], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Path:
    """An app build, then iOS 17.5.1 and 17.6 as one run."""
    store = tmp_path / "store"
    app = ["--app-version", "2.3", "--build-number", "812", "--build-id", "app-812"]
    assert run(capsys, "publish", "--to", store, *app, FIXTURES / "hello.dSYM")[0] == 0
    assert run(capsys, "publish", "--system", "--to", store, trees[0].root)[0] == 0
    return store


def test_builds_shows_each_kind_and_filters_by_it(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "builds", "--store", store)

    assert code == 0 and err == ""
    kinds = sorted(line.split()[:4] for line in out.splitlines())
    assert kinds == [
        ["17.5.1", "(21F90)", "iOS", "system"],
        ["17.6", "(21G80)", "iOS", "system"],
        ["2.3", "(812)", "hello", "app"],
    ]
    code, out, _ = run(capsys, "builds", "--store", store, "--kind", "app", "--json")
    assert code == 0 and [(b["id"], b["kind"]) for b in json.loads(out)] == [("app-812", "app")]
    code, out, _ = run(capsys, "builds", "--store", store, "--kind", "system")
    assert code == 0 and len(out.splitlines()) == 2 and "hello" not in out


def test_show_names_the_kind_and_each_images_install_path(
    store: Path, trees: list[DeviceSupportTree], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "builds", "show", "17.6 (21G80)", "--store", store)

    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "iOS 17.6 (21G80)  -" and "kind       system" in lines
    (image,) = [line for line in lines if line.startswith("  ")]
    uuid = trees[1].libraries[0].uuids["arm64"].replace("-", "")
    assert image.split()[:4] == ["Foundation", uuid, "arm64", "executable"]
    assert image.endswith("/System/Library/Frameworks/Foundation.framework/Foundation")

    code, out, _ = run(capsys, "builds", "show", "app-812", "--store", store)
    assert "kind       app" in out


def test_why_says_an_apple_images_symbol_table_is_published(
    store: Path, trees: list[DeviceSupportTree], capsys: pytest.CaptureFixture[str]
) -> None:
    uuid = trees[0].libraries[0].uuids["arm64"]

    code, out, _ = run(capsys, "why", uuid, "--store", store)

    assert code == 1  # no dSYM: Apple ships none
    head = out.splitlines()[0]
    assert head.startswith(f"{uuid} Foundation: absent — Apple's /System/Library/Frameworks/")
    assert "of iOS 17.5.1 (21F90): Apple ships no dSYM" in head
    assert "(publish --system)" in head


def test_keep_last_keeps_an_os_apart_from_its_builds_and_an_apps(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An app that happens to be called iOS is not one of the OS's builds."""
    named_ios = tmp_path / "iOS.dSYM"
    shutil.copytree(FIXTURES / "hello.dSYM", named_ios)
    assert run(capsys, "publish", "--to", store, "--build-id", "app-ios", named_ios)[0] == 0

    code, out, err = run(
        capsys, "retire", "--store", store, "--older-than", "0s", "--keep-last", "1"
    )

    assert code == 0, err
    (retired,) = out.splitlines()[:1]
    assert " iOS system (" in retired and retired.startswith("retired 17.")
    left = [builds.parse_summary(f"_builds/{p.name}") for p in (store / "_builds").iterdir()]
    assert sorted((s.kind, s.app) for s in left) == [
        ("app", "hello"),
        ("app", "iOS"),
        ("system", "iOS"),
    ]


def test_a_record_of_no_kind_is_an_apps_and_a_kind_unknown_is_refused(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (key,) = [p for p in (store / "_builds").iterdir() if ",app-812," in p.name]
    document = json.loads(key.read_bytes())
    del document["kind"]  # as records were written before publish --system
    assert builds.decode_record(json.dumps(document).encode(), key.name).kind == builds.APP
    document["kind"] = "firmware"
    with pytest.raises(builds.BadRecord, match="kind 'firmware' is not one of app, system"):
        builds.decode_record(json.dumps(document).encode(), key.name)
    summary = builds.parse_summary(f"_builds/{key.name}")
    assert summary.kind == builds.APP and not summary.key.endswith(",app.json")


def test_a_system_key_holding_an_apps_record_is_refused(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_key,) = [p for p in (store / "_builds").iterdir() if ",app-812," in p.name]
    forged = app_key.with_name(app_key.name.removesuffix(".json") + ",system.json")
    app_key.rename(forged)

    code, _, err = run(capsys, "builds", "show", "app-812", "--store", store)

    assert code == 1 and "holds a record of kind app" in err
