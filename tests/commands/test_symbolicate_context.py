"""`dsymfind symbolicate --source-context N`, for real: a C program built by absolute paths
under a git clone (support/git_builds.py), a report of a crash on a known line of it, and
its source read from a folder `--source-map` names or from the checkout of the build's
commit that `dsymfind sources` made; never from a path leading out of them."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import git_builds
from support import symbol_server as ss
from support.fixtures import toml_list, write_config
from support.processes import run_cli
from support.symbolication import crash_report, instructions, symbolicate, symbolizer

from dsymfind.symbolicate import context

# What helper.c holds around its line 3, as built (git_builds.HELPER_AS_BUILT).
AS_BUILT = ["/* helper.c */", "int helper(int value) {", "    return value * 3; /* as built */"]


@dataclass
class Built:
    ci: Path  # the clone CI built in: the DWARF names its files under it
    uuid: str
    offset: int  # a pc in helper() at helper.c:3
    dsyms: Path  # a search path holding the dSYM


def _built(tmp_path: Path) -> tuple[Path, git_builds.Build]:
    origin = git_builds.origin(tmp_path)
    ci = git_builds.clone(origin, tmp_path / "runner" / "work" / "app")
    return ci, git_builds.build(ci)


def _helper_line_offset(build: git_builds.Build) -> int:
    """An instruction of helper() that llvm-symbolizer places at helper.c:3."""
    addresses = [address for address, _, _ in instructions(build.executable, "arm64")]
    dwarf = next((build.dsym / "Contents" / "Resources" / "DWARF").iterdir())
    for address, frames in zip(addresses, symbolizer(dwarf, "arm64", addresses), strict=True):
        innermost = frames[0]
        if innermost["FunctionName"] == "helper" and innermost["Line"] == 3:
            return address - 0x100000000
    raise AssertionError("no instruction at helper.c:3")


@pytest.fixture
def built(tmp_path: Path, config_file: Path) -> Built:
    ci, build = _built(tmp_path)
    dsyms = tmp_path / "dsyms"
    dsyms.mkdir()
    shutil.copytree(build.dsym, dsyms / build.dsym.name)
    write_config(config_file, f"search_paths = {toml_list([dsyms])}\n")
    return Built(ci, build.uuid, _helper_line_offset(build), dsyms)


def _report(tmp_path: Path, built: Built) -> Path:
    path = tmp_path / "app.crash"
    path.write_text(crash_report(built.uuid, "arm64", [built.offset]))
    return path


def _mine(tmp_path: Path, built: Built) -> Path:
    """The user's own copy of the sources, elsewhere: what --source-map points at."""
    mine = tmp_path / "mine"
    shutil.copytree(built.ci / "Sources", mine / "Sources")
    return mine


