"""Publishing the dSYM bundles already on this machine in the cache's file-mapped UUID tree.

Folders are linked in place: the tree's entry points at the user's DWARF file, and
nothing in the user's folders is written. With source remappings, a user's bundle gets
a shadow bundle in the cache instead (its DWARF file a symlink to the user's, beside
per-UUID plists that carry the remapping), since LLDB reads those plists next to the
DWARF path the tree names. Zip files are unpacked and published like downloads
(publish.py). Every DWARF file is verified with the header-only Mach-O reader.

Incremental: `<cache>/index/indexed-bundles` keeps each indexed bundle's DWARF file
stats (or a zip's), so an unchanged bundle costs one stat and is not read again.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from dsymfind import archive, atomic, bundle, macho, publish
from dsymfind.paths import CacheLayout
from dsymfind.progress import Progress
from dsymfind.uuid_tree import LinkConflict
from dsymfind.uuids import tree_entry

# Zips found while walking a folder are unpacked only when named like a dSYM delivery
# (App Store Connect's appDsyms.zip, CI's X.dSYM.zip): other zips are none of ours.
ZIP_NAME_HINT = "dsym"
# Xcode keeps intermediates and its index in *.noindex folders: thousands of files,
# and no dSYM that is not also in Products or an archive.
PRUNED_SUFFIX = ".noindex"
STATE_NAME = "indexed-bundles"
# What remove_entry renames an entry to in <cache>/tmp before deleting it there.
REMOVED_PREFIX = "removed-"
_STATE_FORMAT = 2

Stamp = tuple[int, int, int]  # mtime_ns, size, inode
Record = tuple[tuple[str, Stamp], ...]  # the files a bundle was read from, with their stats
MapsKey = tuple[tuple[str, str], ...]  # the source remappings a bundle was indexed with


@dataclass
class Report:
    seen: int = 0
    new: int = 0
    unchanged: int = 0
    linked: int = 0
    invalid: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def parse_source_maps(values: list[str]) -> dict[str, str]:
    """`BUILD=LOCAL` words as a remapping dict; LOCAL made absolute."""
    from dsymfind.errors import DsymfindError

    maps: dict[str, str] = {}
    for value in values:
        build, sep, local = value.partition("=")
        if not sep or not build or not local:
            raise DsymfindError(f"--source-map: expected BUILD=LOCAL, got {value!r}")
        maps[build] = os.path.abspath(os.path.expanduser(local))
    return maps


def source_plist_values(maps: Mapping[str, str]) -> dict[str, object]:
    """Per-UUID plist keys for the remappings: the dict, and its first pair for older readers."""
    if not maps:
        return {}
    build, local = next(iter(maps.items()))
    return {
        "DBGSourcePathRemapping": dict(maps),
        "DBGBuildSourcePath": build,
        "DBGSourcePath": local,
    }


class Indexer:
    def __init__(
        self,
        layout: CacheLayout,
        *,
        source_maps: Mapping[str, str],
        max_unpacked_bytes: int,
        progress: Progress,
    ) -> None:
        self.layout = layout
        self.plist_values = source_plist_values(source_maps)
        self.maps_key: MapsKey = tuple(sorted(source_maps.items()))
        self.max_unpacked_bytes = max_unpacked_bytes
        self.progress = progress
        self.report = Report()
        self.state_path = os.path.join(layout.index, STATE_NAME)
        self.old_state = _load_state(self.state_path)
        self.state: dict[str, tuple[MapsKey, Record]] = {}
        # Cache entries published for the bundle at hand: part of its record, so that
        # a bundle whose entry gc evicted is published again.
        self.entries_made: list[str] = []

    def run(self, roots: list[str]) -> Report:
        try:
            for root in roots:
                for kind, path in _found(root, skip=self.layout.root):
                    self._index(kind, path)
        finally:
            self._save_state(roots)
            self.progress.close()
        return self.report

    def _index(self, kind: str, path: str) -> None:
        self.report.seen += 1
        old = self.old_state.get(path)
        if old is not None and old[0] == self.maps_key and _unchanged(old[1]):
            self.report.unchanged += 1
            self.state[path] = old
        else:
            self.entries_made = []
            fresh = self._index_zip(path) if kind == "zip" else self._index_bundle(path)
            if fresh is not None:
                self.report.new += 1
                self.state[path] = (self.maps_key, fresh + _stamped(self.entries_made))
        self.progress.update("index", self._progress_line(path))

    def _progress_line(self, path: str) -> str:
        r = self.report
        return f"{r.seen} bundles, {r.new} new, {r.linked} UUIDs linked: {os.path.basename(path)}"

    def _index_bundle(self, bundle_dir: str) -> Record | None:
        """Link a user's bundle in place; its record, or None when it failed."""
        files = bundle.dwarf_files(bundle_dir)
        if not files:
            self._invalid(bundle_dir, "no DWARF file in Contents/Resources/DWARF")
            return None
        record = []
        for dwarf_path in files:
            stamp = _stamp(dwarf_path)
            slices = self._dsym_slices(dwarf_path)
            if stamp is None or slices is None:
                return None
            record.append((dwarf_path, stamp))
            if self.plist_values:
                self._publish_shadow(bundle_dir, dwarf_path, slices)
            else:
                self._replace_old_shadow(str(slices[0].uuid), dwarf_path)
                uuids = [s.uuid for s in slices if s.uuid is not None]
                self._count(*publish.link_uuids(self.layout, uuids, dwarf_path))
        return tuple(record)

    def _dsym_slices(self, dwarf_path: str) -> list[macho.Slice] | None:
        """The MH_DSYM slices carrying a UUID, or None (reported) when there are none."""
        try:
            slices = macho.read_slices(dwarf_path)
        except macho.MachOError as exc:
            self._invalid(dwarf_path, str(exc).removeprefix(f"{dwarf_path}: "))
            return None
        found = [s for s in slices if s.uuid is not None and s.filetype_name == "MH_DSYM"]
        if not found:
            kinds = ", ".join(sorted({s.filetype_name for s in slices}))
            self._invalid(dwarf_path, f"no dSYM slice with a UUID ({kinds})")
            return None
        return found

    def _publish_shadow(self, bundle_dir: str, dwarf_path: str, slices: list[macho.Slice]) -> None:
        """A cache-owned bundle whose DWARF file is a symlink to the user's, with our plists."""
        with self._staging() as staging:
            shadow = os.path.join(staging, "shadow", os.path.basename(bundle_dir))
            dwarf_dir = os.path.join(shadow, bundle.DWARF_SUBDIR)
            os.makedirs(dwarf_dir)
            link = os.path.join(dwarf_dir, os.path.basename(dwarf_path))
            os.symlink(os.path.abspath(dwarf_path), link)
            _copy_user_plists(bundle_dir, shadow, slices)
            uuid = slices[0].uuid
            assert uuid is not None  # _dsym_slices keeps only slices with a UUID
            self._replace_old_shadow(uuid, dwarf_path)
            staged = publish.Staged(link, slices, shadow)
            self._publish(uuid, staged, staging, source=bundle_dir, slices=slices)

    def _replace_old_shadow(self, uuid: str, dwarf_path: str) -> None:
        """A shadow of the same file made with other remappings (or none now) gives way."""
        entry = publish.entry_dir(self.layout, uuid)
        if shadow_target(entry) == os.path.realpath(dwarf_path):
            remove_entry(self.layout, entry)

    def _index_zip(self, zip_path: str) -> Record | None:
        stamp = _stamp(zip_path)
        if stamp is None:
            self._invalid(zip_path, "cannot read it")
            return None
        with self._staging() as staging:
            unpacked_dir = os.path.join(staging, "unpacked")
            os.mkdir(unpacked_dir)
            try:
                unpacked = archive.unpack(
                    zip_path, unpacked_dir, max_unpacked_bytes=self.max_unpacked_bytes
                )
            except archive.ArchiveError as exc:
                self._invalid(zip_path, str(exc))
                return None
            if unpacked.kind not in ("bundles", "file"):
                self._invalid(zip_path, "not a zip file")
                return None
            if unpacked.kind == "bundles":
                published = [self._publish_unpacked(b, staging, zip_path) for b in unpacked.paths]
            else:
                published = [self._publish_bare(unpacked.paths[0], staging, zip_path)]
        return ((zip_path, stamp),) if all(published) else None

    def _publish_unpacked(self, bundle_dir: str, staging: str, zip_path: str) -> bool:
        """Publish one bundle from a zip like a download; False when it was not valid."""
        where = f"{zip_path}: {os.path.relpath(bundle_dir, os.path.join(staging, 'unpacked'))}"
        files = bundle.dwarf_files(bundle_dir)
        if not files:
            self._invalid(where, "no DWARF file in Contents/Resources/DWARF")
            return False
        slices = self._dsym_slices(files[0])
        if slices is None:
            return False
        staged = publish.Staged(files[0], slices, bundle_dir)
        return self._publish_new(staged, staging, zip_path)

    def _publish_bare(self, dwarf_path: str, staging: str, zip_path: str) -> bool:
        slices = self._dsym_slices(dwarf_path)
        if slices is None:
            return False
        return self._publish_new(publish.Staged(dwarf_path, slices, None), staging, zip_path)

    def _publish_new(self, staged: publish.Staged, staging: str, source: str) -> bool:
        """Publish unless every UUID already has a valid link (ours from before, or a conflict)."""
        missing = [s for s in staged.slices if not self._already_linked(s, source)]
        if missing:
            uuid = missing[0].uuid
            assert uuid is not None
            self._publish(uuid, staged, staging, source=source, slices=missing)
        return True

    def _already_linked(self, piece: macho.Slice, source: str) -> bool:
        assert piece.uuid is not None
        entry = tree_entry(self.layout.uuids, piece.uuid)
        if not os.path.exists(entry):
            return False
        target = os.path.realpath(entry)
        if not target.startswith(os.path.realpath(self.layout.dsyms) + os.sep):
            self.report.conflicts.append(
                f"{piece.uuid} from {source}: already linked to {target}; kept"
            )
        return True

    def _publish(
        self,
        uuid: str,
        staged: publish.Staged,
        staging: str,
        *,
        source: str,
        slices: list[macho.Slice],
    ) -> None:
        linked = publish.publish(self.layout, uuid, staged, staging, source, self.plist_values)
        self.report.linked += len(linked)
        self.entries_made.append(publish.entry_dir(self.layout, uuid))
        for piece in slices:
            if piece.uuid not in linked:
                target = os.path.realpath(tree_entry(self.layout.uuids, str(piece.uuid)))
                self.report.conflicts.append(
                    f"{piece.uuid} from {source}: already linked to {target}; kept"
                )

    def _count(self, linked: list[str], conflicts: list[LinkConflict]) -> None:
        self.report.linked += len(linked)
        self.report.conflicts += [f"{c}; kept" for c in conflicts]

    def _invalid(self, path: str, reason: str) -> None:
        self.report.invalid.append(f"{path}: {reason}")

    def _staging(self) -> tempfile.TemporaryDirectory[str]:
        os.makedirs(self.layout.tmp, mode=0o700, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix="index-", dir=self.layout.tmp)

    def _save_state(self, roots: list[str]) -> None:
        """This run's records, and the old ones of bundles outside the folders walked."""
        kept = {p: r for p, r in self.old_state.items() if not _under_any(p, roots)}
        kept.update(self.state)
        atomic.write_marshal(self.state_path, {"format": _STATE_FORMAT, "bundles": kept})


