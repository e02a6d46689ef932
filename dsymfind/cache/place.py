"""Putting a verified download into the cache, so that a crash at any instant leaves it valid.

The entry `<cache>/dsyms/<UUIDHEX>/<name>.dSYM` is assembled in the cache's staging
area (same file system), complete with its plists, and renamed into place in one step.
Only then are the file-mapped links made, each under a temporary name and renamed over.
A crash before the rename leaves only staging debris; after it, a complete bundle whose
missing links the next download run re-creates without fetching again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import plistlib
import shutil
import stat
from collections.abc import Mapping

from dsymfind import atomic, debugsymbols, permissions
from dsymfind.apple import bundle, macho
from dsymfind.cache import entries, tree
from dsymfind.cache.staged import Staged
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

DSYM_EXTENSION = ".dSYM"


def admit(
    cache: CachePaths,
    uuid: str,
    staged: Staged,
    staging: str,
    downloaded_from: str,
    plist_values: Mapping[str, object] | None = None,
    *,
    keep_other_dwarf_files: bool = False,
    doors: Doors | None = None,
) -> list[str]:
    """Move `staged` into the cache and link every slice's UUID; returns the UUIDs linked.
    `doors`: what the admissions of a batch share (one run opens its own).
    `downloaded_from` (a candidate's label, or the user's bundle) goes into its plists.

    Only the staged DWARF file is admitted: other DWARF files its bundle brought are left
    out, unless `keep_other_dwarf_files` (from a place as trusted as the user's own bundles).
    `plist_values` go into the per-UUID plists over the bundle's own values (source
    remappings from `dsymfind index --source-map`: what the user asked for wins). When
    another run admitted the UUID first, its entry stays and ours is dropped.
    """
    if not keep_other_dwarf_files:
        _drop_other_dwarf_files(staged)
    build = os.path.join(staging, uuid_hex(uuid))
    os.mkdir(build)  # in the staging folder, which exists
    final = entries.entry_dir(cache, uuid)
    # A bundle made here around a bare DWARF file has no plists of its own to read.
    own = staged.bundle_dir is not None
    with atomic.StagedFiles() as written:
        bundle_dir = _assemble(build, uuid, staged, written)
        final_bundle = os.path.join(final, os.path.basename(bundle_dir))
        final_dwarf = os.path.join(
            final_bundle, bundle.DWARF_SUBDIR, os.path.basename(staged.dwarf_path)
        )
        plists = (final_dwarf, downloaded_from, plist_values or {})
        _write_uuid_plists(bundle_dir, staged.slices, *plists, written, own_values=own)
        # Durability: every file is on disk before the rename names it, as
        # docs/cache-format.md promises (`_assemble` adopted those written before).
        written.sync()
    doors = doors or Doors(cache)
    if not doors.rename_into(build, final) or keep_other_dwarf_files:
        return link_entry(cache, final)  # another run's entry, or more DWARF files than ours
    # Ours, in a private folder that only this user may write: it holds the one file just
    # verified, whose slices are known, so nothing needs listing or reading again.
    return link_uuids(cache, _dsym_uuids(staged.slices), final_dwarf, doors.tree)[0]


def admit_executable(
    cache: CachePaths, uuid: str, staged: Staged, staging: str, doors: Doors | None = None
) -> str:
    """Move a verified executable into `executables/<HEX>/<its name>`; returns its entry.
    When another run admitted it first, that entry stays and ours is dropped."""
    build = os.path.join(staging, "executable")
    os.makedirs(build)
    os.rename(staged.dwarf_path, os.path.join(build, staged.file_name(uuid)))
    final = cache.executable_entry(uuid_hex(uuid))
    (doors or Doors(cache)).rename_into(build, final)
    return final


class Doors:
    """The one door into the cache's entries, and what admissions share: descriptors of
    the top-level folders entries are renamed into, opened once from the checked root, and
    one writer of the UUID tree. A batch (fetch/batch.py) keeps one for all its downloads,
    which spares each the root's check and the opens (its folders stay private to this
    user meanwhile, as the batch's one check of the root assumes); a single run makes its
    own. Shared by threads; `close` once no admission is under way."""

    def __init__(self, cache: CachePaths) -> None:
        import threading

        self.cache = cache
        self.tree = tree.TreeWriter(cache.uuids)
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self._stale: list[int] = []
        self._keep = False

    def shared(self) -> Doors:
        """These doors, kept open across admissions until `close`."""
        self._keep = True
        return self

    def close(self) -> None:
        with self._lock:
            opened, self._open, self._stale = [*self._open.values(), *self._stale], {}, []
        for fd in opened:
            os.close(fd)

    def rename_into(self, build: str, final: str) -> bool:
        """`build` renamed to `final` (in a top-level folder of the cache) in one step,
        unless another run's entry is there already; whether ours took the name.

        Renamed into a descriptor of that folder, opened from a checked root without
        following a link: no folder swapped in on the way between the check and the
        rename can receive it."""
        try:
            return self._renamed(build, final)
        finally:
            if not self._keep:
                self.close()

    def _renamed(self, build: str, final: str) -> bool:
        top_name, name = os.path.basename(os.path.dirname(final)), os.path.basename(final)
        top = self._folder(top_name)
        try:
            try:
                os.rename(build, name, dst_dir_fd=top)
            except FileNotFoundError:
                if not self._keep or not os.path.exists(build):
                    raise
                # The folder behind a kept descriptor was removed meanwhile: opened anew.
                top = self._folder(top_name, stale=top)
                os.rename(build, name, dst_dir_fd=top)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:  # a folder renamed over what is no folder
                _refuse_planted_link(final, name, top)
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            shutil.rmtree(build, ignore_errors=True)  # another run admitted first: keep theirs
            return False
        # Durability: the entry's name is on disk before its tree links and answer name it,
        # and before the record says done. A failed fsync only loses that: it is in place.
        with contextlib.suppress(OSError):
            os.fsync(top)
        return True

    def _folder(self, name: str, *, stale: int | None = None) -> int:
        """The descriptor of the top-level folder `name`; a new one when it is `stale`
        (which stays open until `close`: another thread may be renaming into it)."""
        with self._lock:
            fd = self._open.get(name)
            if fd is None or fd == stale:
                if fd is not None:
                    self._stale.append(fd)
                fd = self._open[name] = permissions.open_own_folder(self.cache.root, name)
            return fd


def _refuse_planted_link(final: str, name: str, folder: int) -> None:
    """A symlink under the entry's final name, which the rename refused (ENOTDIR), would
    make link_entry follow it: refused, with the fix, like every symlink where the cache
    keeps a folder. Asked only then: the rename's error answers the common case."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        problem = permissions.own_folder_problem(final)
        raise permissions.refusal(problem or (f"{final} is a symlink", "remove it"))