def test_source_map_gives_the_lines_around_the_frame_below_it(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _mine(tmp_path, built)
    shutil.rmtree(built.ci)  # gone, as a CI runner's folder is
    report = _report(tmp_path, built)
    status, out, _ = symbolicate(
        "--source-context", "2", "--source-map", f"{built.ci}={mine}", str(report), capsys=capsys
    )
    assert status == 0
    lines = out.splitlines()
    at = next(n for n, line in enumerate(lines) if "(helper.c:3)" in line)
    assert lines[at].startswith("0   crashy")
    assert lines[at + 1 : at + 5] == [
        "     | 1  /* helper.c */",
        "     | 2  int helper(int value) {",
        "    -> 3      return value * 3; /* as built */",
        "     | 4  }",
    ]
    assert lines[at + 5] == ""  # the thread's block ends as it did

    # The written report reads back with the same frames: no context line is a frame.
    again = tmp_path / "again.crash"
    again.write_text(out)
    status, reread, _ = symbolicate("--format", "json", str(again), capsys=capsys)
    frames = json.loads(reread)["threads"][0]["frames"]
    assert [(f["symbol"], f["line"]) for f in frames] == [("helper", 3)]


def test_the_text_form_carries_the_context_below_the_frame(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _mine(tmp_path, built)
    report = _report(tmp_path, built)
    status, out, _ = symbolicate(
        "--format", "text", "--source-context", "1", "--source-map", f"{built.ci}={mine}",
        str(report), capsys=capsys,
    )  # fmt: skip
    assert status == 0
    lines = out.splitlines()
    at = next(n for n, line in enumerate(lines) if "(helper.c:3)" in line)
    assert lines[at + 1 : at + 4] == [
        "     | 2  int helper(int value) {",
        "    -> 3      return value * 3; /* as built */",
        "     | 4  }",
    ]


def test_json_frames_gain_their_context(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _mine(tmp_path, built)
    report = _report(tmp_path, built)
    argv = ["--format", "json", "--source-context", "5", "--source-map", f"{built.ci}={mine}"]
    status, out, _ = symbolicate(*argv, str(report), capsys=capsys)
    assert status == 0
    (frame,) = json.loads(out)["threads"][0]["frames"]
    assert frame["context"] == {"first": 1, "lines": [*AS_BUILT, "}"]}


def test_nothing_is_added_when_no_folder_is_mapped(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(tmp_path, built)
    status, plain, _ = symbolicate(str(report), capsys=capsys)
    assert status == 0
    # The build's own folder still exists: it is not read without a mapping.
    status, out, _ = symbolicate("--source-context", "3", str(report), capsys=capsys)
    assert status == 0 and out == plain
    status, out, _ = symbolicate(
        "--format", "json", "--source-context", "3", str(report), capsys=capsys
    )
    assert "context" not in json.loads(out)["threads"][0]["frames"][0]


def test_a_symlink_out_of_the_mapped_root_is_not_followed(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _mine(tmp_path, built)
    secret = tmp_path / "secret.c"
    secret.write_text("SECRET 1\nSECRET 2\nSECRET 3\n")
    (mine / "Sources" / "helper.c").unlink()
    (mine / "Sources" / "helper.c").symlink_to(secret)
    report = _report(tmp_path, built)
    status, out, _ = symbolicate(
        "--source-context", "2", "--source-map", f"{built.ci}={mine}", str(report), capsys=capsys
    )
    assert status == 0 and "(helper.c:3)" in out
    assert "SECRET" not in out and "->" not in out


def test_a_fifo_is_not_read_nor_waited_on(tmp_path: Path, built: Built) -> None:
    mine = _mine(tmp_path, built)
    (mine / "Sources" / "helper.c").unlink()
    os.mkfifo(mine / "Sources" / "helper.c")
    report = _report(tmp_path, built)
    done = run_cli(
        "symbolicate", "--source-context", "2", "--source-map", f"{built.ci}={mine}", str(report)
    )  # a blocking open would never return: run_cli's timeout fails the test
    assert done.returncode == 0, done.stderr
    assert "(helper.c:3)" in done.stdout and "->" not in done.stdout


def test_bad_options_are_one_error_line(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    report = str(_report(tmp_path, built))
    cases = [
        (["--source-map", "/a=/b"], "--source-map goes with --source-context N"),
        (["--source-context", "2", "--source-map", "/a"], "--source-map takes BUILD=LOCAL"),
        (["--source-context", "-1"], "--source-context takes a number of lines"),
    ]
    for argv, said in cases:
        status, _, err = symbolicate(*argv, report, capsys=capsys)
        assert status == 1 and said in err, err


def test_a_larger_count_is_capped(
    tmp_path: Path, built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _mine(tmp_path, built)
    helper = mine / "Sources" / "helper.c"
    padding = "".join(f"// {n}\n" for n in range(200))
    helper.write_text(padding + helper.read_text() + padding)
    argv = ["--format", "json", "--source-context", "1000", "--source-map", f"{built.ci}={mine}"]
    # The line numbers are the DWARF's: line 3 is now a comment, 50 either side of it shown.
    status, out, _ = symbolicate(*argv, str(_report(tmp_path, built)), capsys=capsys)
    assert status == 0
    shown = json.loads(out)["threads"][0]["frames"][0]["context"]
    assert shown["first"] == 1 and len(shown["lines"]) == 3 + context.MAX_CONTEXT


def test_context_from_the_checkout_dsymfind_sources_made(
    tmp_path: Path, config_file: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Published from CI, fetched, then checked out by `dsymfind sources` once the clone is
    configured: the lines are the build commit's, not those of the developer's clone, which
    is a commit ahead."""
    ci, build = _built(tmp_path)
    offset = _helper_line_offset(build)
    done = run_cli("publish", "--to", str(tmp_path / "store"), str(build.dsym), cwd=ci)
    assert done.returncode == 0, done.stdout + done.stderr
    commit = git_builds.git(ci, "rev-parse", "HEAD")
    developer = git_builds.clone(tmp_path / "origin.git", tmp_path / "home" / "src" / "app")
    git_builds.commit_files(developer, {"Sources/helper.c": git_builds.HELPER_AHEAD}, "ahead")
    shutil.rmtree(ci)
    report = tmp_path / "app.crash"
    report.write_text(crash_report(build.uuid, "arm64", [offset]))
    with ss.SymbolServer(tmp_path / "store") as server:
        servers = f"[[servers]]\nurl = '{server.url}/'\nlayout = 'unified'\n"
        write_config(config_file, "timeout = 30\n" + servers)
        fetched = run_cli("fetch", build.uuid, timeout=120)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    # Not mapped yet: nothing to read.
    status, out, _ = symbolicate("--offline", "--source-context", "1", str(report), capsys=capsys)
    assert status == 0 and "->" not in out

    clones = f"source_checkouts = {toml_list([developer])}\n"
    write_config(config_file, "timeout = 30\n" + clones)
    shown = run_cli("sources", build.uuid, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    worktree = cache_dir / "sources" / f"origin-{commit[:12]}"
    assert f"source: {worktree}" in shown.stdout

    status, out, _ = symbolicate("--offline", "--source-context", "1", str(report), capsys=capsys)
    assert status == 0
    assert "    -> 3      return value * 3; /* as built */" in out.splitlines()
    assert "ahead" not in out


def test_a_plist_mapping_is_trusted_only_into_a_configured_clone(
    tmp_path: Path, built: Built, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any bundle may carry a per-UUID plist naming a folder: its mapping is read only when
    that folder is one of the cache's checkouts or inside a `source_checkouts` clone."""
    mine = _mine(tmp_path, built)
    resources = built.dsyms / "App.dSYM" / "Contents" / "Resources"
    mapping = {"DBGBuildSourcePath": str(built.ci), "DBGSourcePath": str(mine)}
    (resources / f"{built.uuid}.plist").write_bytes(plistlib.dumps(mapping))
    report = _report(tmp_path, built)
    status, out, _ = symbolicate("--source-context", "1", str(report), capsys=capsys)
    assert status == 0 and "(helper.c:3)" in out and "->" not in out

    searched = f"search_paths = {toml_list([built.dsyms])}\n"
    write_config(config_file, searched + f"source_checkouts = {toml_list([mine])}\n")
    status, out, _ = symbolicate("--source-context", "1", str(report), capsys=capsys)
    assert status == 0
    assert "    -> 3      return value * 3; /* as built */" in out.splitlines()
