"""`dsymfind symbolicate` of batches: folders as inputs, `-o DIR` mirroring them, the
`--summary` file, progress on stderr, and each dSYM fetched (and SymCache opened) once."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import write_config
from support.served import url_path
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_UUIDS,
    crash_report,
    crashy_search_path,
    ips_report,
    symbolicate,
)

from dsymfind.symbolicate import batches, symcaches

ARM = CRASHY_UUIDS["arm64"]
X86 = CRASHY_UUIDS["x86_64"]
LEAF_CRASH = 0x338  # in crashy's arm64 slice: twice() inlined into leaf()
X86_CRASH = 0x379
GONE = "11111111-2222-3333-4444-555555555555"

run = symbolicate


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return crashy_search_path(tmp_path, config_file)


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def versioned_ips(uuid: str, arch: str, offsets: list[int]) -> str:
    header, body = ips_report(uuid, arch, offsets).split("\n", 1)
    metadata = json.loads(header)
    metadata.update(app_version="2.1", build_version="417")
    return json.dumps(metadata) + "\n" + body


def bare_ips() -> str:
    """A report with a frame in an image nobody has a dSYM for."""
    header, body = versioned_ips(ARM, "arm64", [LEAF_CRASH]).split("\n", 1)
    doc = json.loads(body)
    doc["usedImages"].append({"uuid": GONE, "name": "gone"})
    doc["threads"][0]["frames"].append({"imageOffset": 8, "imageIndex": 1})
    return header + "\n" + json.dumps(doc)


def crash_text() -> str:
    text = crash_report(ARM, "arm64", [LEAF_CRASH])
    return text.replace("Process:", "Version:             3.0 (77)\nProcess:", 1)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A folder of reports: nested, one not a report, one hidden file."""
    root = tmp_path / "reports"
    write(root / "a.ips", versioned_ips(ARM, "arm64", [LEAF_CRASH]))
    write(root / "ios" / "17" / "b.ips", bare_ips())
    write(root / "ios" / "c.crash", crash_text())
    write(root / "notes.txt", "not a crash report\n")
    write(root / ".DS_Store", "\0\0\0\1Bud1")
    return root


def test_a_folder_is_read_whole_and_mirrored_under_the_output(local_dsyms, tree, tmp_path, capsys):
    out = tmp_path / "out"
    status, stdout, err = run("--offline", "-o", str(out), str(tree), capsys=capsys)
    assert status == 1 and stdout == ""  # notes.txt is no report
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["a.ips", "ios/17/b.ips", "ios/c.crash"]
    assert "leaf + 16 (crashy.c:14)" in (out / "ios" / "c.crash").read_text()
    assert err.splitlines()[-1] == ("4 reports: 2 complete, 1 with frames left bare, 1 unreadable")
    assert err.count("dsymfind: error:") == 1 and "notes.txt" in err
    assert ".DS_Store" not in err


def test_json_outputs_mirror_with_their_suffix_and_files_and_folders_mix(
    local_dsyms, tree, tmp_path, capsys
):
    alone = write(tmp_path / "alone.ips", versioned_ips(ARM, "arm64", [LEAF_CRASH]))
    out = tmp_path / "out"
    run("--offline", "--format", "json", "-o", str(out), str(tree), alone, capsys=capsys)
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["a.ips.json", "alone.ips.json", "ios/17/b.ips.json", "ios/c.crash.json"]


def test_an_output_folder_inside_the_input_folder_is_not_read_again(local_dsyms, tree, capsys):
    out = tree / "symbolicated"
    run("--offline", "-o", str(out), str(tree), capsys=capsys)
    _, _, err = run("--offline", "-o", str(out), str(tree), capsys=capsys)
    assert err.splitlines()[-1].startswith("4 reports:")
    assert not (out / "symbolicated").exists()


def test_no_output_replaces_a_report_of_the_batch(local_dsyms, tmp_path, capsys):
    """`a.ips` written as JSON would be `a.ips.json`, which is itself an input."""
    folder = tmp_path / "in"
    first = write(folder / "a.ips", versioned_ips(ARM, "arm64", [LEAF_CRASH]))
    second = write(folder / "a.ips.json", versioned_ips(ARM, "arm64", [LEAF_CRASH]))
    kept = {path: Path(path).read_text() for path in (first, second)}
    status, _, err = run(
        "--offline", "--format", "json", "-o", str(folder), str(folder), capsys=capsys
    )
    assert status == 1
    assert {path: Path(path).read_text() for path in (first, second)} == kept
    assert "a.ips.json is a report of this batch" in err


def test_a_folder_needs_an_output_folder(local_dsyms, tree, capsys):
    status, _, err = run("--offline", str(tree), capsys=capsys)
    assert status == 1 and "needs -o DIR" in err


def test_the_summary_says_each_report_and_the_totals(local_dsyms, tree, tmp_path, capsys):
    out, summary = tmp_path / "out", tmp_path / "summary.json"
    run("--offline", "-o", str(out), "--summary", str(summary), str(tree), capsys=capsys)
    written = json.loads(summary.read_text())
    by_name = {Path(r["path"]).name: r for r in written["reports"]}
    assert set(by_name) == {"a.ips", "b.ips", "c.crash", "notes.txt"}
    assert by_name["a.ips"] == {
        "path": str(tree / "a.ips"),
        "app": "crashy",
        "version": "2.1",
        "build": "417",
        "status": "complete",
        "bare_images": [],
        "output": str(out / "a.ips"),
    }
    assert by_name["b.ips"]["status"] == "partial"
    assert by_name["b.ips"]["bare_images"] == [
        {"uuid": GONE, "name": "gone", "status": "missing", "verdict": "absent"}
    ]
    assert by_name["b.ips"]["output"] == str(out / "ios" / "17" / "b.ips")
    crash = by_name["c.crash"]
    assert (crash["app"], crash["version"], crash["build"]) == ("crashy", "3.0", "77")
    assert crash["status"] == "complete"
    assert by_name["notes.txt"] == {
        "path": str(tree / "notes.txt"),
        "app": None,
        "version": None,
        "build": None,
        "status": "unreadable",
        "bare_images": [],
        "output": None,
    }
    assert written["totals"] == {
        "reports": 4,
        "complete": 2,
        "partial": 1,
        "unreadable": 1,
        "unwritten": 0,
    }


