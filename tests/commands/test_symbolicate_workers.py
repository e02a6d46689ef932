"""`dsymfind symbolicate` of a long batch by worker processes (symbolicate/workers.py): the
same outputs, lines and summary as one process, and a worker's death costs only its
reports."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from support import symbolication as made

from dsymfind import atomic
from dsymfind.symbolicate import formats, workers

ARM = made.CRASHY_UUIDS["arm64"]
IN_LEAF = 0x338  # in crashy's arm64 slice, where twice() is inlined into leaf()
NOBODYS = "11111111-2222-3333-4444-555555555555"  # a build nobody has symbols for
REPORTS = 120


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return made.crashy_search_path(tmp_path, config_file)


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """A folder of REPORTS reports of every kind the batch meets: complete, with frames left
    bare, in the text form, and not reports at all."""
    root = tmp_path / "reports"
    for n in range(REPORTS):
        folder = root / f"day{n // 40}"
        folder.mkdir(parents=True, exist_ok=True)
        if n % 10 == 3:  # its frames left bare
            (folder / f"r{n:03d}.ips").write_text(made.ips_report(NOBODYS, "arm64", [n]))
        elif n % 10 == 5:
            text = made.crash_report(ARM, "arm64", [IN_LEAF, n])
            (folder / f"r{n:03d}.crash").write_text(text)
        elif n % 29 == 7:
            (folder / f"r{n:03d}.ips").write_text("not a crash report\n")
        else:
            (folder / f"r{n:03d}.ips").write_text(made.ips_report(ARM, "arm64", [IN_LEAF, 4 * n]))
    return root


def outputs(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def batch(
    folder: Path, out: Path, summary: Path, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, str, dict[str, object]]:
    status, stdout, err = made.symbolicate(
        "--offline", *options, "-o", str(out), "--summary", str(summary), str(folder), capsys=capsys
    )
    assert stdout == ""
    text = summary.read_text().replace(str(out), "OUT")
    return status, err.replace(str(out), "OUT"), json.loads(text)


def in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "count", lambda reports: 0)


def in_workers(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """`count` workers whatever the machine's cores (a test machine may have one)."""
    monkeypatch.setattr(workers, "count", lambda reports: count)


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("form", [[], ["--format", "json"]])
def test_workers_write_what_one_process_writes_byte_for_byte(
    local_dsyms, many, tmp_path, capsys, monkeypatch, count, form
):
    in_one_process(monkeypatch)
    alone = batch(many, tmp_path / "alone", tmp_path / "alone.json", capsys, *form)
    in_workers(monkeypatch, count)
    shared = batch(many, tmp_path / "shared", tmp_path / "shared.json", capsys, *form)
    assert outputs(tmp_path / "shared") == outputs(tmp_path / "alone")
    assert shared == alone  # exit status, every stderr line in its order, the summary
    status, err, summary = shared
    assert status == 1  # the unreadable ones
    assert err.splitlines()[-1] == (
        f"{REPORTS} reports: 104 complete, 13 with frames left bare, 3 unreadable"
    )
    assert err.count("dsymfind: error:") == 3
    paths = [entry["path"] for entry in summary["reports"]]  # type: ignore[index]
    assert paths == sorted(paths) and len(paths) == REPORTS  # input order


def test_a_long_batch_says_its_progress_in_a_log(local_dsyms, many, tmp_path, capsys, monkeypatch):
    in_workers(monkeypatch, 2)
    _, err, _ = batch(many, tmp_path / "out", tmp_path / "summary.json", capsys)
    lines = err.splitlines()
    assert f"dsymfind: {REPORTS} of {REPORTS} reports read" in lines
    written = lines.index(f"dsymfind: 100 of {REPORTS - 3} reports written")
    assert lines[written + 1].startswith(str(many))  # a report's line follows it


def test_a_worker_that_dies_loses_only_its_own_reports(
    local_dsyms, many, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "out"
    inputs = sorted(p for p in many.rglob("*") if p.is_file())
    victim = inputs[64]  # in the second worker's share, the last 60 inputs
    write_into_folder = atomic.write_into_folder

    def write_or_die(path: str, data: bytes) -> None:
        if path == str(out / victim.relative_to(many)):
            os.kill(os.getpid(), signal.SIGKILL)
        write_into_folder(path, data)

    monkeypatch.setattr(atomic, "write_into_folder", write_or_die)
    in_workers(monkeypatch, 2)
    status, err, summary = batch(many, out, tmp_path / "summary.json", capsys)
    assert status == 1
    entries = {Path(e["path"]): e for e in summary["reports"]}  # type: ignore[index]
    lost = [p for p in inputs[64:] if entries[p]["status"] == "unwritten"]
    assert victim in lost
    assert lost == [p for p in inputs[64:] if entries[p]["app"] is not None or p.suffix == ".crash"]
    for path in lost:
        assert (
            f"dsymfind: error: {path}: not written: the process that had it ended (signal 9)" in err
        )
        assert entries[path]["output"] is None
    kept = set(outputs(out))
    assert {str(p.relative_to(many)) for p in inputs[:64]} - kept <= {
        str(p.relative_to(many)) for p in inputs[:64] if entries[p]["status"] == "unreadable"
    }
    assert not kept & {str(p.relative_to(many)) for p in lost}
    assert all(entries[p]["status"] != "unwritten" for p in inputs[:64])


def test_a_worker_that_dies_reading_leaves_its_reports_unread(
    local_dsyms, many, tmp_path, capsys, monkeypatch
):
    parse = formats.parse
    parent = os.getpid()

    def parse_or_fail(seen: object):  # type: ignore[no-untyped-def]
        if os.getpid() != parent:
            raise RuntimeError("a bug in the reader")  # before the worker sent anything
        return parse(seen)  # type: ignore[arg-type]

    monkeypatch.setattr(formats, "parse", parse_or_fail)
    in_workers(monkeypatch, 2)
    status, err, summary = batch(many, tmp_path / "out", tmp_path / "summary.json", capsys)
    assert status == 1
    statuses = [e["status"] for e in summary["reports"]]  # type: ignore[index]
    assert statuses == ["unreadable"] * REPORTS
    assert err.count("not read: the process that had it ended (exit status 1)") == REPORTS
    assert not (tmp_path / "out").exists()
