"""Admitting the dSYM bundles already on this machine in the cache's file-mapped UUID tree.

Folders are linked in place: the tree's entry points at the user's DWARF file, and
nothing in the user's folders is written. With source remappings, a user's bundle gets
a shadow bundle in the cache instead (its DWARF file a symlink to the user's, beside
per-UUID plists that carry the remapping), since LLDB reads those plists next to the
DWARF path the tree names. Zip files are unpacked and admitted like downloads
(place.py). Every DWARF file is verified with the header-only Mach-O reader; one that
is not a dSYM is reported, and the valid DWARF files beside it are indexed.

Incremental: `<cache>/index/indexed-bundles` keeps each indexed bundle's DWARF file
stats (or a zip's), so an unchanged bundle costs one stat and is not read again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from dsymfind import atomic, debugsymbols, paths
from dsymfind.apple import bundle, macho, unpack
from dsymfind.cache import entries, place, removal, shadow
from dsymfind.cache.index_state import load_state, save_state
from dsymfind.cache.staged import Staged
from dsymfind.cache.tree import LinkConflict, TreeWriter
from dsymfind.paths import CachePaths
from dsymfind.progress import Progress
from dsymfind.uuids import tree_entry, uuid_hex

# Zips found while walking a folder are unpacked only when named like a dSYM delivery
# (App Store Connect's appDsyms.zip, CI's X.dSYM.zip): other zips are none of ours.
ZIP_NAME_HINT = "dsym"
# Xcode keeps intermediates and its index in *.noindex folders: thousands of files,
# and no dSYM that is not also in Products or an archive.
PRUNED_SUFFIX = ".noindex"
STATE_NAME = "indexed-bundles"
_STATE_FORMAT = 3

Stamp = tuple[int, int, int]  # mtime_ns, size, inode
Record = tuple[tuple[str, Stamp], ...]  # the files a bundle was read from, with their stats
MapsKey = tuple[tuple[str, str], ...]  # the source remappings a bundle was indexed with
# A bundle's state: its remappings, its record, the UUIDs its DWARF files carried.
State = tuple[MapsKey, Record, tuple[str, ...]]
# A record line no file matches: a bundle whose remappings a cache entry kept out is
# read again by the next run (its UUIDs stay remembered, for a rebuild in place).
_NEVER_UNCHANGED: tuple[str, Stamp] = ("", (-1, -1, -1))


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
        debugsymbols.SOURCE_PATH_REMAPPING: dict(maps),
        debugsymbols.BUILD_SOURCE_PATH: build,
        debugsymbols.SOURCE_PATH: local,
    }


class Indexer:
    def __init__(
        self,
        cache: CachePaths,
        *,
        source_maps: Mapping[str, str],
        max_unpacked_bytes: int,
        progress: Progress,
    ) -> None:
        self.cache = cache
        self.plist_values = source_plist_values(source_maps)
        self.maps_key: MapsKey = tuple(sorted(source_maps.items()))
        self.max_unpacked_bytes = max_unpacked_bytes
        self.progress = progress
        self.report = Report()
        self.state_path = os.path.join(cache.catalogs, STATE_NAME)
        self.old_state = _load_state(self.state_path)
        self.state: dict[str, State] = {}
        # Cache entries admitted for the bundle at hand: part of its record, so that
        # a bundle whose entry gc evicted is admitted again.
        self.entries_made: list[str] = []
        self.uuids_seen: list[str] = []
        # The bundle at hand must be indexed again by the next run: it met an entry it could
        # not give its source remappings to, or one being downloaded or removed.
        self.index_again = False
        # Old cache entries of a bundle go first (one grace period for all of them, see
        # removal.Removal); the bundles they stood in the way of are indexed after.
        self.removal = removal.Removal(cache)
        self.deferred: list[str] = []
        self.tree_writer = TreeWriter(cache.uuids)
        # The cache's entries, listed once: a bundle whose UUIDs have none (every bundle
        # of a first index) has no shadow to look for, and pays no failed open for it.
        self.entry_names = _entry_names(cache.dsyms)

    def run(self, roots: list[str]) -> Report:
        try:
            with removal.Removal(self.cache) as self.removal:
                for root in roots:
                    for kind, path in _found(root, skip=self.cache.root):
                        self._index(kind, path)
                self.removal.finish()
                deferred, self.deferred = self.deferred, []
                for path in deferred:
                    self._index_changed("bundle", path)
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
            self._index_changed(kind, path)
        if self.progress.live:  # formatting 10,000 lines nobody sees costs 40 ms
            self.progress.update("index", self._progress_line(path))

    def _index_changed(self, kind: str, path: str) -> None:
        self.entries_made, self.uuids_seen, self.index_again = [], [], False
        fresh = self._index_zip(path) if kind == "zip" else self._index_bundle(path)
        if fresh is not None:
            self.report.new += 1
            record = fresh + _stamped(self.entries_made)
            if self.index_again:
                record += (_NEVER_UNCHANGED,)
            self.state[path] = (self.maps_key, record, tuple(self.uuids_seen))

    def _progress_line(self, path: str) -> str:
        r = self.report
        return f"{r.seen} bundles, {r.new} new, {r.linked} UUIDs linked: {os.path.basename(path)}"

    def _index_bundle(self, bundle_dir: str) -> Record | None:
        """Link a user's bundle in place; its record, or None when it failed or must wait."""
        files = bundle.dwarf_files(bundle_dir, follow_symlinks=False)
        if not files:
            self._invalid(bundle_dir, "no DWARF file in Contents/Resources/DWARF")
            return None
        found = self._dsym_files(files)
        if not found or self._clear_the_way(bundle_dir, [(p, slices) for p, _, slices in found]):
            return None
        for dwarf_path, _, slices in found:
            self.uuids_seen += [str(s.uuid) for s in slices]
            if self.plist_values:
                self._admit_shadow(bundle_dir, dwarf_path, slices)
            else:
                uuids = [s.uuid for s in slices if s.uuid is not None]
                self._count(*place.link_uuids(self.cache, uuids, dwarf_path, self.tree_writer))
        record = tuple((path, stamp) for path, stamp, _ in found)
        # A file left out was reported: the bundle is read again on the next run, so the
        # report (and the exit status) stays until the file is gone or valid.
        return record if len(found) == len(files) else (*record, _NEVER_UNCHANGED)

    def _dsym_files(
        self, files: list[str], shown: Callable[[str], str] = str
    ) -> list[tuple[str, Stamp, list[macho.Slice]]]:
        """The DWARF files that are dSYMs, with their stats and slices; the others reported.

        A stray file (Finder's .DS_Store, an empty or foreign file) must not hide the
        valid DWARF file beside it. `shown` names a file in the report.
        """
        found = []
        for dwarf_path in files:
            # bundle.dwarf_files(follow_symlinks=False) listed it as a regular file.
            read = self._dsym_slices(dwarf_path, shown(dwarf_path), listed=True)
            if read is not None:
                found.append((dwarf_path, *read))
        return found

    def _clear_the_way(self, bundle_dir: str, found: list[tuple[str, list[macho.Slice]]]) -> bool:
        """Take away what an earlier index made for this bundle and must not stay.

        A shadow of the same file (made with other remappings, or none now) is replaced;
        links and shadows of UUIDs the bundle's files no longer carry (rebuilt in place)
        go. True when entries are being removed: the bundle is indexed once they are gone.
        """
        if not self.entry_names and bundle_dir not in self.old_state:
            return False  # a first index: no entry to replace, no UUID it carried before
        carried = {str(s.uuid) for _, slices in found for s in slices}
        dropped = [u for u in self._uuids_before(bundle_dir) if u not in carried]
        wanted = [str(slices[0].uuid) for _, slices in found]
        shadows = {
            entry: target
            for entry in (entries.entry_dir(self.cache, u) for u in dropped + wanted)
            if os.path.basename(entry) in self.entry_names
            and (target := shadow.target(entry)) is not None
        }
        if not shadows and not dropped:
            return False  # the usual new bundle: nothing to compare, no realpath to pay
        files = {os.path.realpath(path) for path, _ in found}
        doomed = [entry for entry, target in shadows.items() if target in files]
        for entry in doomed:
            if not self.removal.claim_entry(entry):
                self.report.conflicts.append(f"{entry}: in use right now; kept, index again")
                return True
            self.removal.take(entry)  # with the links into it
        for uuid in dropped:
            link = tree_entry(self.cache.uuids, uuid)
            if os.path.realpath(link) in files:
                atomic.unlink_quietly(link)  # linked in place to a file that lost the UUID
        if doomed:
            self.deferred.append(bundle_dir)
        return bool(doomed)

    def _uuids_before(self, bundle_dir: str) -> tuple[str, ...]:
        old = self.old_state.get(bundle_dir)
        return () if old is None else old[2]

    def _dsym_slices(
        self, dwarf_path: str, shown: str, *, listed: bool
    ) -> tuple[Stamp, list[macho.Slice]] | None:
        """The MH_DSYM slices carrying a UUID, with the file's stamp (from the descriptor
        they were read through), or None (reported as `shown`) when there are none.
        `listed`: bundle.dwarf_files has just listed the file as a regular one."""
        try:
            slices, info = macho.read_slices_with_stat(dwarf_path, listed=listed)
        except macho.MachOError as exc:
            self._invalid(shown, str(exc).removeprefix(f"{dwarf_path}: "))
            return None
        found = entries.dsym_slices(slices)
        if not found:
            kinds = ", ".join(sorted({s.filetype_name for s in slices}))
            self._invalid(shown, f"no dSYM slice with a UUID ({kinds})")
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino), found

    def _admit_shadow(self, bundle_dir: str, dwarf_path: str, slices: list[macho.Slice]) -> None:
        """A cache-owned bundle whose DWARF file is a symlink to the user's, with our plists."""
        with self._staging() as staging:
            staged = shadow.stage(staging, dwarf_path, slices)
            self._publish(str(slices[0].uuid), staged, staging, found_in=bundle_dir, slices=slices)

    def _index_zip(self, zip_path: str) -> Record | None:
        stamp = _stamp(zip_path)
        if stamp is None:
            self._invalid(zip_path, "cannot read it")
            return None
        with self._staging() as staging:
            unpacked_dir = os.path.join(staging, "unpacked")
            os.mkdir(unpacked_dir)
            try:
                unpacked = unpack.unpack(
                    zip_path, unpacked_dir, max_unpacked_bytes=self.max_unpacked_bytes
                )
            except unpack.ArchiveError as exc:
                self._invalid(zip_path, str(exc))
                return None
            if unpacked.kind not in ("bundles", "file"):
                self._invalid(zip_path, "not a zip file")
                return None
            if unpacked.kind == "bundles":
                admitted = [self._admit_unpacked(b, staging, zip_path) for b in unpacked.paths]
            else:
                admitted = [self._admit_bare(unpacked.paths[0], staging, zip_path)]
        return ((zip_path, stamp),) if all(admitted) else None

    def _admit_unpacked(self, bundle_dir: str, staging: str, zip_path: str) -> bool:
        """Admit one bundle from a zip like a download; False when not all of it was valid."""
        unpacked = os.path.join(staging, "unpacked")
        files = bundle.dwarf_files(bundle_dir, follow_symlinks=False)
        if not files:
            where = f"{zip_path}: {os.path.relpath(bundle_dir, unpacked)}"
            self._invalid(where, "no DWARF file in Contents/Resources/DWARF")
            return False
        found = self._dsym_files(
            files, lambda path: f"{zip_path}: {os.path.relpath(path, unpacked)}"
        )
        if not found:
            return False
        _drop_strays(files, [path for path, _, _ in found])
        dwarf_path, _, slices = found[0]
        admitted = self._admit_new(Staged(dwarf_path, slices, bundle_dir), staging, zip_path)
        return admitted and len(found) == len(files)

    def _admit_bare(self, dwarf_path: str, staging: str, zip_path: str) -> bool:
        read = self._dsym_slices(dwarf_path, dwarf_path, listed=False)
        if read is None:
            return False
        return self._admit_new(Staged(dwarf_path, read[1], None), staging, zip_path)

    def _admit_new(self, staged: Staged, staging: str, found_in: str) -> bool:
        """Admit unless every UUID already has a valid link (ours from before, or a conflict)."""
        missing = [s for s in staged.slices if not self._already_linked(s, found_in)]
        if missing:
            uuid = missing[0].uuid
            assert uuid is not None
            self._publish(uuid, staged, staging, found_in=found_in, slices=missing)
        return True

    def _already_linked(self, piece: macho.Slice, found_in: str) -> bool:
        assert piece.uuid is not None
        entry = tree_entry(self.cache.uuids, piece.uuid)
        if not os.path.exists(entry):
            return False
        target = os.path.realpath(entry)
        dsyms = os.path.realpath(self.cache.dsyms)
        if not target.startswith(dsyms + os.sep):
            self.report.conflicts.append(
                f"{piece.uuid} from {found_in}: already linked to {target}; kept"
            )
            return True
        holder = os.path.join(dsyms, os.path.relpath(target, dsyms).split(os.sep)[0])
        if not self._carries_plist_values(holder, [piece]):
            self._unapplied(piece.uuid, holder)
        return True

    def _unapplied(self, uuid: str, entry: str) -> None:
        self.index_again = True
        self.report.conflicts.append(
            f"{uuid}: the cache already holds {entry} ({_kind_of(entry)}); "
            "its source remapping was not applied"
        )

    def _publish(
        self,
        uuid: str,
        staged: Staged,
        staging: str,
        *,
        found_in: str,
        slices: list[macho.Slice],
    ) -> None:
        # Under the UUID's lock, as a download admits: a removal (gc) holds it from before it
        # unlinks an entry's names until the entry is gone, and relinking an entry it is
        # removing would leave a link to nothing.
        with self.removal.claimed(uuid_hex(uuid)) as held:
            if not held:
                self.report.conflicts.append(
                    f"{uuid} from {found_in}: being downloaded or removed right now; index again"
                )
                self.index_again = True
                return
            # The user's own zip: every DWARF file its bundle holds is theirs to admit, as
            # a bundle of theirs indexed in place would be (downloads keep only the one
            # asked for).
            linked = place.admit(
                self.cache,
                uuid,
                staged,
                staging,
                found_in,
                self.plist_values,
                keep_other_dwarf_files=True,
            )
        final = entries.entry_dir(self.cache, uuid)
        self.entry_names.add(os.path.basename(final))
        if not self._carries_plist_values(final, slices):
            self._unapplied(uuid, final)  # an entry admitted before ours stayed
            return
        for piece in slices:
            # A remembered answer names the bundle as it was found before: with its new
            # entry (a shadow's remappings, say), the helper must build the answer again.
            if piece.uuid is not None:
                atomic.unlink_quietly(self.cache.answer_file(uuid_hex(piece.uuid)))
        self.report.linked += len(linked)
        self.entries_made.append(final)
        for piece in slices:
            if piece.uuid not in linked:
                target = os.path.realpath(tree_entry(self.cache.uuids, str(piece.uuid)))
                self.report.conflicts.append(
                    f"{piece.uuid} from {found_in}: already linked to {target}; kept"
                )

    def _carries_plist_values(self, entry: str, slices: list[macho.Slice]) -> bool:
        """Whether an entry admitted before says what this run would have it say."""
        if not self.plist_values:
            return True
        found = entries.entry_bundle(entry)
        if found is None:
            return False
        return all(
            bundle.read_uuid_plist(found, str(piece.uuid)).get(key) == value
            for piece in slices
            for key, value in self.plist_values.items()
        )

    def _count(self, linked: list[str], conflicts: list[LinkConflict]) -> None:
        self.report.linked += len(linked)
        self.report.conflicts += [f"{c}; kept" for c in conflicts]

    def _invalid(self, path: str, reason: str) -> None:
        self.report.invalid.append(f"{path}: {reason}")

    def _staging(self) -> tempfile.TemporaryDirectory[str]:
        return self.cache.new_staging(paths.INDEX_STAGING_PREFIX)

    def _save_state(self, roots: list[str]) -> None:
        save_state(self.state_path, _STATE_FORMAT, "bundles", self.old_state, self.state, roots)


