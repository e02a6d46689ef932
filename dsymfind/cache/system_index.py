"""Recording Apple's own images found in DeviceSupport folders and simulator runtimes.

Every slice of every Mach-O image under an OS build's tree (apple/device_support.py)
becomes a `systems/<HEX>` record (cache/systems.py) naming the user's file where it
lies: nothing is copied, nothing in the user's folders is written.

Incremental as the bundle index is: `<cache>/index/indexed-systems` keeps each file's
stat and the UUIDs it carried, so an unchanged file costs one stat and is not read
again; a changed one is read again and its old UUIDs' records dropped, and a file gone
from a folder walked has its records dropped. A UUID already recorded for another file
that still exists is a conflict: reported, and the record kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from dsymfind import _bare_os, paths
from dsymfind.apple import device_support, macho
from dsymfind.apple.device_support import OSBuild
from dsymfind.cache import systems
from dsymfind.cache.index_state import load_state, save_state, under_any
from dsymfind.cache.systems import SystemImage
from dsymfind.paths import CachePaths
from dsymfind.progress import Progress
from dsymfind.uuids import uuid_hex

STATE_NAME = "indexed-systems"
_STATE_FORMAT = 1

Stamp = tuple[int, int, int]  # mtime_ns, size, inode
# A file's state: its stamp and the UUIDs (hex) of its image slices, none for a file
# that is no image (a plist, a cache: read once, then one stat a run too).
State = tuple[Stamp, tuple[str, ...]]
_NEVER_UNCHANGED: Stamp = (-1, -1, -1)


@dataclass
class SystemReport:
    files: int = 0  # regular files seen under the OS builds' trees
    images: int = 0  # of them, Mach-O images
    slices: int = 0  # their slices, one record each
    new: int = 0  # images read this run (new or changed)
    unchanged: int = 0  # images not read again
    dropped: int = 0  # records of files gone or changed
    os_builds: set[str] = field(default_factory=set)  # labels of the builds holding images
    invalid: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """`N system images (M slices) of K OS builds`, the report's own words."""
        return (
            f"{self.images} system images ({self.slices} slices) of {len(self.os_builds)} OS builds"
        )