def _found(root: str, *, skip: str) -> Iterator[tuple[str, str]]:
    """("bundle", path) and ("zip", path) below `root`, without following symlinks.

    The folder `skip` (the cache: its bundles are linked already) is not entered.
    """
    if root.endswith(".dSYM") and os.path.isdir(root):
        yield "bundle", root
        return
    if os.path.isfile(root):
        yield "zip", root
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            kind = _kind(entry)
            if kind == "folder":
                if entry.path != skip:
                    stack.append(entry.path)
            elif kind is not None:
                yield kind, entry.path


def _kind(entry: os.DirEntry[str]) -> str | None:
    if entry.is_dir(follow_symlinks=False):
        if entry.name.endswith(".dSYM"):
            return "bundle"
        return None if entry.name.endswith(PRUNED_SUFFIX) else "folder"
    name = entry.name.lower()
    if name.endswith(".zip") and ZIP_NAME_HINT in name and entry.is_file(follow_symlinks=False):
        return "zip"
    return None


def _copy_user_plists(bundle_dir: str, shadow: str, slices: list[macho.Slice]) -> None:
    """The user's per-UUID plists and Info.plist, so the shadow says what the bundle said."""
    for piece in slices:
        values = bundle.read_uuid_plist(bundle_dir, str(piece.uuid))
        if values:
            path = bundle.uuid_plist_path(shadow, str(piece.uuid))
            atomic.write_bytes(path, plistlib.dumps(values), fsync=False)
    info = os.path.join(bundle_dir, "Contents", "Info.plist")
    try:
        data = bundle.read_small_file(info, bundle.MAX_UUID_PLIST_BYTES)
    except OSError:
        return
    atomic.write_bytes(os.path.join(shadow, "Contents", "Info.plist"), data, fsync=False)