def _entry_names(dsyms: str) -> set[str]:
    try:
        return set(os.listdir(dsyms))
    except OSError:
        return set()  # no entry yet


def _drop_strays(files: list[str], kept: list[str]) -> None:
    """Delete the files left out (and reported) from a staged bundle: carried into the
    cache, a file that is no dSYM would make `dsymfind check` call the entry invalid."""
    for stray in set(files).difference(kept):
        os.unlink(stray)


def _kind_of(entry: str) -> str:
    user_file = shadow.target(entry)
    return "a download" if user_file is None else f"a shadow of {user_file}"


def _found(root: str, *, skip: str) -> Iterator[tuple[str, str]]:
    """("bundle", path) and ("zip", path) below `root`, without following symlinks.

    The folder `skip` (the cache: its bundles are linked already) is not entered, by
    whatever path the walk reaches it (a root given through a symlink, say).
    """
    if root.endswith(".dSYM") and os.path.isdir(root):
        yield "bundle", root
        return
    if os.path.isfile(root):
        yield "zip", root
        return
    skipped = _identity(skip)
    if skipped is not None and _identity(root) == skipped:
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
                if skipped is None or _identity(entry) != skipped:
                    stack.append(entry.path)
            elif kind is not None:
                yield kind, entry.path


def _identity(where: str | os.DirEntry[str]) -> tuple[int, int] | None:
    """A folder's (device, inode): the same folder, whatever the path that reaches it."""
    try:
        st = where.stat() if isinstance(where, os.DirEntry) else os.stat(where)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _kind(entry: os.DirEntry[str]) -> str | None:
    if entry.is_dir(follow_symlinks=False):
        if entry.name.endswith(".dSYM"):
            return "bundle"
        return None if entry.name.endswith(PRUNED_SUFFIX) else "folder"
    name = entry.name.lower()
    if name.endswith(".zip") and ZIP_NAME_HINT in name and entry.is_file(follow_symlinks=False):
        return "zip"
    return None


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


def _load_state(path: str) -> dict[str, State]:
    return load_state(path, _STATE_FORMAT, "bundles")
