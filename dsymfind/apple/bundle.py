"""dSYM bundles: where the DWARF file sits, what the per-UUID plists say, the answer for a UUID.

A bundle is `X.dSYM/Contents/Resources/DWARF/<name>`, with optional
`Contents/Resources/<UUID>.plist` files that LLDB and DebugSymbols read
(docs/helper-contract.md).
"""

from __future__ import annotations

import os

from dsymfind import debugsymbols
from dsymfind.atomic import read_small_file as read_small_file  # re-exported for readers

# Imported where needed: a search-path refresh lists bundles through this module on the
# helper's negative path, where plistlib and the Mach-O reader would cost 18 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.apple import macho
    from dsymfind.debugsymbols import Answer

DWARF_SUBDIR = os.path.join("Contents", "Resources", "DWARF")
RESOURCES_SUBDIR = os.path.join("Contents", "Resources")
# Bigger than any real per-UUID plist; a bound so a hostile bundle cannot make us read gigabytes.
MAX_UUID_PLIST_BYTES = 1 << 20


def bundle_of(dwarf_path: str) -> str | None:
    """The `.dSYM` bundle holding a DWARF file, if it sits where bundles put it."""
    resources_dwarf = os.path.dirname(dwarf_path)
    bundle = os.path.dirname(os.path.dirname(os.path.dirname(resources_dwarf)))
    if bundle.endswith(".dSYM") and os.path.join(bundle, DWARF_SUBDIR) == resources_dwarf:
        return bundle
    return None


def dwarf_files(bundle: str, *, follow_symlinks: bool = False) -> list[str]:
    """The regular files in a bundle's DWARF folder (normally one).

    `follow_symlinks` counts a symlink to a regular file too: only for the cache's own
    bundles, where a shadow's DWARF file is a symlink to a user's (cache/shadow.py); a symlink
    in a bundle that is not ours may lead anywhere.
    """
    folder = os.path.join(bundle, DWARF_SUBDIR)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    return sorted(e.path for e in entries if _is_regular(e, follow_symlinks))


def _is_regular(entry: os.DirEntry[str], follow_symlinks: bool) -> bool:
    try:
        return entry.is_file(follow_symlinks=follow_symlinks)
    except OSError:
        return False


def uuid_plist_path(bundle: str, uuid: str) -> str:
    return os.path.join(bundle, RESOURCES_SUBDIR, f"{uuid}.plist")


def read_uuid_plist(bundle: str, uuid: str) -> dict[str, object]:
    """The bundle's per-UUID plist (XML or binary); empty when missing or unusable.

    DebugSymbols ignores a per-UUID plist it cannot read, and so does every reader here:
    the dSYM is still answered, admitted or indexed, without what the plist would add."""
    from dsymfind.apple import plists

    try:
        found = uuid_plist_data(bundle, uuid)
    except (OSError, plists.UnreadablePlist):
        return {}
    return {} if found is None else found[1]


def uuid_plist_data(bundle: str, uuid: str) -> tuple[bytes, dict[str, object]] | None:
    """The bytes and values of the bundle's per-UUID plist; None when it has none.
    OSError when it cannot be read, plists.UnreadablePlist (naming it) when it is not a
    plist dictionary."""
    from dsymfind.apple import plists

    path = uuid_plist_path(bundle, uuid)
    try:
        data = read_small_file(path, MAX_UUID_PLIST_BYTES + 1)
    except FileNotFoundError:
        return None
    try:
        if len(data) > MAX_UUID_PLIST_BYTES:
            raise plists.UnreadablePlist(f"over {MAX_UUID_PLIST_BYTES} bytes")
        return data, plists.loads_dict(data)
    except plists.UnreadablePlist as exc:
        raise plists.UnreadablePlist(exc.reason, where=path) from None


def answer_for(dwarf_path: str, uuid: str, found: macho.Slice) -> tuple[Answer, list[str]]:
    """The helper's answer for a verified DWARF file, and the extra files it was read from."""
    answer: Answer = {debugsymbols.DSYM_PATH: dwarf_path, debugsymbols.ARCHITECTURE: found.arch}
    bundle = bundle_of(dwarf_path)
    inputs: list[str] = []
    if bundle is not None:
        inputs.append(uuid_plist_path(bundle, uuid))
        info = read_uuid_plist(bundle, uuid)
        _add_source_mapping(answer, info)
        executable = _rich_executable(bundle, uuid, info)
        if executable is not None:
            answer[debugsymbols.SYMBOL_RICH_EXECUTABLE] = executable
    return answer, inputs


def _add_source_mapping(answer: Answer, info: dict[str, object]) -> None:
    build, local = info.get(debugsymbols.BUILD_SOURCE_PATH), info.get(debugsymbols.SOURCE_PATH)
    if isinstance(build, str) and isinstance(local, str) and os.path.isdir(local):
        answer[debugsymbols.BUILD_SOURCE_PATH] = build
        answer[debugsymbols.SOURCE_PATH] = local


def _rich_executable(bundle: str, uuid: str, info: dict[str, object]) -> str | None:
    named = info.get(debugsymbols.SYMBOL_RICH_EXECUTABLE)
    candidates = [named] if isinstance(named, str) else []
    candidates += executable_candidates(bundle)
    for candidate in candidates:
        if os.path.isabs(candidate) and verified_slice(candidate, uuid) is not None:
            return candidate
    return None


def executable_candidates(bundle: str) -> list[str]:
    """Where an executable sits beside its dSYM: `foo.dSYM` by `foo`, `X.app`, `X.framework`."""
    product = bundle[: -len(".dSYM")]
    stem, ext = os.path.splitext(os.path.basename(product))
    if ext == ".app":
        return [os.path.join(product, "Contents", "MacOS", stem), os.path.join(product, stem)]
    if ext == ".framework":
        return [os.path.join(product, stem), os.path.join(product, "Versions", "A", stem)]
    if ext in (".appex", ".xpc", ".bundle", ".plugin"):
        return [os.path.join(product, "Contents", "MacOS", stem), os.path.join(product, stem)]
    return [product]


def verified_slice(path: str, uuid: str) -> macho.Slice | None:
    """The slice of `path` carrying `uuid`, or None when the file is not that Mach-O."""
    from dsymfind.apple import macho

    try:
        return macho.slice_for_uuid(macho.read_slices(path), uuid)
    except macho.MachOError:
        return None
