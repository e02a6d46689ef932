"""DebugSymbols' vocabulary, and which paths an answer may carry.

The keys of the helper's answers and of its preferences: docs/helper-contract.md says who
reads each key. Then where the files an answer names may lie: an answer is only as
trustworthy as the folders it was made in, and one remembered while another user could
swap the cache's folders names their dSYM with every stamp valid. So the dSYM and
executable an answer names must lie in the cache (in an entry that is a real folder of
ours), below the search path it came from (its origin), or be the very file its tree entry
(the cache's, in folders of the cache's own, or a configured file-mapped tree's) leads to,
with the executable beside that dSYM's bundle. `DBGSourcePath` names the user's source
checkout, read by lldb as text, and is not confined.

Imported on the helper's hot path: built-ins and the hot path's own modules only.
"""

import _stat  # built in: the stat module is Python, and os loads it

from dsymfind import _bare_os, permissions
from dsymfind.paths import TREE_FOLDER_LEVELS, CachePaths
from dsymfind.uuids import tree_entry, uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    Answer = dict[str, str]

# The per-UUID dictionary the helper prints (and a dSYM's per-UUID plist holds).
DSYM_PATH = "DBGDSYMPath"
SYMBOL_RICH_EXECUTABLE = "DBGSymbolRichExecutable"
ARCHITECTURE = "DBGArchitecture"
BUILD_SOURCE_PATH = "DBGBuildSourcePath"
SOURCE_PATH = "DBGSourcePath"
SOURCE_PATH_REMAPPING = "DBGSourcePathRemapping"
ERROR = "DBGError"
# Written into the cache's own per-UUID plists: where a download came from, and the format.
DOWNLOADED_FROM = "DBGDownloadedFrom"
VERSION = "DBGVersion"
# dsymfind's own too: where and at which commit the build was made (vcs/provenance.py).
SOURCE_CONTROL = "DBGSourceControl"

# The com.apple.DebugSymbols preferences.
SHELL_COMMANDS = "DBGShellCommands"
FILE_MAPPED_PATHS = "DBGFileMappedPaths"
SEARCH_PATHS = "DBGSearchPaths"
SPOTLIGHT_PATHS = "DBGSpotlightPaths"

# The answer's values that name local files; DBGBuildSourcePath names the build machine's.
LOCAL_PATH_KEYS = (DSYM_PATH, SYMBOL_RICH_EXECUTABLE, SOURCE_PATH)

# Where an answer came from, its origin (local_lookup.py makes them; a remembered answer's
# record keeps it).
CACHE_ORIGIN = "cache"
TREE_ORIGIN_PREFIX = "file-mapped tree "
SEARCH_ORIGIN_PREFIX = "search path "
# Apple's own images `dsymfind index` recorded (cache/systems.py): no dSYM, the image's
# symbol table names its frames.
SYSTEM_ORIGIN = "system images"
# The cache's folders of entries, the only places it keeps a dSYM or an executable.
_ENTRY_FOLDERS = (CachePaths("").dsyms, CachePaths("").executables)
# The real path of each cache root an answer was checked against, once per process.
_REAL_ROOTS: dict[str, str] = {}


def misplaced(
    answer: "Answer",
    origin: str,
    *,
    uuid: str | None,
    cache_root: str | None,
    seen: "Mapping[str, _bare_os.stat_result | None] | None" = None,
) -> str | None:
    """Why a remembered answer names a dSYM or executable outside the cache and its origin
    (with the fix, where there is one); None when every such path lies where it may.

    A handful of stats at most: an lstat of the cache entry a path lies in; for a user's
    bundle the cache's tree links to, a readlink, the tree's five folders and two stats.
    """
    if origin == SYSTEM_ORIGIN:
        return _system_image_problem(answer, uuid, cache_root, seen or {})
    dsym = answer.get(DSYM_PATH)
    if not isinstance(dsym, str):
        return "names no dSYM"
    problem = dsym_misplaced(dsym, origin, uuid=uuid, cache_root=cache_root, seen=seen)
    if problem is not None:
        return problem
    executable = answer.get(SYMBOL_RICH_EXECUTABLE)
    if executable is None:
        return None
    if not isinstance(executable, str) or not _plain(executable):
        return f"names the executable {executable!r}, which is not a plain absolute path"
    inside = _cache_root_holding(executable, cache_root)
    if inside is not None:
        return _entry_problem(executable, inside)
    if _under(executable, _search_root(origin)) or _under(executable, _beside_bundle(dsym)):
        return None
    return f"names the executable {executable}, outside the cache and its source"