class SystemIndexer:
    def __init__(self, cache: CachePaths, *, progress: Progress) -> None:
        self.cache = cache
        self.progress = progress
        self.report = SystemReport()
        self.state_path = os.path.join(cache.catalogs, STATE_NAME)
        # A first index (or one after systems/ was removed) builds the folder whole in a
        # staging folder and renames it into place: a record there is written directly,
        # not as a temporary file renamed over its name. Every file is read then, whatever
        # an earlier state says: the records it stood for are gone.
        self.staged = not os.path.isdir(cache.systems)
        self.old_state = {} if self.staged else _load_state(self.state_path)
        self.state: dict[str, State] = {}
        # Records there before this run, listed once: a first index pays no failed open
        # per slice to look for a conflict.
        self.existing = set(systems.names(cache))
        # Each UUID recorded by this run, with the file that carries it.
        self.recorded_here: dict[str, str] = {}
        self.folder = cache.systems  # where records are written (see `staged`)

    def run(self, roots: list[str], builds: list[OSBuild]) -> SystemReport:
        """Index `builds`, found under `roots` (what was given: a file recorded below one
        of them that this run did not see is gone)."""
        walked = roots + [b.symbols for b in builds]
        staging = self.cache.new_staging(paths.INDEX_STAGING_PREFIX) if self.staged else None
        try:
            if staging is not None:
                self.folder = os.path.join(staging.name, os.path.basename(self.cache.systems))
            _bare_os.makedirs(self.folder, mode=0o700, exist_ok=True)
            for os_build in builds:
                self._index_build(os_build)
            self._drop_gone(walked)
            if staging is not None:
                _move_into_place(self.folder, self.cache.systems)
        finally:
            self._save_state(walked)
            if staging is not None:
                staging.cleanup()
            self.progress.close()
        return self.report

    def _index_build(self, os_build: OSBuild) -> None:
        for path in device_support.regular_files(os_build.symbols, self._invalid):
            self.report.files += 1
            old = self.old_state.get(path)
            if old is not None and _stamp(path) == old[0]:
                self.state[path] = old
                if old[1]:
                    self._count(os_build, len(old[1]))
                    self.report.unchanged += 1
            else:
                self._read(os_build, path, old)
            if self.progress.live:
                self.progress.update("index", self._progress_line(os_build))

    def _read(self, os_build: OSBuild, path: str, old: State | None) -> None:
        try:
            read = device_support.read_system_file(os_build, path)
        except device_support.UnreadableImage as exc:
            self._invalid(path, str(exc))
            if old is not None:
                self._drop(path, old[1])  # it is no longer the image it was
            return
        image = read.image
        carried = () if image is None else tuple(uuid_hex(str(s.uuid)) for s in image.slices)
        if old is not None:
            self._drop(path, tuple(u for u in old[1] if u not in carried))
        kept = True
        if image is not None:
            self.report.new += 1
            self._count(os_build, len(image.slices))
            kept = all([self._record(os_build, image, piece) for piece in image.slices])
        info = read.info
        # A file with a conflicting slice is read again by the next run (a stamp no file
        # has), so the report stays until one of the two files is gone.
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino) if kept else _NEVER_UNCHANGED
        self.state[path] = (stamp, carried)

    def _record(
        self, os_build: OSBuild, image: device_support.SystemFile, piece: macho.Slice
    ) -> bool:
        """Write the slice's record; False when another file holds the UUID (reported)."""
        uuid = str(piece.uuid)
        name = uuid_hex(uuid)
        holder = self.recorded_here.get(name)
        if holder is None and name in self.existing:
            before = systems.recorded(self.cache, name)
            if before is not None and before.path != image.path and _bare_os.isfile(before.path):
                holder = before.path
        if holder is not None and holder != image.path:
            self.report.conflicts.append(
                f"{uuid} ({piece.arch}) in {image.path}: already recorded for {holder}; kept"
            )
            return False
        self.recorded_here[name] = image.path
        record = SystemImage(
            uuid,
            piece.arch,
            image.path,
            os_build.os,
            os_build.version,
            os_build.build,
            image.install_path,
        )
        if not systems.record_in(self.folder, record, staged=self.staged):
            self._invalid(image.path, f"cannot write the record of {uuid}")
            return False
        return True

    def _drop(self, path: str, hexes: tuple[str, ...]) -> None:
        """Forget the UUIDs `path` carried, where their records still name it."""
        for name in hexes:
            before = systems.recorded(self.cache, name)
            if before is not None and before.path == path and name not in self.recorded_here:
                systems.drop(self.cache, name)
                self.report.dropped += 1

    def _drop_gone(self, walked: list[str]) -> None:
        """Forget the files recorded below the folders walked that the walk did not see."""
        for path, (_, hexes) in self.old_state.items():
            if path not in self.state and under_any(path, walked):
                self._drop(path, hexes)

    def _count(self, os_build: OSBuild, slices: int) -> None:
        self.report.images += 1
        self.report.slices += slices
        self.report.os_builds.add(f"{os_build.label} at {os_build.symbols}")

    def _progress_line(self, os_build: OSBuild) -> str:
        return f"{self.report.summary()}, {self.report.new} new: {os_build.label}"

    def _invalid(self, path: str, reason: str) -> None:
        self.report.invalid.append(f"{path}: {reason}")

    def _save_state(self, walked: list[str]) -> None:
        save_state(self.state_path, _STATE_FORMAT, "files", self.old_state, self.state, walked)


def _move_into_place(staged: str, systems_dir: str) -> None:
    """The records built in `staged` become `systems_dir`: in one rename, or, when another
    run made that folder meanwhile, one by one (each a rename: whole or not at all)."""
    try:
        os.rename(staged, systems_dir)
        return
    except OSError:
        pass
    _bare_os.makedirs(systems_dir, mode=0o700, exist_ok=True)
    for name in os.listdir(staged):
        os.replace(os.path.join(staged, name), os.path.join(systems_dir, name))


def indexed_files(cache: CachePaths) -> list[str]:
    """The files the last runs recorded (images or not), for `doctor`."""
    return list(_load_state(os.path.join(cache.catalogs, STATE_NAME)))


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _load_state(path: str) -> dict[str, State]:
    return load_state(path, _STATE_FORMAT, "files")
