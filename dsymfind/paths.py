"""Where things live: all path policy in one place. On the machine, the configuration, the
cache, the log and the state (environment override, then platform: the few lines
platformdirs would give us, without its import cost); inside the cache, every name
(CachePaths), the one owner of the cache's on-disk format: docs/cache-format.md describes
it, this module spells it, and every reader and writer asks it rather than joining names
of its own.

Imported on the helper's hot path: _bare_os, `sys` and `_thread` only.
"""

import _thread  # built in, unlike threading: the hot path writes answers
import sys

from dsymfind import _bare_os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import tempfile
    from collections.abc import Mapping

CONFIG_ENV = "DSYMFIND_CONFIG"
CACHE_DIR_ENV = "DSYMFIND_CACHE_DIR"
# Set in the environment of a chained helper (stores/command.py) while a download runs it:
# dsymfind's own helper reached from there, through any wrapper, would wait for that very
# download, so it answers at once instead (helper.py).
CHAINED_RUN_ENV = "DSYMFIND_CHAINED_RUN"
APP = "dsymfind"


def is_macos() -> bool:
    return sys.platform == "darwin"


def home(env: "Mapping[str, str]") -> str:
    return env.get("HOME") or _bare_os.expanduser("~")


def _xdg(env: "Mapping[str, str]", var: str, fallback: str) -> str:
    value = env.get(var, "")
    return value if _bare_os.isabs(value) else _bare_os.join(home(env), fallback)


def config_file(env: "Mapping[str, str]") -> str:
    if env.get(CONFIG_ENV):
        return _bare_os.abspath(env[CONFIG_ENV])
    if is_macos():
        return _bare_os.join(home(env), "Library", "Application Support", APP, "config.toml")
    return _bare_os.join(_xdg(env, "XDG_CONFIG_HOME", ".config"), APP, "config.toml")


def default_cache_dir(env: "Mapping[str, str]") -> str:
    if is_macos():
        # The location the DebugSymbols documentation uses in its example.
        return _bare_os.join(home(env), "Library", "SymbolCache", APP)
    return _bare_os.join(_xdg(env, "XDG_CACHE_HOME", ".cache"), APP)


def default_log_file(env: "Mapping[str, str]") -> str:
    if is_macos():
        return _bare_os.join(home(env), "Library", "Logs", APP, f"{APP}.log")
    return _bare_os.join(
        _xdg(env, "XDG_STATE_HOME", _bare_os.join(".local", "state")), APP, f"{APP}.log"
    )


def state_dir(env: "Mapping[str, str]") -> str:
    """What dsymfind keeps about the system it changed (install's backup)."""
    if is_macos():
        return _bare_os.join(home(env), "Library", "Application Support", APP)
    return _bare_os.join(_xdg(env, "XDG_STATE_HOME", _bare_os.join(".local", "state")), APP)


def launcher_file(env: "Mapping[str, str]") -> str:
    """The helper `dsymfind install` writes and registers (macos/launcher.py).

    Under the user's home, so install can always write it and tests stay in theirs. Not in
    state_dir on macOS: lldb splits DBGShellCommands on spaces, and "Application Support"
    has one. The XDG state folder (~/.local/state) has none on either platform.
    """
    state = _xdg(env, "XDG_STATE_HOME", _bare_os.join(".local", "state"))
    return _bare_os.join(state, APP, "dsymForUUID")


def launch_agents_dir(env: "Mapping[str, str]") -> str:
    return _bare_os.join(home(env), "Library", "LaunchAgents")


def snapshot_dir(env: "Mapping[str, str]") -> str:
    """Where compiled configuration snapshots go: derived data, so the platform's cache."""
    if is_macos():
        return _bare_os.join(home(env), "Library", "Caches", APP, "config-snapshots")
    # Not inside $XDG_CACHE_HOME/dsymfind: that is the symbol cache, whose size and
    # contents `status`, `gc` and `check` account for.
    return _bare_os.join(state_dir(env), "config-snapshots")


