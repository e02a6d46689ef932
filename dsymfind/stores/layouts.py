"""Symbol-server layouts: the relative path under which each layout stores a file.

See docs/symbol-stores.md. A bare UUID (all DebugSymbols passes) addresses the
dSYM in every layout here; the executable needs its file name in the symstore family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsymfind.uuids import tree_parts, uuid_hex

if TYPE_CHECKING:
    from typing import Literal

    from dsymfind.stores.base import Server

    Layout = Literal[
        "native", "symstore", "symstore_index2", "ssqp", "unified", "debuginfod", "template"
    ]
    Casing = Literal["default", "lower", "upper"]
    # What is wanted of a UUID: its dSYM's DWARF file, or (for --copyExecutable) the binary.
    Want = Literal["dsym", "executable"]

DSYM: Want = "dsym"
EXECUTABLE: Want = "executable"

NATIVE, SYMSTORE, SYMSTORE_INDEX2, SSQP, UNIFIED, DEBUGINFOD, TEMPLATE = (
    "native",
    "symstore",
    "symstore_index2",
    "ssqp",
    "unified",
    "debuginfod",
    "template",
)
LAYOUTS = (NATIVE, SYMSTORE, SYMSTORE_INDEX2, SSQP, UNIFIED, DEBUGINFOD, TEMPLATE)
CASINGS = ("default", "lower", "upper")
# symbolicator's spellings of the same casings, accepted in the configuration.
CASING_ALIASES = {"lowercase": "lower", "uppercase": "upper"}
# Symstore names a dSYM's DWARF by this placeholder, not by the product's name.
_DWARF_NAME = "_.dwarf"
# Where the metadata of a file is kept (metadata_key).
_UNIFIED_META = "meta"
_META_SUFFIX = ".meta"


def server_key(server: Server, uuid: str, want: Want) -> str | None:
    """Where a configured server keeps what is wanted; None when its layout cannot say.

    A `template` server's key is a URL reference (relative to its URL, or absolute)."""
    layout = server["layout"]
    if layout == TEMPLATE:
        return expand_template(server["template"], uuid) if want == DSYM else None
    key = debug_file_key(layout, uuid) if want == DSYM else executable_key(layout, uuid, None)
    return None if key is None else apply_casing(key, server["casing"])


def debug_file_key(layout: str, uuid: str) -> str:
    """Where `layout` keeps the dSYM's DWARF file for `uuid`."""
    lower = uuid_hex(uuid).lower()
    if layout == NATIVE:
        return "/".join(tree_parts(uuid))
    if layout == UNIFIED:
        return f"{lower[:2]}/{lower[2:]}/debuginfo"
    if layout == DEBUGINFOD:
        # llvm-debuginfod and elfutils serve by build ID, a Mach-O's being its UUID.
        return f"buildid/{lower}/debuginfo"
    one_tier = f"{_DWARF_NAME}/mach-uuid-sym-{lower}/{_DWARF_NAME}"
    return _symstore_variant(layout, one_tier)


def executable_key(layout: str, uuid: str, name: str | None) -> str | None:
    """Where `layout` keeps the executable; None when the layout needs a name we lack."""
    lower = uuid_hex(uuid).lower()
    if layout == NATIVE:
        return "/".join(tree_parts(uuid)) + ".app"
    if layout == UNIFIED:
        return f"{lower[:2]}/{lower[2:]}/executable"
    if layout == DEBUGINFOD:
        return f"buildid/{lower}/executable"
    if not name or "/" in name:
        return None
    return _symstore_variant(layout, f"{name}/mach-uuid-{lower}/{name}")


def metadata_key(layout: str, key: str, casing: str) -> str | None:
    """Where `layout` keeps the metadata (stores/meta.py) of the file at `key`: symsorter's
    `meta`, one per folder, in the unified layout; `<key>.meta` beside the file elsewhere
    (as a DWARF file's `<key>.plist`). None for `template` keys, which are URL patterns."""
    if layout == TEMPLATE:
        return None
    if layout == UNIFIED:
        folder, _, _ = key.rpartition("/")
        return f"{folder}/{apply_casing(_UNIFIED_META, casing)}"
    return key + apply_casing(_META_SUFFIX, casing)


def _symstore_variant(layout: str, one_tier: str) -> str:
    if layout == SYMSTORE:
        return one_tier
    if layout == SYMSTORE_INDEX2:
        return f"{index2_prefix(one_tier)}/{one_tier}"
    if layout == SSQP:
        return one_tier.lower()
    raise ValueError(f"no symstore-style layout {layout!r}")


def index2_prefix(one_tier: str) -> str:
    """Two-tier stores file everything under its first two characters, or one when the
    second is '/' or '.' (so `_.dwarf/...` lives under `_/`)."""
    return one_tier[:1] if one_tier[1:2] in ("/", ".") else one_tier[:2]


def apply_casing(key: str, casing: str) -> str:
    """Object stores are case-sensitive: a server may need every key in one case."""
    return key.lower() if casing == "lower" else key.upper() if casing == "upper" else key


def expand_template(template: str, uuid: str) -> str:
    """A URL pattern's placeholders: {UUID} {uuid} dashed, {UUIDHEX} {uuidhex} bare."""
    digits = uuid_hex(uuid)
    return (
        template.replace("{UUID}", uuid)
        .replace("{uuid}", uuid.lower())
        .replace("{UUIDHEX}", digits)
        .replace("{uuidhex}", digits.lower())
    )
