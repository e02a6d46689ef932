"""What a build record says of the app and the CI run (publish/build_record.py): read from an
`.xcarchive`, an `.app` or a dSYM bundle's Info.plist, and from each CI system's variables."""

from __future__ import annotations

import plistlib
import shutil
from pathlib import Path

import pytest
from support.archives import write_plist, xcarchive
from support.fixtures import FIXTURES

from dsymfind.publish import build_record
from dsymfind.publish.build_record import AppInfo
from dsymfind.publish.inputs import Collector
from dsymfind.stores import builds


def info_of(tmp_path: Path, *paths: Path) -> AppInfo:
    collector = Collector(str(tmp_path / "work"), executables=False, max_unpacked_bytes=1 << 30)
    (tmp_path / "work").mkdir(exist_ok=True)
    for path in paths:
        collector.add(str(path))
    return build_record.app_info([str(p) for p in paths], collector.found.pieces)


def test_an_archive_says_the_app_its_id_version_and_build(tmp_path: Path) -> None:
    archive = xcarchive(tmp_path)

    assert info_of(tmp_path, archive) == AppInfo("MyApp", "com.example.myapp", "2.3", "812")


def test_an_app_says_it_when_no_archive_does(tmp_path: Path) -> None:
    app = tmp_path / "Other.app"
    write_plist(
        app / "Info.plist",
        {
            "CFBundleName": "Other",
            "CFBundleIdentifier": "com.example.other",
            "CFBundleShortVersionString": "1.4",
            "CFBundleVersion": "77",
        },
    )
    dsym = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "Other.app.dSYM")

    assert info_of(tmp_path, dsym, app) == AppInfo("Other", "com.example.other", "1.4", "77")


def test_a_dsym_says_it_the_apps_before_a_frameworks(tmp_path: Path) -> None:
    build = tmp_path / "build"
    shutil.copytree(FIXTURES / "libgreet.dylib.dSYM", build / "Greet.framework.dSYM")
    shutil.copytree(FIXTURES / "hello.dSYM", build / "Hello.app.dSYM")
    plist = build / "Hello.app.dSYM" / "Contents" / "Info.plist"
    info = plistlib.loads(plist.read_bytes())
    write_plist(plist, {**info, "CFBundleShortVersionString": "3.0", "CFBundleVersion": "5"})

    assert info_of(tmp_path, build) == AppInfo("Hello", "hello", "3.0", "5")


def test_unreadable_plists_say_nothing(tmp_path: Path) -> None:
    archive = xcarchive(tmp_path)
    (archive / "Info.plist").write_bytes(b"<plist><dict><key>x</key>")
    for dsym in (archive / "dSYMs").iterdir():
        (dsym / "Contents" / "Info.plist").write_bytes(b"\0" * 10)

    assert info_of(tmp_path, archive) == AppInfo()


@pytest.mark.parametrize(
    ("env", "run"),
    [
        (
            {
                "GITHUB_ACTIONS": "true",
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_REPOSITORY": "example/app",
                "GITHUB_RUN_ID": "4242",
            },
            builds.CIRun("github", "4242", "https://github.com/example/app/actions/runs/4242"),
        ),
        (
            {
                "GITLAB_CI": "true",
                "CI_JOB_ID": "77",
                "CI_JOB_URL": "https://gitlab.example.com/app/-/jobs/77",
                "CI_PIPELINE_URL": "https://gitlab.example.com/app/-/pipelines/5",
            },
            builds.CIRun("gitlab", "77", "https://gitlab.example.com/app/-/jobs/77"),
        ),
        (
            {"CI": "TRUE", "CI_BUILD_ID": "a1b2-c3", "CI_BUILD_NUMBER": "12"},
            builds.CIRun("xcode-cloud", "12 (a1b2-c3)", None),
        ),
        (
            {"BUILD_URL": "https://jenkins.example.com/job/app/9/", "BUILD_NUMBER": "9"},
            builds.CIRun("jenkins", "9", "https://jenkins.example.com/job/app/9/"),
        ),
        (
            {
                "BUILDKITE_BUILD_URL": "https://buildkite.com/example/app/builds/3",
                "BUILDKITE_BUILD_NUMBER": "3",
            },
            builds.CIRun("buildkite", "3", "https://buildkite.com/example/app/builds/3"),
        ),
        (
            {"CIRCLE_BUILD_URL": "https://circleci.com/gh/example/app/8", "CIRCLE_BUILD_NUM": "8"},
            builds.CIRun("circleci", "8", "https://circleci.com/gh/example/app/8"),
        ),
        ({"HOME": "/home/me"}, None),
    ],
)
def test_the_ci_run_comes_from_its_systems_variables(
    env: dict[str, str], run: builds.CIRun | None
) -> None:
    assert build_record.ci_run(env) == run