def debugsymbols_prefs(env: "Mapping[str, str]") -> list[str]:
    """The com.apple.DebugSymbols preference files, the user's before the machine's."""
    if not is_macos():
        return []
    name = "com.apple.DebugSymbols.plist"
    return [
        _bare_os.join(home(env), "Library", "Preferences", name),
        f"/Library/Preferences/{name}",
    ]


def short_name(text: str) -> str:
    """A stable file name standing for a path or URL (FNV-1a; hashlib would cost an import)."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


# A file others may read is written as `<name>.<pid>.tmp` beside its final name and
# renamed over it (atomic.py, cache/tree.py): the pid tells a live writer from debris.
TEMP_SUFFIX = ".tmp"
# Staging folders under tmp/: a download's start with its UUID's hex and a dash (only the
# holder of that UUID's lock may clear them); these two belong to gc and index.
REMOVED_PREFIX = "removed-"
INDEX_STAGING_PREFIX = "index-"
# A transfer cut part-way keeps its bytes in `tmp/partial-<HEX>/<h>` (and `<h>.json`, the
# sidecar saying what they are) so the next run for that UUID continues it; only the
# holder of that UUID's lock touches them. `<h>` is the short_name of the candidate's
# redacted location, so no credential is spelt in the name. The folder does not start
# with the UUID's hex: it is not a run's staging, which the next run removes.
PARTIAL_PREFIX = "partial-"
PARTIAL_META_SUFFIX = ".json"
# A sidecar is a few hundred bytes; a larger file there is not one.
PARTIAL_META_MAX = 64 * 1024
_HEX_DIGITS = "0123456789ABCDEF"
# Whatever the helper, the downloader it starts and the cache's keepers create in the
# cache is the user's alone: makedirs() applies its mode to the last folder only, the
# umask to all of them.
PRIVATE_UMASK = 0o077

# SymCache files (symbolicate/symcaches.py): `symcaches/<HEX>.v<format version>`, one per
# dSYM slice, so a new symbolic release with another format builds its own beside it.
SYMCACHE_FOLDER = "symcaches"
SYMCACHE_VERSION_MARK = ".v"

# The negative cache's names (docs/cache-format.md): `negative/<FINGERPRINT>/<HEX>` for a
# dSYM, with this suffix for an executable.
NEGATIVE_EXECUTABLE_SUFFIX = ".executable"
# The cache's UUID tree, as DebugSymbols' file-mapped trees (uuids.tree_parts):
# uuids/XXXX/XXXX/XXXX/XXXX/XXXX/<link>, this many folders between its root and a link.
TREE_FOLDER_LEVELS = 5
# `srv*URL` without a downstream store, and `cache*` without a folder, use this one.
PDB_STORE_FOLDER = "symbols"


def temp_sibling(path: str) -> str:
    """The temporary name a writer of `path` uses before renaming it into place:
    `<path>.<thread>.<pid>.tmp`, since threads of one process (`dsymfind fetch`) may write
    the same path at once; the pid comes last, where temp_writer finds it."""
    return f"{path}.{_thread.get_ident():x}.{_bare_os.getpid()}{TEMP_SUFFIX}"


def temp_writer(path: str) -> int | None:
    """The pid in a temp sibling's name; None when `path` is not one."""
    stem, dot, suffix = path.rpartition(".")
    pid = stem.rpartition(".")[2]
    if dot and "." + suffix == TEMP_SUFFIX and pid.isdigit():
        return int(pid)
    return None


def staging_prefix(uuid_hex: str) -> str:
    """The name start of a download's staging folders for one UUID."""
    return f"{uuid_hex}-"


def staging_owner(name: str) -> str | None:
    """The UUID hex whose download made the staging folder `name`; None for others'."""
    uuid_hex, dash, _ = name.partition("-")
    if dash and len(uuid_hex) == 32 and not name.startswith(REMOVED_PREFIX):
        return uuid_hex
    return None


