"""A long `dsymfind publish`: its byte progress on stderr (a bar on a terminal, a line at each
tenth in a log), and Ctrl-C in the middle of a real copy into a folder store."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, HELLO_UUID, UNIVERSAL_UUIDS, padded_bundle
from support.processes import BIN, interrupted_mid_copy, on_a_terminal

from dsymfind import main as cli
from dsymfind.commands import publish as publish_command
from dsymfind.progress import Progress

MIB = 1024 * 1024
# How long a child may take to reach the middle of its copy on a loaded machine.
PATIENCE = 300.0


def test_a_long_publish_says_each_tenth_of_its_bytes_in_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A clock that never moves: only the bytes decide, 1 MiB written at a time.
    monkeypatch.setattr(publish_command, "Progress", functools.partial(Progress, clock=lambda: 0))
    bundle = padded_bundle(tmp_path, 100 * MIB)
    assert cli.main(["publish", "--to", str(tmp_path / "store"), str(bundle)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"big.dSYM {HELLO_UUID} arm64: published\n")
    said = re.findall(
        rf"^publish: (\d+)%, ([\d.]+) MiB of 100\.0 MiB \(big\.dSYM {HELLO_UUID} arm64\)$",
        err,
        re.M,
    )
    # One line as each tenth is passed (the metadata's few bytes count too, so the first
    # MiB past it says 11%), and no other line.
    assert [int(percent) // 10 for percent, _ in said] == list(range(1, 11))
    assert [float(size) for _, size in said] == [*range(11, 100, 10), 100.0]
    assert len(err.splitlines()) == 10


def test_on_a_terminal_a_bar_is_redrawn_under_whole_result_lines(tmp_path: Path) -> None:
    bundles = [FIXTURES / "hello.dSYM", FIXTURES / "universal.dSYM"]
    command = [str(BIN / "dsymfind"), "publish", "--to", str(tmp_path / "store")]
    status, text = on_a_terminal([*command, *map(str, bundles)])
    assert status == 0
    assert re.search(r"publish \[[#.]{24}\] +\d+%  [\d.]+ KiB/[\d.]+ KiB  hello\.dSYM ", text)
    assert "\x1b[1F\x1b[J" in text  # drawn in place
    # Each result line whole, on a line of its own, with the bar cleared before it.
    assert f"\x1b[Jhello.dSYM {HELLO_UUID} arm64: published\r\n" in text
    for arch, uuid in UNIVERSAL_UUIDS.items():
        assert f"universal.dSYM {uuid} {arch}: published\r\n" in text
    assert "summary: 3 published" in text


def test_ctrl_c_in_the_middle_of_a_copy_into_a_folder_leaves_nothing(tmp_path: Path) -> None:
    """Stopped in the middle of its copy (support/processes.py): SIGINT then."""
    bundle = padded_bundle(tmp_path, 100 * MIB)
    store = tmp_path / "store"
    argv = [str(BIN / "dsymfind"), "publish", "--to", str(store), str(bundle)]

    status, said, out = interrupted_mid_copy(
        argv, tmp_path, store, ".debuginfo.*.tmp", patience=PATIENCE
    )

    assert status == 130
    assert said.endswith("interrupted: 0 published, 1 not (nothing partial was left)")
    assert [p for p in store.rglob("*") if not p.is_dir()] == []  # no temp file, no object
    assert out == ""
