"""The cache's own entries: `dsyms/<UUIDHEX>` bundles and `executables/<UUIDHEX>` files.

Where an entry lives, which bundle in it answers, and whether it is valid: a complete
bundle whose DWARF file carries the UUID it is named by (shadows: whose link still
leads to a file of that UUID). Judging validity is header-sized work (the Mach-O reader).
"""

from __future__ import annotations

import os

from dsymfind import debugsymbols
from dsymfind.apple import bundle, macho
from dsymfind.cache import shadow
from dsymfind.cache.tree import HEX_DIGITS, HEX_LENGTH
from dsymfind.paths import CachePaths
from dsymfind.uuids import dashed, uuid_hex


def hex_folders(folder: str) -> list[str]:
    """The entries the cache named by a UUID; anything else there is not ours to judge."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        os.path.join(folder, n)
        for n in names
        if len(n) == HEX_LENGTH
        and HEX_DIGITS.issuperset(n)
        and os.path.isdir(os.path.join(folder, n))
    )


def mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def entry_dir(cache: CachePaths, uuid: str) -> str:
    return cache.entry(uuid_hex(uuid))


def cache_bundle(cache: CachePaths, dwarf_path: str) -> str | None:
    """The bundle holding `dwarf_path` when it is one of the cache's entries, else None."""
    bundle_dir = bundle.bundle_of(dwarf_path)
    if bundle_dir is None:
        return None
    entry = os.path.realpath(os.path.dirname(bundle_dir))
    owned = os.path.dirname(entry) == os.path.realpath(cache.dsyms)
    return bundle_dir if owned else None


def entry_bundle(entry: str) -> str | None:
    """The one bundle of a admitted entry, or None when it has not exactly one."""
    bundles = bundles_in(entry)
    return bundles[0] if len(bundles) == 1 else None


def bundles_in(final: str) -> list[str]:
    try:
        names = sorted(os.listdir(final))
    except OSError:
        return []
    return [os.path.join(final, n) for n in names if n.endswith(".dSYM")]


def entry_uuids(entry: str) -> list[str]:
    """The UUIDs of the dSYM slices an entry's DWARF files carry: those its links stand for
    (cache/place.py links each one); none for what does not read."""
    found = []
    for bundle_dir in bundles_in(entry):
        for path in bundle.dwarf_files(bundle_dir, follow_symlinks=True):
            try:
                found += [str(s.uuid) for s in dsym_slices(macho.read_slices(path))]
            except macho.MachOError:
                continue
    return found


def dsym_slices(slices: list[macho.Slice]) -> list[macho.Slice]:
    """The slices a DWARF file may be linked under: its dSYM slices with a UUID."""
    return [s for s in slices if s.uuid is not None and s.filetype_name == "MH_DSYM"]


def dsym_entry_problem(entry: str) -> str | None:
    """Why a dsyms/<HEX> entry is not a complete bundle of its UUID; None when it is."""
    return dsym_problem(entry)[0]


def dsym_problem(entry: str) -> tuple[str | None, list[str]]:
    """Why a dsyms/<HEX> entry is not a complete bundle of its UUID, and its dSYM UUIDs."""
    orphan = shadow.orphan_reason(entry)
    if orphan is not None:
        return orphan, []
    bundles = bundles_in(entry)
    if len(bundles) != 1:
        return f"holds {len(bundles)} dSYM bundles, not one", []
    dwarf = bundle.dwarf_files(bundles[0], follow_symlinks=True)
    if not dwarf:
        return "its bundle has no DWARF file", []
    uuids: list[str] = []
    for path in dwarf:
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            return str(exc), []
        uuids += [s.uuid for s in slices if s.uuid and s.filetype_name == "MH_DSYM"]
    wanted = dashed(os.path.basename(entry))
    if wanted not in uuids:
        return f"holds no dSYM of {wanted}", []
    for uuid in uuids:
        info = bundle.read_uuid_plist(bundles[0], uuid)
        named = info.get(debugsymbols.DSYM_PATH)
        if isinstance(named, str) and not os.path.exists(named):
            return f"its {uuid}.plist names {named}, which does not exist", []
    return None, uuids


def executable_file(entry: str) -> str | None:
    """The file of an `executables/<HEX>` entry: its only name, the executable's own or
    its UUID (stores/meta.py); None when the entry holds anything but one regular file."""
    try:
        with os.scandir(entry) as found:
            names = list(found)
    except OSError:
        return None
    if len(names) != 1 or not names[0].is_file(follow_symlinks=False):
        return None
    return names[0].path


def exists(path: str) -> bool:
    """Whether a path a plist names exists; a relative one names nothing DebugSymbols finds."""
    return os.path.isabs(path) and os.path.exists(path)