def shadow_target(entry: str) -> str | None:
    """The user's DWARF file a shadow entry stands for, or None when `entry` is no shadow."""
    try:
        bundles = [os.path.join(entry, n) for n in os.listdir(entry) if n.endswith(".dSYM")]
    except OSError:
        return None
    for bundle_dir in bundles:
        folder = os.path.join(bundle_dir, bundle.DWARF_SUBDIR)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if os.path.islink(os.path.join(folder, name)):
                return os.path.realpath(os.path.join(folder, name))
    return None


def remove_entry(layout: CacheLayout, entry: str) -> None:
    """Take a cache entry away: out of its final name first, so a crash leaves debris only."""
    os.makedirs(layout.tmp, mode=0o700, exist_ok=True)
    doomed = tempfile.mkdtemp(prefix=REMOVED_PREFIX, dir=layout.tmp)
    os.rename(entry, os.path.join(doomed, os.path.basename(entry)))
    shutil.rmtree(doomed, ignore_errors=True)


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _stamped(files: list[str]) -> Record:
    return tuple((path, stamp) for path in files if (stamp := _stamp(path)) is not None)


def _unchanged(record: Record) -> bool:
    return all(_stamp(path) == stamp for path, stamp in record)


def _under_any(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _load_state(path: str) -> dict[str, tuple[MapsKey, Record]]:
    data = atomic.read_marshal(path)
    try:
        if data["format"] == _STATE_FORMAT and isinstance(data["bundles"], dict):
            return data["bundles"]
    except (TypeError, KeyError):
        pass
    return {}
