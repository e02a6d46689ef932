"""Search paths: folders searched recursively for `.dSYM` bundles, with a persistent index.

The index of each search root lives in `<cache>/index/`. It remembers every folder's
mtime with its subfolders and bundles, and every DWARF file's stat with its UUIDs, so
a refresh re-lists only changed folders and re-reads only changed files. A lookup
that the index answers costs one read; a miss refreshes at most once per
REFRESH_INTERVAL, so LLDB's burst of lookups at start-up walks a tree once.
"""

from __future__ import annotations

import os
import time

from dsymfind import atomic, bundle, macho, paths

# A miss re-walks the tree only if the last walk is older than this.
REFRESH_INTERVAL = 5.0
_FORMAT = 1

DirRecord = tuple[int, list[str], list[str]]  # mtime_ns, subfolder names, bundle names
DwarfRecord = tuple[int, int, list[tuple[str, str]]]  # mtime_ns, size, [(uuid, arch)]


class SearchIndex:
    def __init__(self, index_dir: str, root: str) -> None:
        self.root = root
        self.path = os.path.join(index_dir, f"search-{paths.short_name(root)}")
        self.refreshed = 0.0
        self.dirs: dict[str, DirRecord] = {}
        self.dwarf: dict[str, DwarfRecord] = {}
        self.by_uuid: dict[str, list[str]] = {}
        self._load()

    def find(self, uuid: str) -> tuple[str, macho.Slice] | None:
        """A DWARF file below the root verified to carry `uuid`."""
        found = self._verified(uuid)
        if found is None and time.time() - self.refreshed >= REFRESH_INTERVAL:
            self.refresh()
            found = self._verified(uuid)
        return found

    def _verified(self, uuid: str) -> tuple[str, macho.Slice] | None:
        for path in self.by_uuid.get(uuid, []):
            found = bundle.verified_slice(path, uuid)
            if found is not None:
                return path, found
        return None

    def refresh(self) -> None:
        """Walk the tree again, reusing what is unchanged, and save the result."""
        old_dirs, old_dwarf = self.dirs, self.dwarf
        self.dirs, self.dwarf = {}, {}
        stack = [self.root]
        if self.root.endswith(".dSYM"):  # a search path may name one bundle
            stack = []
            self._index_bundle(self.root, old_dwarf)
        while stack:
            folder = stack.pop()
            record = self._list_folder(folder, old_dirs.get(folder))
            if record is None:
                continue
            self.dirs[folder] = record
            for name in record[2]:
                self._index_bundle(os.path.join(folder, name), old_dwarf)
            stack.extend(os.path.join(folder, name) for name in record[1])
        self.by_uuid = _invert(self.dwarf)
        self.refreshed = time.time()
        self._save()

    def _list_folder(self, folder: str, old: DirRecord | None) -> DirRecord | None:
        try:
            mtime = os.stat(folder).st_mtime_ns
            if old is not None and old[0] == mtime:
                return old
            subfolders: list[str] = []
            bundles: list[str] = []
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        is_bundle = entry.name.endswith(".dSYM")
                        (bundles if is_bundle else subfolders).append(entry.name)
        except OSError:
            return None
        return mtime, sorted(subfolders), sorted(bundles)

    def _index_bundle(self, path: str, old_dwarf: dict[str, DwarfRecord]) -> None:
        for dwarf_path in bundle.dwarf_files(path):
            try:
                st = os.stat(dwarf_path)
            except OSError:
                continue
            old = old_dwarf.get(dwarf_path)
            if old is not None and old[:2] == (st.st_mtime_ns, st.st_size):
                self.dwarf[dwarf_path] = old
                continue
            try:
                slices = macho.read_slices(dwarf_path)
            except macho.MachOError:
                continue
            uuids = [(s.uuid, s.arch) for s in slices if s.uuid is not None]
            self.dwarf[dwarf_path] = (st.st_mtime_ns, st.st_size, uuids)

    def _load(self) -> None:
        data = atomic.read_marshal(self.path)
        try:
            if data["format"] != _FORMAT or data["root"] != self.root:
                return
            self.refreshed, self.dirs = data["refreshed"], data["dirs"]
            self.dwarf, self.by_uuid = data["dwarf"], data["by_uuid"]
        except (TypeError, KeyError):
            self.refreshed, self.dirs, self.dwarf, self.by_uuid = 0.0, {}, {}, {}

    def _save(self) -> None:
        data = {
            "format": _FORMAT,
            "root": self.root,
            "refreshed": self.refreshed,
            "dirs": self.dirs,
            "dwarf": self.dwarf,
            "by_uuid": self.by_uuid,
        }
        atomic.write_marshal(self.path, data)


def _invert(dwarf: dict[str, DwarfRecord]) -> dict[str, list[str]]:
    by_uuid: dict[str, list[str]] = {}
    for path, (_, _, uuids) in dwarf.items():
        for uuid, _arch in uuids:
            by_uuid.setdefault(uuid, []).append(path)
    return by_uuid