def partial_owner(name: str) -> str | None:
    """The UUID hex whose partial downloads the folder `name` under tmp/ keeps; else None."""
    uuid_hex = name.removeprefix(PARTIAL_PREFIX)
    if uuid_hex != name and len(uuid_hex) == 32 and all(c in _HEX_DIGITS for c in uuid_hex):
        return uuid_hex
    return None


def partial_name(identity: str) -> str:
    """The file name of the partial download of one candidate (its redacted location)."""
    return short_name(identity)


def partial_meta(partial_file: str) -> str:
    """The sidecar of a partial download: its identity, validator, total length, bytes kept."""
    return partial_file + PARTIAL_META_SUFFIX


class CachePaths:
    """The folders inside the cache directory; every writer and reader goes through here."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root

    @property
    def uuids(self) -> str:
        """The file-mapped UUID tree that DebugSymbols can read directly."""
        return _bare_os.join(self.root, "uuids")

    @property
    def answers(self) -> str:
        """Remembered helper answers, one file per UUID (see answers.py)."""
        return _bare_os.join(self.root, "answers")

    @property
    def catalogs(self) -> str:
        """What is known of the search paths' trees (search_paths.py), and the state of the
        `index` verb (cache/index.py). The folder is named `index` on disk."""
        return _bare_os.join(self.root, "index")

    @property
    def dsyms(self) -> str:
        """Bundles dsymfind created itself (downloads, unpacked archives)."""
        return _bare_os.join(self.root, "dsyms")

    @property
    def executables(self) -> str:
        """Executables fetched for --copyExecutable."""
        return _bare_os.join(self.root, "executables")

    @property
    def systems(self) -> str:
        """Apple's own images found in DeviceSupport folders and simulator runtimes by
        `dsymfind index`, one record per slice UUID in 256 shards (cache/systems.py)."""
        return _bare_os.join(self.root, "systems")

    def system_record(self, uuid_hex: str) -> str:
        """The shard file holding the record of `uuid_hex`, named by its first two hex
        digits (cache/systems.py's `shard_of`, spelt here for the helper's hot path)."""
        return _bare_os.join(self.systems, uuid_hex[:2])

    @property
    def locks(self) -> str:
        """One lock file per UUID; lock files are never deleted."""
        return _bare_os.join(self.root, "locks")

    @property
    def negative(self) -> str:
        """The negative cache: a marker per UUID no server has, its mtime saying since when,
        in a folder per fingerprint of the store settings (fetch/backoff.py)."""
        return _bare_os.join(self.root, "negative")

    @property
    def symcaches(self) -> str:
        """Lookup tables built from dSYMs for `dsymfind symbolicate`, one per slice."""
        return _bare_os.join(self.root, SYMCACHE_FOLDER)

    def symcache_file(self, uuid_hex: str, version: int) -> str:
        return _bare_os.join(self.symcaches, f"{uuid_hex}{SYMCACHE_VERSION_MARK}{version}")

    def entry(self, uuid_hex: str) -> str:
        """The folder of the cache's own bundle for a UUID (cache/entries.py)."""
        return _bare_os.join(self.dsyms, uuid_hex)

    def executable_entry(self, uuid_hex: str) -> str:
        return _bare_os.join(self.executables, uuid_hex)

    def answer_file(self, uuid_hex: str) -> str:
        return _bare_os.join(self.answers, uuid_hex)

    def record_file(self, uuid_hex: str) -> str:
        """A download's status record (cache/records.py)."""
        return _bare_os.join(self.downloads, f"{uuid_hex}.json")

    def use_lock_file(self, uuid_hex: str) -> str:
        """Held shared by helpers answering from `dsyms/<HEX>` or `executables/<HEX>`,
        exclusively by whatever removes one of them (locks.answering, cache/removal.py)."""
        return self.lock_file(f"{uuid_hex}.use")

    def spawn_claim_file(self, uuid_hex: str) -> str:
        """Held by the one helper that may start the UUID's downloader (fetch/miss.py)."""
        return self.lock_file(f"{uuid_hex}.spawn")

    def temp_sibling_folders(self) -> list[str]:
        """The folders whose files are written as temp siblings (temp_sibling) and renamed
        into place, besides the root itself and the negative cache's per-fingerprint ones."""
        return [
            self.answers,
            self.downloads,
            self.catalogs,
            self.negative,
            self.failing_servers,
            self.symcaches,
            self.systems,
        ]

    @property
    def pdb_store(self) -> str:
        """The default downstream symbol store, in DbgHelp's own layout."""
        return _bare_os.join(self.root, PDB_STORE_FOLDER)

    def negative_marker(self, fingerprint: str, uuid_hex: str, *, executable: bool = False) -> str:
        """No server has the dSYM (or, with `executable`, the executable) of a UUID, as the
        store settings of `fingerprint` reach them."""
        name = uuid_hex + (NEGATIVE_EXECUTABLE_SUFFIX if executable else "")
        return _bare_os.join(self.negative, fingerprint, name)

    def failing_server_marker(self, server_url: str) -> str:
        return _bare_os.join(self.failing_servers, short_name(server_url))

    def lock_file(self, uuid_hex: str) -> str:
        return _bare_os.join(self.locks, f"{uuid_hex}.lock")

    @property
    def downloads(self) -> str:
        """One status record per download, for `dsymfind status` and waiting helpers."""
        return _bare_os.join(self.root, "downloads")

    @property
    def failing_servers(self) -> str:
        """One marker per server that recently failed, so lookups skip it for a while."""
        return _bare_os.join(self.root, "failing-servers")

    def new_staging(self, prefix: str) -> "tempfile.TemporaryDirectory[str]":
        """A private staging folder under tmp/, removed when the context ends."""
        import tempfile

        _bare_os.makedirs(self.tmp, mode=0o700, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix=prefix, dir=self.tmp)

    def staging_of(self, uuid_hex: str) -> list[str]:
        """The staging folders of a UUID's downloads (live only while its lock is held).

        Its partial downloads' folder is not one: it outlives runs on purpose."""
        prefix = staging_prefix(uuid_hex)
        try:
            names = _bare_os.listdir(self.tmp)
        except OSError:
            return []
        return [_bare_os.join(self.tmp, n) for n in sorted(names) if n.startswith(prefix)]

    def partial_dir(self, uuid_hex: str) -> str:
        """Where a UUID's transfers cut part-way wait to be continued (stores/transfer.py)."""
        return _bare_os.join(self.tmp, PARTIAL_PREFIX + uuid_hex)

    def partial_files(self) -> list[tuple[str, str]]:
        """(UUID hex, path) of every partial download's data file, sidecars aside."""
        found = []
        try:
            names = sorted(_bare_os.listdir(self.tmp))
        except OSError:
            return []
        for name in names:
            owner = partial_owner(name)
            folder = _bare_os.join(self.tmp, name)
            if owner is None or _bare_os.islink(folder):
                continue
            try:
                files = sorted(_bare_os.listdir(folder))
            except OSError:
                continue
            found += [
                (owner, _bare_os.join(folder, f))
                for f in files
                if not f.endswith(PARTIAL_META_SUFFIX) and temp_writer(f) is None
            ]
        return found

    @property
    def checkouts(self) -> str:
        """Checkouts of the user's clones at builds' commits, git worktrees of the clones
        below (vcs/checkouts.py). The folder is named `sources` on disk."""
        return _bare_os.join(self.root, "sources")

    def checkout_lock(self, name: str) -> str:
        """Held while a checkout is made and named, and by gc removing it."""
        return _bare_os.join(self.locks, f"sources-{name}.lock")

    @property
    def clones(self) -> str:
        """The cache's own bare clones, which borrow the objects of the user's clones and
        which the checkouts are made from (vcs/checkouts.py)."""
        return _bare_os.join(self.root, "clones")

    def clone_lock(self, clone: str) -> str:
        """Held while a checkout is made from a clone of clones/, and by gc removing it."""
        return _bare_os.join(self.locks, f"clones-{clone}.lock")

    @property
    def tmp(self) -> str:
        """Staging area on the cache's own file system, so renames into place are atomic."""
        return _bare_os.join(self.root, "tmp")