def dsym_misplaced(
    dsym: str,
    origin: str,
    *,
    uuid: str | None,
    cache_root: str | None,
    seen: "Mapping[str, _bare_os.stat_result | None] | None" = None,
) -> str | None:
    """Why the dSYM an answer names lies outside the cache and the answer's origin; None
    when it lies in the cache, below its search path, or is what its tree entry leads to.

    local_lookup.py asks this of every answer it builds too: a tree entry of the cache
    that reaches out of it through a symlink is refused there, with this reason.
    """
    if not _plain(dsym):
        return f"names {dsym!r}, which is not a plain absolute path"
    inside = _cache_root_holding(dsym, cache_root)
    if inside is not None:
        return _entry_problem(dsym, inside)
    search_root = _search_root(origin)
    if search_root is not None:
        return None if _under(dsym, search_root) else _outside(dsym)
    if origin == CACHE_ORIGIN and cache_root is not None:
        tree, own_tree = CachePaths(cache_root).uuids, True
    elif origin.startswith(TREE_ORIGIN_PREFIX):
        tree, own_tree = origin[len(TREE_ORIGIN_PREFIX) :], False
    else:
        return _outside(dsym)
    if uuid is None:
        return _outside(dsym)
    entry = tree_entry(tree, uuid)
    return _tree_target_problem(entry, dsym, cache_root if own_tree else None, seen or {})


def _tree_target_problem(
    entry: str, dsym: str, cache_root: str | None, seen: "Mapping[str, _bare_os.stat_result | None]"
) -> str | None:
    """A dSYM outside the cache is answered through a tree only as what the tree's entry
    leads to. In the cache's own tree (`cache_root` given), that entry is a link of its
    own making, in folders of its own, pointing out of the cache (a user's bundle indexed
    in place): one that points into the cache must answer with a path inside it. `seen`:
    the stats `check` has just made, which need not be made again."""
    if cache_root is not None:
        try:
            named = _bare_os.readlink(entry)
        except OSError:
            return _outside(dsym)
        target = _bare_os.normpath(_bare_os.join(_bare_os.dirname(entry), named))
        if _cache_root_holding(target, cache_root) is not None:
            return f"{entry} leads out of the cache through a symlink inside it, to {dsym}"
        folder = _bare_os.dirname(entry)
        for _ in range(TREE_FOLDER_LEVELS):
            problem = permissions.own_folder_problem(folder)
            if problem is not None:
                return _with_fix(problem)
            folder = _bare_os.dirname(folder)
    led_to = seen[entry] if entry in seen else stat_or_none(entry)
    named_st = seen[dsym] if dsym in seen else stat_or_none(dsym)
    if led_to is None or named_st is None:
        return _outside(dsym)
    if (led_to.st_dev, led_to.st_ino) == (named_st.st_dev, named_st.st_ino):
        return None
    if _stat.S_ISDIR(led_to.st_mode) and _under(dsym, _bare_os.realpath(entry)):
        return None  # the entry names a bundle: its DWARF file
    return _outside(dsym)


def _system_image_problem(
    answer: "Answer",
    uuid: str | None,
    cache_root: str | None,
    seen: "Mapping[str, _bare_os.stat_result | None]",
) -> str | None:
    """A system image's answer names the user's file alone, as the cache's record of the
    UUID (in a folder of the cache's own, checked with the root) named it when the answer
    was built: that record must be among the files stamped with it."""
    executable = answer.get(SYMBOL_RICH_EXECUTABLE)
    if DSYM_PATH in answer or not isinstance(executable, str) or not _plain(executable):
        return f"names {executable!r} as a system image, not one plain absolute path"
    if uuid is None or cache_root is None:
        return f"names the system image {executable}, with no record to answer for it"
    record = CachePaths(cache_root).system_record(uuid_hex(uuid))
    if seen.get(record) is None:
        return f"names the system image {executable}, which {record} no longer records"
    return None


