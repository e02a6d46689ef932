"""What a remembered answer costs in system calls: LLDB pays each one on every lookup."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.fixtures import GREET_UUID, dwarf_of, make_tree_link
from support.processes import BIN, run_helper

from dsymfind.macos import launcher
from dsymfind.macos.system import System

# From the settings snapshot's open to the answer's write, a remembered hit through the
# cache's tree makes: the snapshot's open, fstat, read, close; the three modules past the
# snapshot (a folder stat, two of the source, open, fstat, ioctl, two lseeks, fstat, two
# reads, close each); the permission walk (an lstat per folder, the root opened and
# fstat-ed, an fstatat per top-level folder, close); the answer's open, fstat, read,
# close; a stat per file it stamps; the tree link's readlink and its five folders' lstats.
# Reading a file whole through open() cost four calls more, the real path of the already
# resolved root an lstat per folder, and the tree entry and the dSYM were stat-ed twice.
HIT_CALLS = 78


def calls_answering(uuid: str, log: Path) -> list[str]:
    """The system calls of one helper run, from the settings' snapshot to the answer."""
    done = subprocess.run(
        ["strace", "-o", str(log), str(BIN / "dsymForUUID"), uuid],
        capture_output=True,
        check=True,
    )
    assert b"DBGDSYMPath" in done.stdout and done.stderr == b""
    # Signal setup and the allocator's brk are not the helper's doing: glibc grows and trims
    # its heap where the heap's top happens to lie (a module's size moves it), not per lookup.
    lines = [
        line for line in log.read_text().splitlines() if not line.startswith(("rt_sig", "brk("))
    ]
    start = next(i for i, line in enumerate(lines) if "config-snapshots" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("write(1,"))
    return lines[start:end]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_remembered_cache_tree_hit_makes_only_the_calls_it_needs(
    products: Path, cache_dir: Path, tmp_path: Path
) -> None:
    make_tree_link(cache_dir / "uuids", GREET_UUID, dwarf_of(products / "libgreet.dylib.dSYM"))
    # As install leaves it: no module compiled again on the way (the suite's environment
    # writes no bytecode).
    assert launcher.compile_package(System(dry_run=False), launcher.package_folder()) == []
    run_helper(GREET_UUID)  # builds the settings snapshot and remembers the answer

    calls = calls_answering(GREET_UUID, tmp_path / "strace.log")

    assert len(calls) <= HIT_CALLS, "\n".join(calls)
    assert os.path.isdir(cache_dir / "answers")
