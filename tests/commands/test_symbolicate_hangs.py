"""`dsymfind symbolicate` of hangs and samples: `sample` output and spindump text (one
process, or a `.hang` of many, `--process`), named as llvm-symbolizer names the same
addresses, written back in their own form, and bounded in memory however large."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.hang_reports import sample_report, spindump_report
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_UUIDS,
    TEXT_VMADDR,
    crashy_search_path,
    symbolicate,
)

from dsymfind.symbolicate import formats, hangtext

ARM = CRASHY_UUIDS["arm64"]
# Offsets into crashy's arm64 slice: the pc in leaf(), then the return addresses of its
# callers (as tests/commands/test_symbolicate.py uses them).
LEAF_CRASH, LEAF_RETURN, TRIGGER_RETURN = 0x338, 0x348, 0x380
RETURN_STEP = 4  # arm64: a return address is looked up at the call before it


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return crashy_search_path(tmp_path, config_file)


def functions(addresses: list[int]) -> list[str]:
    """The outermost function llvm-symbolizer names at each file address."""
    from support.symbolication import symbolizer

    return [frames[-1]["FunctionName"] for frames in symbolizer(CRASHY_DWARF, "arm64", addresses)]


def test_a_sample_is_named_as_llvm_symbolizer_names_it_and_kept_byte_for_byte(
    local_dsyms, tmp_path, capsys
):
    text = sample_report(ARM, [LEAF_CRASH, LEAF_RETURN, TRIGGER_RETURN])
    report = tmp_path / "crashy.sample.txt"
    report.write_text(text)
    status, out, err = symbolicate(str(report), capsys=capsys)
    assert status == 0, err
    expected = functions(
        [
            TEXT_VMADDR + TRIGGER_RETURN - RETURN_STEP,
            TEXT_VMADDR + LEAF_RETURN - RETURN_STEP,
            TEXT_VMADDR + LEAF_CRASH,
        ]
    )
    before, after = text.splitlines(), out.splitlines()
    assert len(before) == len(after)
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert len(changed) == 3
    for (old, new), function in zip(changed, expected, strict=True):
        assert "???" in old and "???" not in new
        assert new.split("  (in crashy)")[0].split()[-1].split(" > ")[0] == function or (
            function in new
        )
        # The tree, the count and the addresses are kept.
        assert new.startswith(old.split("???")[0])
        assert new.split("  [")[1].split("]")[0] == old.split("  [")[1].split("]")[0]
    # The named frame (dyld's) and the other sections are as they came.
    assert [b for b, a in zip(before, after, strict=True) if b == a] == [
        line for line in before if "???  (in crashy)  " not in line or "[" not in line
    ]
    again = tmp_path / "again.txt"
    again.write_text(out)
    status, twice, _ = symbolicate(str(again), capsys=capsys)
    assert (status, twice) == (0, out)


def test_a_spindump_of_many_processes_is_named_in_each(local_dsyms, tmp_path, capsys):
    processes = [
        ("crashy", 101, ARM, [LEAF_RETURN, TRIGGER_RETURN]),
        ("crashy", 102, ARM, [TRIGGER_RETURN]),
    ]
    for shared in (False, True):
        text = spindump_report(processes, shared=shared)
        report = tmp_path / f"many-{shared}.hang"
        report.write_text(text)
        status, out, err = symbolicate(str(report), capsys=capsys)
        assert status == 0, err
        assert "??? (crashy" not in out
        assert (
            out.count("??? (kernel.release.t8101 + 12345)") == 2
        )  # Apple's frames stay as they came
        leaf, trigger = functions(
            [TEXT_VMADDR + o - RETURN_STEP for o in (LEAF_RETURN, TRIGGER_RETURN)]
        )
        assert f"{leaf} + " in out and f"{trigger} + " in out
        assert len(out.splitlines()) == len(text.splitlines())


def test_process_picks_one_process_of_a_hang(local_dsyms, tmp_path, capsys):
    text = spindump_report(
        [("crashy", 101, ARM, [LEAF_RETURN]), ("other", 102, ARM, [TRIGGER_RETURN])],
        shared=True,
    )
    report = tmp_path / "two.hang"
    report.write_text(text)
    status, out, err = symbolicate("--process", "other", str(report), capsys=capsys)
    assert status == 0, err
    assert "Process:          other [102]" in out and "crashy [101]" not in out
    assert "Steps:" in out and "Binary Images:" in out  # the header, the shared images
    assert "???" not in out.split("Process:")[1].split("*")[0]
    status, out, err = symbolicate("--process", "101", str(report), capsys=capsys)
    assert status == 0 and "crashy [101]" in out and "other [102]" not in out
    status, _, err = symbolicate("--process", "nosuch", str(report), capsys=capsys)
    assert status == 1 and "no such process (it has crashy, other)" in err


def test_a_sample_and_a_spindump_are_also_written_as_json(local_dsyms, tmp_path, capsys):
    for name, text in (
        ("s.txt", sample_report(ARM, [LEAF_CRASH, TRIGGER_RETURN])),
        ("s.spin", spindump_report([("crashy", 1, ARM, [TRIGGER_RETURN])], shared=False)),
    ):
        (tmp_path / name).write_text(text)
        status, out, _ = symbolicate("--format", "json", str(tmp_path / name), capsys=capsys)
        symbols = [f.get("symbol") for t in json.loads(out)["threads"] for f in t["frames"]]
        assert status == 0 and "trigger" in symbols, symbols


def test_as_text_a_sample_and_a_spindump_are_their_own_text(local_dsyms, tmp_path, capsys):
    for name, text in (
        ("s.txt", sample_report(ARM, [LEAF_CRASH, TRIGGER_RETURN])),
        ("s.spin", spindump_report([("crashy", 1, ARM, [TRIGGER_RETURN])], shared=False)),
    ):
        (tmp_path / name).write_text(text)
        _, own, _ = symbolicate(str(tmp_path / name), capsys=capsys)
        status, as_text, _ = symbolicate("--format", "text", str(tmp_path / name), capsys=capsys)
        assert status == 0 and as_text == own and "trigger" in as_text


def test_an_unreadable_hang_is_its_own_line_and_the_batch_goes_on(local_dsyms, tmp_path, capsys):
    good = tmp_path / "good.txt"
    good.write_text(sample_report(ARM, [LEAF_CRASH]))
    bad = tmp_path / "bad.hang"
    bad.write_text(spindump_report([("crashy", 1, ARM, [LEAF_RETURN])], shared=False))
    status, _, err = symbolicate(
        "--process", "crashy", "-o", str(tmp_path / "out"), str(good), str(bad), capsys=capsys
    )
    assert status == 1
    errors = [line for line in err.splitlines() if line.startswith("dsymfind: error:")]
    assert errors == [
        f"dsymfind: error: {good}: --process crashy: the report has no processes to pick from"
    ]
    assert (tmp_path / "out" / "bad.hang").is_file()


# A sample of ~100 MB: many threads over the same few addresses, as long samples are.
HUGE_BYTES = 100 << 20
# Above the interpreter's own and what the run loads, far below the file's size.
MEMORY_BOUND_BYTES = 64 << 20
# A process's peak resident size counts its parent's at the fork (Linux keeps the larger
# across exec): the measured run is started from a small interpreter, not from pytest.
MEASURED_CHILD = """\
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], check=False)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def measured(*argv: str) -> tuple[list[str], int, int]:
    """The lines `python argv` prints, its exit status and its peak resident bytes."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURED_CHILD, sys.executable, *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    *lines, last = done.stdout.splitlines()
    status, peak = last.split()
    assert done.stderr == "" or int(status) != 1, done.stderr
    return lines, int(status), int(peak)


@pytest.fixture(scope="module")
def huge_sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    one = sample_report(ARM, [LEAF_CRASH, LEAF_RETURN, TRIGGER_RETURN], threads=50)
    head, _, rest = one.partition("Call graph:\n")
    graph, _, tail = rest.partition("\nTotal number")
    path = tmp_path_factory.mktemp("huge") / "huge.sample.txt"
    with path.open("w") as out:
        out.write(head + "Call graph:\n")
        written = 0
        while written < HUGE_BYTES:
            out.write(graph)
            written += len(graph)
        out.write("\nTotal number" + tail)
    return path, graph


@pytest.mark.long
def test_a_sample_of_100_mb_is_read_in_bounded_memory(huge_sample):
    path, _ = huge_sample
    script = (
        "import sys\n"
        "from dsymfind.symbolicate import hangfiles\n"
        "report = hangfiles.read_path(sys.argv[1])\n"
        "print(report.kind, len(report.frames()))\n"
    )
    lines, status, peak = measured("-c", script, str(path))
    assert (lines, status) == (["sample 4"], 0)  # one per distinct frame
    assert path.stat().st_size > HUGE_BYTES
    assert peak < MEMORY_BOUND_BYTES


@pytest.mark.long
def test_a_sample_of_100_mb_is_symbolicated_and_written_in_bounded_memory(
    huge_sample, local_dsyms, tmp_path
):
    path, graph = huge_sample
    out = tmp_path / "named.txt"
    _, status, peak = measured("-m", "dsymfind", "symbolicate", "-o", str(out), str(path))
    assert status == 0 and peak < MEMORY_BOUND_BYTES
    with out.open() as written:
        named = [
            line for _, line in zip(range(len(graph.splitlines()) + 40), written, strict=False)
        ]
    assert not any("???  (in crashy)" in line for line in named)
    assert sum("  (in crashy) + " in line for line in named) >= 3
    assert out.stat().st_size > path.stat().st_size  # names are longer than `???`


def test_distinct_frames_past_the_bound_are_refused(monkeypatch):
    monkeypatch.setattr(hangtext, "MAX_DISTINCT_FRAMES", 2)
    text = sample_report(ARM, [LEAF_CRASH, LEAF_RETURN, TRIGGER_RETURN])
    with pytest.raises(formats.CrashReportError, match="more than 2 distinct frames"):
        formats.parse(text)