def link_entry(cache: CachePaths, final: str) -> list[str]:
    """(Re)create the file-mapped links of a admitted entry; returns the UUIDs linked.

    An entry that is a symlink, or a folder another user owns or may write, is refused:
    linking it would admit whatever it leads to.
    """
    problem = permissions.own_folder_problem(final)
    if problem is not None:
        raise permissions.refusal(problem)
    linked = []
    for bundle_dir in entries.bundles_in(final):
        # A shadow's DWARF file is a symlink to a user's (shadow.py); the cache makes no
        # other symlinks (apple/unpack.py refuses them), so following these is safe.
        for dwarf_path in bundle.dwarf_files(bundle_dir, follow_symlinks=True):
            # A conflict: the tree maps the UUID to another good copy already.
            linked += link_uuids(cache, _uuids(dwarf_path), dwarf_path)[0]
    return linked


def link_uuids(
    cache: CachePaths,
    uuids: list[str],
    dwarf_path: str,
    writer: tree.TreeWriter | None = None,
) -> tuple[list[str], list[tree.LinkConflict]]:
    """Map each UUID to `dwarf_path` in the cache's tree: those linked, and the conflicts.
    A run linking many files passes its one `writer`, so siblings share their folders."""
    writer = writer or tree.TreeWriter(cache.uuids)
    linked, conflicts = [], []
    for uuid in uuids:
        try:
            writer.link(uuid, dwarf_path)
        except tree.LinkConflict as conflict:
            conflicts.append(conflict)
            continue
        linked.append(uuid)
    return linked, conflicts


def _drop_other_dwarf_files(staged: Staged) -> None:
    """Leave only the verified file in the staged bundle's DWARF folder.

    A server's zip may hold more DWARF files than the one asked for. Admitted, each would
    be linked (now, or when link_entry relinks the entry): UUIDs nobody asked for, answered
    from a file nobody verified, and never asked of a server again.
    """
    if staged.bundle_dir is None:
        return
    keep = os.path.normpath(staged.dwarf_path)
    with os.scandir(os.path.join(staged.bundle_dir, bundle.DWARF_SUBDIR)) as found:
        others = [e for e in found if os.path.normpath(e.path) != keep]
    for entry in others:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _assemble(build: str, uuid: str, staged: Staged, written: atomic.StagedFiles) -> str:
    """The bundle inside `build`: the downloaded one, or one made around a bare DWARF file."""
    if staged.bundle_dir is not None:
        target = os.path.join(build, _canonical_name(os.path.basename(staged.bundle_dir)))
        os.rename(staged.bundle_dir, target)
        staged.dwarf_path = os.path.join(
            target, os.path.relpath(staged.dwarf_path, staged.bundle_dir)
        )
        # Unpacked from an archive (apple/unpack.py), which fsyncs nothing: only the
        # archive was synced as it arrived.
        for folder, _, names in os.walk(target):
            for name in names:
                path = os.path.join(folder, name)
                if stat.S_ISREG(os.lstat(path).st_mode):
                    written.adopt(path)
        return target
    name = staged.file_name(uuid)
    target = os.path.join(build, staged.bundle_name or name + DSYM_EXTENSION)
    # Top-down in `build`, just made: one mkdir a level, with none of makedirs' probes.
    folder = target
    os.mkdir(folder)
    for level in bundle.DWARF_SUBDIR.split(os.sep):
        folder = os.path.join(folder, level)
        os.mkdir(folder)
    dwarf_path = os.path.join(folder, name)
    os.rename(staged.dwarf_path, dwarf_path)
    staged.dwarf_path = dwarf_path
    # A body is synced as it arrives (stores/body.py), an unpacked one (a .gz) is not: an
    # fsync of a file already synced costs next to nothing.
    written.adopt(dwarf_path)
    info_plist = os.path.join(target, "Contents", "Info.plist")
    written.write(info_plist, _info_plist(name))
    return target


