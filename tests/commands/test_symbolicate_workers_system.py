"""A batch shared out among workers names system frames from symbol tables as one process
does: each worker's engines know which tables are an image's own symbols."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support
from support.symbolication import symbolicate
from support.system_reports import metrickit_frame, metrickit_payload, system_frames

from dsymfind import main as cli
from dsymfind.symbolicate import workers


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("devicesupport"))


def written(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_workers_name_system_frames_from_symbol_tables_as_one_process_does(
    tree: DeviceSupportTree,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli.main(["index", str(tree.root)]) == 0
    frames = system_frames(tree)
    folder = tmp_path / "payloads"
    folder.mkdir()
    for n in range(6):
        entries = [metrickit_frame(f) for f in frames[n % len(frames) :]]
        (folder / f"payload{n}.json").write_text(metrickit_payload(entries))
    runs = {}
    for count in (0, 2):
        monkeypatch.setattr(workers, "count", lambda reports, count=count: count)
        out = tmp_path / f"out{count}"
        status, _, err = symbolicate(
            "--offline", "--format", "json", "-o", str(out), str(folder), capsys=capsys
        )
        assert status == 0, err
        runs[count] = (written(out), err.replace(str(out), "OUT"))
    assert runs[2] == runs[0]
    (thread,) = json.loads(runs[2][0]["payload0.json"])["threads"]
    assert [row.get("symbol_table") for row in thread["frames"]] == [True] * len(frames)
