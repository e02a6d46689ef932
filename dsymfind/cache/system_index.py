"""Recording Apple's own images found in DeviceSupport folders and simulator runtimes.

Every slice of every Mach-O image under an OS build's tree (apple/device_support.py)
becomes a record (cache/systems.py) naming the user's file where it lies: nothing is
copied, nothing in the user's folders is written. The files are read first; the records
made and dropped are then written in one pass over the shards they fall in.

Incremental as the bundle index is: `<cache>/index/indexed-systems` keeps each file's
stat and the UUIDs it carried, so an unchanged file whose records are all there costs
one stat and is not read again; a changed one is read again and its old UUIDs' records
dropped, and a file gone from a folder walked has its records dropped. A UUID already
recorded for another file that still exists is a conflict: reported, and the record kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

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
        # With no systems/ (a first index, or one after it was removed) every file is read,
        # whatever an earlier state says: the records it stood for are gone.
        self.old_state = _load_state(self.state_path) if os.path.isdir(cache.systems) else {}
        # The records there now, read once: a file whose records are not all there (a
        # damaged shard removed) is read again, as a changed one.
        self.existing = systems.recorded_paths(cache) if self.old_state else {}
        self.state: dict[str, State] = {}
        # What this run records, by hex name, and the records it forgets where they still
        # name the file given: both written in one pass over the shards, at the end.
        self.recording: dict[str, SystemImage] = {}
        self.dropping: dict[str, str] = {}

    def run(self, roots: list[str], builds: list[OSBuild]) -> SystemReport:
        """Index `builds`, found under `roots` (what was given: a file recorded below one
        of them that this run did not see is gone)."""
        walked = roots + [b.symbols for b in builds]
        try:
            for os_build in builds:
                self._index_build(os_build)
            self._drop_gone(walked)
            self._write_records()
        finally:
            self.progress.close()
        # Saved only once the records are: a run cut short reads its files again.
        self._save_state(walked)
        return self.report

    def _index_build(self, os_build: OSBuild) -> None:
        for path in device_support.regular_files(os_build.symbols, self._invalid):
            self.report.files += 1
            old = self.old_state.get(path)
            if old is not None and _stamp(path) == old[0] and self._recorded(path, old[1]):
                self.state[path] = old
                if old[1]:
                    self._count(os_build, len(old[1]))
                    self.report.unchanged += 1
            else:
                self._read(os_build, path, old)
            if self.progress.live:
                self.progress.update("index", self._progress_line(os_build))

    def _recorded(self, path: str, hexes: tuple[str, ...]) -> bool:
        """Whether every record of the file's slices is there and names it."""
        return all(self.existing.get(name) == path for name in hexes)

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
        info = read.info
        self.state[path] = ((info.st_mtime_ns, info.st_size, info.st_ino), carried)
        if image is not None:
            self.report.new += 1
            self._count(os_build, len(image.slices))
            for piece in image.slices:
                self._record(os_build, image, piece)

    def _record(
        self, os_build: OSBuild, image: device_support.SystemFile, piece: macho.Slice
    ) -> None:
        """Record the slice, unless another file this run read carries its UUID."""
        uuid = str(piece.uuid)
        name = uuid_hex(uuid)
        holder = self.recording.get(name)
        if holder is not None and holder.path != image.path:
            self._conflict(holder.path, uuid, piece.arch, image.path)
            return
        self.recording[name] = SystemImage(
            uuid,
            piece.arch,
            image.path,
            os_build.os,
            os_build.version,
            os_build.build,
            image.install_path,
        )

    def _conflict(self, holder: str, uuid: str, arch: str, path: str) -> None:
        self.report.conflicts.append(
            f"{uuid} ({arch}) in {path}: already recorded for {holder}; kept"
        )
        self._read_again(path)  # so the report stays until one of the two files is gone

    def _read_again(self, path: str) -> None:
        """The next run reads `path` again: its stamp is one no file has."""
        self.state[path] = (_NEVER_UNCHANGED, self.state[path][1])

    def _drop(self, path: str, hexes: tuple[str, ...]) -> None:
        """Forget the UUIDs `path` carried, where their records still name it."""
        for name in hexes:
            self.dropping[name] = path

    def _drop_gone(self, walked: list[str]) -> None:
        """Forget the files recorded below the folders walked that the walk did not see."""
        for path, (_, hexes) in self.old_state.items():
            if path not in self.state and under_any(path, walked):
                self._drop(path, hexes)

    def _write_records(self) -> None:
        """The records dropped and made, each shard read and written once, under the
        writers' lock. A UUID recorded for another file that still exists is a conflict."""
        dropped = []
        with systems.Shards(self.cache) as shards:
            for name, path in self.dropping.items():
                before = shards.get(name)
                if before is not None and before.path == path and shards.remove(name):
                    dropped.append(name)
            for name, image in list(self.recording.items()):
                before = shards.get(name)
                if before is not None and before.path != image.path and os.path.isfile(before.path):
                    self._conflict(before.path, image.uuid, image.arch, image.path)
                    del self.recording[name]
                else:
                    shards.put(image)
            failed = set(shards.save())
        self.report.dropped += len(dropped)
        systems.forget_answers(self.cache, dropped)
        for name, image in self.recording.items():
            if systems.shard_of(name) in failed:
                self._invalid(image.path, f"cannot write the record of {image.uuid}")
                self._read_again(image.path)

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
