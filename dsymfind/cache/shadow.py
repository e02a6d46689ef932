"""Shadow entries: the cache's stand-in for a user's bundle that the cache must not write into.

A shadow is an ordinary entry `<cache>/dsyms/<UUIDHEX>/<name>.dSYM` whose DWARF file is
a symlink to the user's, beside per-UUID plists of the cache's own: source remappings
(`dsymfind index --source-map`) or a fetched executable (`--copyExecutable`). LLDB and
DebugSymbols read those plists next to the DWARF path the UUID tree names, so the tree
names the shadow. Nothing in the user's folders is ever written.
"""

from __future__ import annotations

import os
import plistlib

from dsymfind import atomic
from dsymfind.apple import bundle, macho
from dsymfind.cache.staged import Staged
from dsymfind.paths import CachePaths
from dsymfind.uuids import dashed, uuid_hex


def stage(staging: str, dwarf_path: str, slices: list[macho.Slice]) -> Staged:
    """A shadow of the user's `dwarf_path` in `staging`, ready for place.admit."""
    users_bundle = bundle.bundle_of(dwarf_path)
    name = os.path.basename(users_bundle) if users_bundle else f"{slices[0].uuid}.dSYM"
    shadow = os.path.join(staging, "shadow", name)
    dwarf_dir = os.path.join(shadow, bundle.DWARF_SUBDIR)
    os.makedirs(dwarf_dir)
    link = os.path.join(dwarf_dir, os.path.basename(dwarf_path))
    os.symlink(os.path.abspath(dwarf_path), link)
    if users_bundle is not None:
        _copy_user_plists(users_bundle, shadow, slices)
    return Staged(link, slices, shadow)


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


def target(entry: str) -> str | None:
    """The user's DWARF file a shadow entry stands for, or None when `entry` is no shadow."""
    link = _dwarf_link(entry)
    return None if link is None else os.path.realpath(link)


def standing_in(cache: CachePaths, uuid: str, dwarf_path: str) -> str | None:
    """The DWARF path of the cache's shadow of `dwarf_path` for `uuid`, if there is one.

    An answer names the shadow rather than the user's file, so that LLDB reads the
    shadow's plists (remappings, the fetched executable).
    """
    link = _dwarf_link(cache.entry(uuid_hex(uuid)))
    if link is None or os.path.realpath(link) != os.path.realpath(dwarf_path):
        return None
    return link


def _dwarf_link(entry: str) -> str | None:
    """A shadow entry's DWARF symlink; None when `entry` is no shadow."""
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
                return os.path.join(folder, name)
    return None


def orphan_reason(entry: str) -> str | None:
    """Why a shadow entry stands for nothing any more; None when it does, or is no shadow.

    Its user's file may be gone, or rebuilt in place with another UUID: either way the
    shadow's UUID is nowhere to be found through it.
    """
    user_file = target(entry)
    if user_file is None:
        return None
    if not os.path.exists(user_file):
        return f"stands for {user_file}, which is gone"
    uuid = dashed(os.path.basename(entry))
    if bundle.verified_slice(user_file, uuid) is None:
        return f"stands for {user_file}, which no longer carries {uuid}"
    return None
