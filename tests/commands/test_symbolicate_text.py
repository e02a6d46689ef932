"""`dsymfind symbolicate --format text`: Apple's text form from each input, its frames named
from real dSYMs, and an output form a report cannot take refused before any server is asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import write_config
from support.served import url_path
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_UUIDS,
    TEXT_VMADDR,
    crash_report,
    crashy_search_path,
    ips_report,
    symbolicate,
)

ARM = CRASHY_UUIDS["arm64"]
# Offsets into crashy's arm64 slice (llvm-objdump): leaf()'s start, the crash inside
# twice() inlined into leaf(), and the return address in trigger() after its call to leaf().
LEAF_START, LEAF_CRASH, TRIGGER_RETURN = 0x328, 0x338, 0x380
NAMED = [
    f"twice + {LEAF_CRASH - LEAF_START} (crashy.c:10) [inlined]",
    f"leaf + {LEAF_CRASH - LEAF_START} (crashy.c:14)",
]

run = symbolicate


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return crashy_search_path(tmp_path, config_file)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def frame_lines(text: str) -> list[tuple[str, str]]:
    """(number, what follows the pc) of every frame line: `N   image  \\t  0xPC rest`."""
    found = []
    for line in text.splitlines():
        head, tab, tail = line.partition("\t")
        if tab and head[:1].isdigit():
            found.append((head.split()[0], tail.split(None, 1)[1]))
    return found


def test_an_ips_is_written_as_apples_text_with_inlined_frames_and_lines(
    local_dsyms, tmp_path, capsys
):
    body = {"procName": "crashy", "pid": 4711, "exception": {"type": "EXC_BAD_ACCESS"}}
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH], **body))
    status, out, err = run("--format", "text", report, capsys=capsys)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "Process:               crashy [4711]"
    assert "Exception Type:        EXC_BAD_ACCESS" in lines
    assert "Thread 0 Crashed:" in lines
    # Both lines of the one frame carry its number and pc, the callee first.
    head = f"0   {'crashy':<30}\t{TEXT_VMADDR + LEAF_CRASH:#18x}"
    assert [line for line in lines if line.startswith("0   ")] == [f"{head} {n}" for n in NAMED]
    image = f"{TEXT_VMADDR:#18x} - "
    assert [line for line in lines if line.startswith(image)] == [
        f"{image}{'???':>18} crashy arm64  <{ARM.replace('-', '').lower()}> /Users/dev/crashy"
    ]


def test_crash_is_the_text_form_for_an_ips(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    _, text, _ = run("--format", "text", report, capsys=capsys)
    status, crash, _ = run("--format", "crash", report, capsys=capsys)
    assert status == 0
    assert crash == text


def test_a_crash_report_as_crash_is_written_as_it_always_was(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "crashy.crash", crash_report(ARM, "arm64", [LEAF_CRASH]))
    _, own, _ = run(report, capsys=capsys)
    _, crash, _ = run("--format", "crash", report, capsys=capsys)
    status, text, _ = run("--format", "text", report, capsys=capsys)
    assert status == 0
    assert own == crash == text
    assert [rest for _, rest in frame_lines(text)] == NAMED


def test_a_metrickit_payload_is_written_as_text(local_dsyms, tmp_path, capsys):
    frame = {
        "binaryUUID": ARM,
        "binaryName": "crashy",
        "offsetIntoBinaryTextSegment": LEAF_CRASH,
        "address": TEXT_VMADDR + LEAF_CRASH,
        "sampleCount": 1,
        "subFrames": [
            {
                "binaryUUID": ARM,
                "binaryName": "crashy",
                "offsetIntoBinaryTextSegment": TRIGGER_RETURN,
                "address": TEXT_VMADDR + TRIGGER_RETURN,
                "sampleCount": 1,
            }
        ],
    }
    stacks = {"callStacks": [{"threadAttributed": True, "callStackRootFrames": [frame]}]}
    metadata = {"signal": 11, "exceptionType": 1, "appVersion": "1.0", "appBuildVersion": "7"}
    payload = {"crashDiagnostics": [{"callStackTree": stacks, "diagnosticMetaData": metadata}]}
    report = write(tmp_path / "diag.json", json.dumps(payload))
    status, out, err = run("--format", "text", report, capsys=capsys)
    assert status == 0, err
    assert "Exception Type:        EXC_BAD_ACCESS (SIGSEGV)" in out.splitlines()
    assert "Version:               1.0 (7)" in out.splitlines()
    named = frame_lines(out)
    assert [number for number, _ in named] == ["0", "0", "1"]
    assert [rest for _, rest in named][:2] == NAMED
    assert named[2][1].startswith("trigger + ") and named[2][1].endswith("(crashy.c:27)")


def test_a_form_the_report_cannot_take_is_refused_before_any_server_is_asked(
    tmp_path, config_file, capsys
):
    root = tmp_path / "server"
    target = root / url_path(ARM).lstrip("/")
    target.parent.mkdir(parents=True)
    shutil.copyfile(CRASHY_DWARF, target)
    crash = write(tmp_path / "crashy.crash", crash_report(ARM, "arm64", [LEAF_CRASH]))
    with ss.SymbolServer(root) as server:
        write_config(config_file, f"[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n")
        for form in ("ips", "metrickit"):
            status, out, err = run("--format", form, crash, capsys=capsys)
            assert status == 1
            assert out == ""
            assert err == (
                f"dsymfind: error: {crash}: a report in the crash form is written in that "
                f"form, as text or as json, not as {form}\n"
            )
        assert server.requests == []
        # The same report in a form it takes asks the server for its dSYM.
        status, _, _ = run("--format", "text", crash, capsys=capsys)
        assert status == 0
        assert server.count(url_path(ARM)) == 1


def test_in_a_batch_the_refused_report_is_one_line_and_the_others_go_on(
    local_dsyms, tmp_path, capsys
):
    ips = write(tmp_path / "a.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    crash = write(tmp_path / "b.crash", crash_report(ARM, "arm64", [LEAF_CRASH]))
    out = tmp_path / "out"
    status, _, err = run("--format", "ips", "-o", str(out), ips, crash, capsys=capsys)
    assert status == 1
    assert f"dsymfind: error: {crash}: a report in the crash form" in err
    assert sorted(p.name for p in out.iterdir()) == ["a.ips"]
