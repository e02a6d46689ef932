"""Ctrl-C in the middle of `dsymfind publish --system` copying a large system library into a
folder store: nothing partial, no record, no claim or intent left, exit status 130."""

from __future__ import annotations

from pathlib import Path

from support.device_support import build_device_support
from support.processes import BIN, interrupted_mid_copy

MIB = 1024 * 1024
# How long a child may take to reach the middle of its copy on a loaded machine.
PATIENCE = 300.0
ONE = (("/System/Library/Frameworks/Foundation.framework/Foundation", ("arm64",)),)


def test_ctrl_c_in_the_middle_of_a_system_library_leaves_nothing(tmp_path: Path) -> None:
    """The library is padded to 100 MiB with zeros (sparse; still a valid Mach-O), so the
    run's first progress line, at a tenth of it, blocks on stderr (a full pipe, a CI log
    that stopped reading) in the middle of its copy; SIGINT then."""
    tree = build_device_support(tmp_path, libraries=ONE)
    with tree.libraries[0].path.open("r+b") as library:
        library.truncate(100 * MIB)
    store = tmp_path / "store"
    argv = [str(BIN / "dsymfind"), "publish", "--system", "--to", str(store), str(tree.root)]

    status, said, out = interrupted_mid_copy(
        argv, tmp_path, store, ".executable.*.tmp", patience=PATIENCE
    )

    assert status == 130
    assert said.endswith("interrupted: 0 published, 1 not (nothing partial was left)")
    # No temp file, no object, no record, and the build ID's claim and intent taken back.
    assert [p for p in store.rglob("*") if not p.is_dir()] == []
    assert out == ""
