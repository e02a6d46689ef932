"""Symbol-server layouts: the relative path under which each layout stores a file.

See docs/symbol-stores.md. A bare UUID (all DebugSymbols passes) addresses the
dSYM in every layout here; the executable needs its file name in the symstore family.
Each layout is one `Layout` record, found by name in BY_NAME: adding one is a record and
a line there. Plain classes and functions, no typing at run time: the downloader loads
this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsymfind.uuids import tree_parts, uuid_hex

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal

    from dsymfind.stores.base import Server

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
CASINGS = ("default", "lower", "upper")
# symbolicator's spellings of the same casings, accepted in the configuration.
CASING_ALIASES = {"lowercase": "lower", "uppercase": "upper"}
# Symstore names a dSYM's DWARF by this placeholder, not by the product's name.
_DWARF_NAME = "_.dwarf"
# Where the metadata of a file is kept (metadata_key).
_UNIFIED_META = "meta"
_META_SUFFIX = ".meta"


class Layout:
    """One layout: the keys it gives what a UUID names, and whether `publish` writes it."""

    __slots__ = ("default", "dwarf", "executable", "metadata", "name", "publishable", "store_key")

    # Its spelling in config.toml, DSYMFIND_SERVERS and --layout.
    name: str
    # The key of a dSYM's DWARF file, from its UUID; None when the server's `template`
    # makes the keys (URL patterns, not paths).
    dwarf: Callable[[str], str] | None
    # The key of an executable, from its UUID and file name (when known); the function
    # gives None when the layout needs a name it lacks. None: no executable is asked for.
    executable: Callable[[str, str | None], str | None] | None
    # The key of the metadata (stores/meta.py) of the file at a cased key, in that casing.
    metadata: Callable[[str, str], str]
    # How a symbol-store key `<name>/<ID>/<name>` is filed (PE and PDB files, and the
    # symstore family's Mach-O keys).
    store_key: Callable[[str], str]
    # `publish` writes it: a bare identity decides its keys, and nothing but files serves it.
    publishable: bool
    # What `publish` writes to a destination whose kind of store names no layout of its own
    # (a kind's DEFAULT_LAYOUT, stores/__init__.py, comes first).
    default: bool

    def __init__(
        self,
        name: str,
        dwarf: Callable[[str], str] | None,
        executable: Callable[[str, str | None], str | None] | None,
        *,
        metadata: Callable[[str, str], str] | None = None,
        store_key: Callable[[str], str] | None = None,
        publishable: bool = True,
        default: bool = False,
    ) -> None:
        self.name, self.dwarf, self.executable = name, dwarf, executable
        self.metadata = metadata or _meta_beside
        self.store_key = store_key or _one_tier
        self.publishable, self.default = publishable, default

    def __repr__(self) -> str:
        return f"Layout({self.name!r})"


def _meta_beside(key: str, casing: str) -> str:
    """`<key>.meta` beside the file (as a DWARF file's `<key>.plist`)."""
    return key + apply_casing(_META_SUFFIX, casing)


def _meta_of_folder(key: str, casing: str) -> str:
    """symsorter's `meta`, one per folder: a UUID's dSYM and executable share it."""
    folder, _, _ = key.rpartition("/")
    return f"{folder}/{apply_casing(_UNIFIED_META, casing)}"


def _one_tier(key: str) -> str:
    return key


def _two_tier(key: str) -> str:
    return f"{index2_prefix(key)}/{key}"


def _lowercased(key: str) -> str:
    return key.lower()


def _lower_hex(uuid: str) -> str:
    return uuid_hex(uuid).lower()


def _tree(uuid: str) -> str:
    return "/".join(tree_parts(uuid))


def _tree_app(uuid: str, _name: str | None) -> str:
    return _tree(uuid) + ".app"


def _unified(uuid: str) -> str:
    lower = _lower_hex(uuid)
    return f"{lower[:2]}/{lower[2:]}/debuginfo"


def _unified_executable(uuid: str, _name: str | None) -> str:
    lower = _lower_hex(uuid)
    return f"{lower[:2]}/{lower[2:]}/executable"


def _build_id(uuid: str) -> str:
    return f"buildid/{_lower_hex(uuid)}/debuginfo"


def _build_id_executable(uuid: str, _name: str | None) -> str:
    return f"buildid/{_lower_hex(uuid)}/executable"


def _symstore(name: str, store_key: Callable[[str], str]) -> Layout:
    """A symstore-style layout: one-tier keys as `store_key` files them."""

    def dwarf(uuid: str) -> str:
        return store_key(f"{_DWARF_NAME}/mach-uuid-sym-{_lower_hex(uuid)}/{_DWARF_NAME}")

    def executable(uuid: str, file_name: str | None) -> str | None:
        if not file_name or "/" in file_name:
            return None
        return store_key(f"{file_name}/mach-uuid-{_lower_hex(uuid)}/{file_name}")

    return Layout(name, dwarf, executable, store_key=store_key)


BY_NAME: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout(NATIVE, _tree, _tree_app),
        _symstore(SYMSTORE, _one_tier),
        _symstore(SYMSTORE_INDEX2, _two_tier),
        _symstore(SSQP, _lowercased),
        Layout(UNIFIED, _unified, _unified_executable, metadata=_meta_of_folder, default=True),
        # llvm-debuginfod and elfutils serve by build ID, a Mach-O's being its UUID, from
        # their own index of files rather than a store laid out so.
        Layout(DEBUGINFOD, _build_id, _build_id_executable, publishable=False),
        # Keys are the server's URL pattern: nothing could be written to them predictably.
        Layout(TEMPLATE, None, None, publishable=False),
    )
}
LAYOUTS = tuple(BY_NAME)
# Layouts `dsymfind publish` writes.
PUBLISHABLE = tuple(name for name, layout in BY_NAME.items() if layout.publishable)
# Layouts whose keys a bare identity decides (`dsymfind id` shows them).
IDENTITY_KEYED = tuple(name for name, layout in BY_NAME.items() if layout.dwarf is not None)
# What `publish` writes when neither --layout nor the destination's kind names a layout.
DEFAULT = next(name for name, layout in BY_NAME.items() if layout.default)