def note_real_root(root: str) -> None:
    """`root` is a cache root's real path, as permissions.refuse_unsafe resolved it: answers
    checked against it need not resolve it again (an lstat per folder on the way)."""
    _REAL_ROOTS[root] = root


def _cache_root_holding(path: str, cache_root: str | None) -> str | None:
    """The spelling of the cache root `path` lies below (as given, or resolved: an answer
    remembered before the cache was reached through its real path)."""
    if cache_root is None:
        return None
    if _under(path, cache_root):
        return cache_root
    real = _REAL_ROOTS.get(cache_root)
    if real is None:
        # An lstat per folder on the way; the folders of a checked cache cannot change.
        real = _REAL_ROOTS[cache_root] = _bare_os.realpath(cache_root)
    return real if _under(path, real) else None


def _entry_problem(path: str, root: str) -> str | None:
    """The cache keeps dSYMs and executables only inside entries (`dsyms/<HEX>`,
    `executables/<HEX>`), and the entry `path` lies in must be a real folder of ours (the
    top-level folder holding it is checked with the cache root, permissions.unsafe): one
    lstat."""
    entry = _entry_holding(path, root)
    if entry is None:
        return f"names {path}, in the cache but in none of its entries"
    problem = permissions.own_folder_problem(entry)
    return None if problem is None else _with_fix(problem)


def _entry_holding(path: str, root: str) -> str | None:
    """The entry folder (`<root>/dsyms/<HEX>`, `<root>/executables/<HEX>`) a path below
    the cache root `root` lies in; None when it lies in none."""
    parts = path[len(root.rstrip(_bare_os.sep)) + 1 :].split(_bare_os.sep)
    if len(parts) < 3 or parts[0] not in _ENTRY_FOLDERS:
        return None
    return _bare_os.join(root, *parts[:2])


def entries_named(answer: "Answer", cache_root: str) -> list[str]:
    """The names (UUID hex) of the cache entries holding a dSYM or an executable that
    `answer` names: what a removal of either would take from under it."""
    found = []
    for key in (DSYM_PATH, SYMBOL_RICH_EXECUTABLE):
        path = answer.get(key)
        root = None if path is None else _cache_root_holding(path, cache_root)
        entry = None if root is None or path is None else _entry_holding(path, root)
        if entry is not None:
            found.append(_bare_os.basename(entry))
    return list(dict.fromkeys(found))


def _search_root(origin: str) -> str | None:
    if origin.startswith(SEARCH_ORIGIN_PREFIX):
        return origin[len(SEARCH_ORIGIN_PREFIX) :]
    return None


def _beside_bundle(dsym: str) -> str | None:
    """The folder holding the bundle of `dsym` (<name>.dSYM/Contents/Resources/DWARF/<file>),
    where an executable is looked for beside it (apple/bundle.py)."""
    bundle = dsym
    for _ in range(4):
        bundle = _bare_os.dirname(bundle)
    return _bare_os.dirname(bundle) if bundle.lower().endswith(".dsym") else None


def _under(path: str, root: str | None) -> bool:
    if root is None:
        return False
    return path.startswith(root.rstrip(_bare_os.sep) + _bare_os.sep)


def _plain(path: str) -> bool:
    """Absolute, and with no `..` or doubled separator to climb out of a folder it is under."""
    return _bare_os.isabs(path) and _bare_os.normpath(path) == path


def _outside(dsym: str) -> str:
    return f"names {dsym}, outside the cache and its configured source"


def _with_fix(problem: tuple[str, str]) -> str:
    return f"{problem[0]} (fix: {problem[1]})"


def stat_or_none(path: str) -> "_bare_os.stat_result | None":
    try:
        return _bare_os.stat(path)
    except OSError:
        return None