def test_a_summary_that_cannot_be_written_is_status_1_and_one_line(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "a.ips", versioned_ips(ARM, "arm64", [LEAF_CRASH]))
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    blocked.chmod(0o500)
    # Root writes into a read-only folder, not into /proc.
    summary = Path("/proc/dsymfind-summary.json") if os.geteuid() == 0 else blocked / "s.json"
    try:
        status, _, err = run(
            "--offline",
            "-o",
            str(tmp_path / "out.ips"),
            "--summary",
            str(summary),
            report,
            capsys=capsys,
        )
    finally:
        blocked.chmod(0o700)
    assert status == 1
    errors = [line for line in err.splitlines() if line.startswith("dsymfind: error:")]
    assert len(errors) == 1
    assert errors[0].startswith(f"dsymfind: error: cannot write the summary to {summary}: ")
    assert (tmp_path / "out.ips").exists()  # the reports were still written


def test_a_summary_in_a_missing_folder_fails_before_any_work(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "a.ips", versioned_ips(ARM, "arm64", [LEAF_CRASH]))
    summary = tmp_path / "nowhere" / "summary.json"
    status, _, err = run(
        "--offline",
        "-o",
        str(tmp_path / "out.ips"),
        "--summary",
        str(summary),
        report,
        capsys=capsys,
    )
    assert status == 1 and err.count("\n") == 1 and "cannot write the summary" in err
    assert not (tmp_path / "out.ips").exists()


def test_a_long_batch_says_a_line_per_hundred_reports_in_a_log(local_dsyms, tmp_path, capsys):
    folder = tmp_path / "many"
    text = versioned_ips(ARM, "arm64", [LEAF_CRASH])
    for n in range(250):
        write(folder / f"r{n:03}.ips", text)
    status, _, err = run("--offline", "-o", str(tmp_path / "out"), str(folder), capsys=capsys)
    assert status == 0
    progress = [line for line in err.splitlines() if " of 250 reports" in line]
    assert progress == [
        f"dsymfind: {done} of 250 reports {doing}"
        for doing in ("read", "written")
        for done in (100, 200, 250)
    ]
    assert "\x1b" not in err


def test_a_short_batch_says_no_progress(local_dsyms, tree, tmp_path, capsys):
    _, _, err = run("--offline", "-o", str(tmp_path / "out"), str(tree), capsys=capsys)
    assert " of 4 reports" not in err


class Terminal:
    """A stderr that says it is a terminal, keeping what is written."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_on_a_terminal_the_progress_is_a_bar_cleared_before_other_lines():
    terminal = Terminal()
    meter = batches.Meter(200, terminal)  # type: ignore[arg-type]
    meter.phase("read", 200)
    for n in meter.each(range(200)):
        if n % 7 == 0:
            terminal.write(f"line {n}\n")  # a report's status line
    text = "".join(terminal.written)
    lines = text.split("\n")
    assert len(lines) == 30  # 29 status lines and what follows the last
    for line in lines[:-1]:
        assert line.rsplit("\r\x1b[K", 1)[-1].startswith("line "), repr(line)
    assert text.endswith("\r\x1b[K")  # no bar left behind
    assert "read [########################] 100%  200/200 reports" in text


def test_each_served_dsym_is_fetched_once_and_each_symcache_opened_once_for_a_folder(
    tmp_path, config_file, capsys, monkeypatch
):
    root = tmp_path / "server"
    for uuid in CRASHY_UUIDS.values():
        target = root / url_path(uuid).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CRASHY_DWARF, target)
    folder = tmp_path / "reports"
    for n in range(30):
        arch, uuid = list(CRASHY_UUIDS.items())[n % 2]
        offset = LEAF_CRASH if arch == "arm64" else X86_CRASH
        write(folder / f"d{n % 3}" / f"r{n}.ips", ips_report(uuid, arch, [offset]))
    opened: list[str] = []
    real_read = symcaches.read

    def counted(path: str, uuid: str, **kind: bool) -> symcaches.SymCache:
        opened.append(uuid)
        return real_read(path, uuid, **kind)

    monkeypatch.setattr(symcaches, "read", counted)
    with ss.SymbolServer(root) as server:
        write_config(
            config_file, f"timeout = 10\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )
        status, _, err = run("-o", str(tmp_path / "out"), str(folder), capsys=capsys)
        assert status == 0, err
        assert [server.count(url_path(uuid)) for uuid in CRASHY_UUIDS.values()] == [1, 1]
        opened.clear()
        status, _, _ = run("-o", str(tmp_path / "again"), str(folder), capsys=capsys)
        assert status == 0
        assert [server.count(url_path(uuid)) for uuid in CRASHY_UUIDS.values()] == [1, 1]
        assert sorted(opened) == sorted(CRASHY_UUIDS.values())  # each kept table once