def server_key(server: Server, uuid: str, want: Want) -> str | None:
    """Where a configured server keeps what is wanted; None when its layout cannot say.

    A `template` server's key is a URL reference (relative to its URL, or absolute)."""
    layout = BY_NAME[server["layout"]]
    if layout.dwarf is None:
        return expand_template(server["template"], uuid) if want == DSYM else None
    key = layout.dwarf(uuid) if want == DSYM else executable_key(layout.name, uuid, None)
    return None if key is None else apply_casing(key, server["casing"])


def debug_file_key(layout: str, uuid: str) -> str:
    """Where `layout` keeps the dSYM's DWARF file for `uuid`."""
    dwarf = BY_NAME[layout].dwarf
    if dwarf is None:
        raise ValueError(f"the {layout!r} layout's keys come from its server's template")
    return dwarf(uuid)


def executable_key(layout: str, uuid: str, name: str | None) -> str | None:
    """Where `layout` keeps the executable; None when the layout needs a name we lack."""
    executable = BY_NAME[layout].executable
    return None if executable is None else executable(uuid, name)


def metadata_key(layout: str, key: str, casing: str) -> str | None:
    """Where `layout` keeps the metadata (stores/meta.py) of the file at `key`: symsorter's
    `meta`, one per folder, in the unified layout; `<key>.meta` beside the file elsewhere
    (as a DWARF file's `<key>.plist`). None for `template` keys, which are URL patterns."""
    record = BY_NAME[layout]
    templated = record.dwarf is None
    return None if templated else record.metadata(key, casing)


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