def _canonical_name(name: str) -> str:
    """The bundle's name ending in `.dSYM`, as DebugSymbols, lldb and bundle_of spell it.

    A server may send `hello.DSYM` (unpack.py finds bundles as APFS compares names), but on
    a case-sensitive volume only `.dSYM` makes a bundle for them. A name without any such
    extension (none is staged today) gets one rather than being admitted unfindable.
    """
    stem, extension = os.path.splitext(name)
    return (stem if extension.casefold() == DSYM_EXTENSION.casefold() else name) + DSYM_EXTENSION


def _info_plist(name: str) -> bytes:
    return plistlib.dumps(
        {
            "CFBundleDevelopmentRegion": "English",
            "CFBundleIdentifier": f"com.apple.xcode.dsym.{name}",
            "CFBundleInfoDictionaryVersion": "6.0",
            "CFBundlePackageType": "dSYM",
            "CFBundleSignature": "????",
            "CFBundleShortVersionString": "1.0",
            "CFBundleVersion": "1",
        }
    )


def _write_uuid_plists(
    bundle_dir: str,
    slices: list[macho.Slice],
    final_dwarf: str,
    downloaded_from: str,
    extra: Mapping[str, object],
    written: atomic.StagedFiles,
    *,
    own_values: bool,
) -> None:
    """Per-UUID plists for DebugSymbols: the bundle's own values (`own_values`: it may have
    some) over our defaults, `extra` over both, and always the DWARF path the entry will
    have. Written in the staging folder, which takes its final name whole."""
    for piece in slices:
        if piece.uuid is None:
            continue
        existing = bundle.read_uuid_plist(bundle_dir, piece.uuid) if own_values else {}
        values: dict[str, object] = {
            debugsymbols.ARCHITECTURE: piece.arch,
            debugsymbols.DSYM_PATH: final_dwarf,
            debugsymbols.VERSION: "3",
            debugsymbols.DOWNLOADED_FROM: downloaded_from,
        }
        values.update(existing)
        values.update(extra)
        named = values.get(debugsymbols.SYMBOL_RICH_EXECUTABLE)
        if named is not None and not (
            isinstance(named, str) and os.path.isabs(named) and os.path.exists(named)
        ):
            # The build machine's executable, say: no plist of ours names a missing file.
            del values[debugsymbols.SYMBOL_RICH_EXECUTABLE]
        values[debugsymbols.DSYM_PATH] = final_dwarf
        path = bundle.uuid_plist_path(bundle_dir, piece.uuid)
        written.write(path, plistlib.dumps(values, fmt=plistlib.FMT_XML))


def set_rich_executable(bundle_dir: str, uuid: str, executable: str) -> None:
    """Name a fetched executable in the per-UUID plist of a bundle the cache owns.

    Never a user's bundle: one of those gets a shadow entry to carry it (shadow.py).
    """
    values = bundle.read_uuid_plist(bundle_dir, uuid)
    values[debugsymbols.SYMBOL_RICH_EXECUTABLE] = executable
    atomic.write_bytes(bundle.uuid_plist_path(bundle_dir, uuid), plistlib.dumps(values))


def rich_executable(bundle_dir: str, uuid: str) -> str | None:
    """The executable a bundle's per-UUID plist names, if any."""
    named = bundle.read_uuid_plist(bundle_dir, uuid).get(debugsymbols.SYMBOL_RICH_EXECUTABLE)
    return named if isinstance(named, str) else None


def drop_rich_executable(bundle_dir: str, uuid: str) -> None:
    """Unname the executable in a cache bundle's per-UUID plist (under the locks of the
    UUID and of the entry holding the bundle): DebugSymbols reads it there directly."""
    values = bundle.read_uuid_plist(bundle_dir, uuid)
    if values.pop(debugsymbols.SYMBOL_RICH_EXECUTABLE, None) is not None:
        atomic.write_bytes(bundle.uuid_plist_path(bundle_dir, uuid), plistlib.dumps(values))


def _uuids(dwarf_path: str) -> list[str]:
    try:
        return _dsym_uuids(macho.read_slices(dwarf_path))
    except macho.MachOError:
        return []


def _dsym_uuids(slices: list[macho.Slice]) -> list[str]:
    return [str(s.uuid) for s in entries.dsym_slices(slices)]
