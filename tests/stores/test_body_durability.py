"""The downloaded body reaches the disk before it takes a name in the cache.

Renaming a file whose bytes are still only in the page cache lets a power cut leave a
cache entry that names a file of zeros or of nothing (ext4 and XFS order a rename before
the data it names unless the data was synced). So the body's descriptor is fsynced (or
fdatasynced) before the rename that brings it, inside its entry, under `dsyms/`, and so is
every other file of the entry (its plists, a zip's unpacked files).

Observed as the kernel sees it: the real downloader process, traced by strace, with every
name the body takes followed through links and renames. An in-process spy on os.fsync
would miss a sync made through another binding (_bare_os, posix) and would not see the
calls a real process makes; the trace sees exactly those.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID
from support.processes import BIN
from support.served import HELLO_DWARF, ZIP, configure_native, url_path, zipped_bundle

from dsymfind.uuids import uuid_hex

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")

TRACED = "%file,fsync,fdatasync"
# A path argument as strace prints it, and a descriptor with the path -y gives it.
_STRING = r'"((?:[^"\\]|\\.)*)"'
_DIR_AND_NAME = re.compile(r"(?:AT_FDCWD|-?\d+)<([^>]*)>, " + _STRING)
_FD_PATH = re.compile(r"^\d+<([^>]*)>")
_CALL = re.compile(r"^(?P<tid>\d+)\s+(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>.*)$")
_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(r"^(?P<tid>\d+)\s+<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")


class Names:
    """Which file each path names, followed through a trace's links, renames and unlinks,
    and which files were synced: enough to tell whether a file was synced before a rename."""

    def __init__(self) -> None:
        self.files: dict[str, int] = {}
        self.synced: set[int] = set()
        self._next = 0

    def file_of(self, path: str) -> int:
        if path not in self.files:
            self._next += 1
            self.files[path] = self._next
        return self.files[path]

    def opened(self, path: str) -> None:
        self.file_of(path)

    def linked(self, old: str, new: str) -> None:
        self.files[new] = self.file_of(old)

    def renamed(self, old: str, new: str) -> None:
        """`old` (a file, or a folder with everything below it) now answers to `new`."""
        moved = {p: f for p, f in self.files.items() if p == old or p.startswith(old + "/")}
        for path in moved:
            del self.files[path]
        for path in [p for p in self.files if p == new or p.startswith(new + "/")]:
            del self.files[path]  # replaced
        for path, file in moved.items():
            self.files[new + path[len(old) :]] = file

    def unlinked(self, path: str) -> None:
        self.files.pop(path, None)

    def synced_now(self, path: str) -> None:
        self.synced.add(self.file_of(path))


def calls(trace: str) -> Iterator[tuple[str, str, str]]:
    """(name, arguments, result) of each completed call, in order; a call split by another
    thread's (`<unfinished ...>` ... `<... resumed>`) is joined at the point it returned."""
    pending: dict[str, str] = {}
    for line in trace.splitlines():
        if line.endswith(_UNFINISHED):
            tid = line.split(None, 1)[0]
            pending[tid] = line[: -len(_UNFINISHED)]
            continue
        resumed = _RESUMED.match(line)
        if resumed is not None:
            line = pending.pop(resumed["tid"], "") + resumed["rest"]
        found = _CALL.match(line)
        if found is not None and not found["result"].startswith("-1"):
            yield found["name"], found["args"], found["result"]


def paths_in(args: str) -> list[str]:
    """The paths a call names: (dirfd, name) pairs resolved, or bare strings."""
    pairs = _DIR_AND_NAME.findall(args)
    if pairs:
        return [os.path.join(folder, name) for folder, name in pairs]
    return re.findall(_STRING, args)


def synced_before_admission(trace: str, dsyms: str) -> list[tuple[str, bool]]:
    """Each file brought under `dsyms` by a rename, and whether it had been synced then."""
    names, admitted = Names(), []
    for name, args, result in calls(trace):
        if name in ("fsync", "fdatasync"):
            fd = _FD_PATH.match(args)
            if fd is not None:
                names.synced_now(fd[1])
        elif name in ("open", "openat", "creat"):
            fd = _FD_PATH.match(result)
            if fd is not None:
                names.opened(fd[1])
        elif name in ("link", "linkat"):
            names.linked(*paths_in(args)[:2])
        elif name in ("unlink", "unlinkat"):
            names.unlinked(paths_in(args)[0])
        elif name in ("rename", "renameat", "renameat2"):
            old, new = paths_in(args)[:2]
            names.renamed(old, new)
            if new.startswith(dsyms + "/"):
                for path, file in names.files.items():
                    if path.startswith(new + "/"):
                        admitted.append((path, file in names.synced))
    return admitted


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer(tmp_path / "store") as running:
        yield running


@pytest.mark.parametrize(
    "answer",
    [
        # An ETag: the transfer goes through its partial file (resumable), linked in place.
        pytest.param(ss.body(HELLO_DWARF, headers=[("ETag", '"v1"')]), id="resumable"),
        # No validator: the body is written where the fetch asked for it, directly.
        pytest.param(ss.body(HELLO_DWARF), id="not-resumable"),
        # A zipped bundle: its files are unpacked, not downloaded, and synced at admission.
        pytest.param(ss.body(zipped_bundle(FIXTURES / "hello.dSYM"), content_type=ZIP), id="zip"),
    ],
)
def test_the_downloaded_body_is_synced_before_it_is_renamed_into_the_cache(
    served: ss.SymbolServer,
    config_file: Path,
    cache_dir: Path,
    tmp_path: Path,
    answer: ss.Route,
) -> None:
    served.route(url_path(HELLO_UUID), answer)
    configure_native(config_file, served, timeout=30)
    log = tmp_path / "downloader.strace"

    strace = ["strace", "-f", "-y", "-qq", "-e", f"trace={TRACED}", "-o", str(log)]
    done = subprocess.run(
        [*strace, str(BIN / "dsymfind"), "_download", HELLO_UUID],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    dsyms = os.path.realpath(cache_dir / "dsyms")
    (entry,) = os.listdir(dsyms)
    assert entry == uuid_hex(HELLO_UUID)
    admitted = dict(synced_before_admission(log.read_text(), dsyms))
    bodies = [path for path in admitted if "/Contents/Resources/DWARF/" in path]
    assert len(bodies) == 1, admitted
    assert Path(bodies[0]).read_bytes() == HELLO_DWARF
    assert admitted[bodies[0]], f"{bodies[0]} was renamed into the cache before any fsync"
    files = [path for path in admitted if Path(path).is_file()]
    assert len(files) >= 3, admitted  # the DWARF file, Info.plist, the per-UUID plist
    unsynced = [path for path in files if not admitted[path]]
    assert unsynced == [], f"renamed into the cache before any fsync: {unsynced}"
