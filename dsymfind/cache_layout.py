"""Every name inside the cache folder: the one owner of the cache's on-disk format.

docs/cache-format.md describes the format; this module spells it, and every reader and
writer asks it rather than joining names of its own. Imported on the helper's hot path:
bare_os only.
"""

import _thread  # built in, unlike threading: the hot path writes answers

from dsymfind import bare_os
from dsymfind.paths import short_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    import tempfile

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
# SymCache files (symbolicate/symcaches.py): `symcaches/<HEX>.v<format version>`, one per
# dSYM slice, so a new symbolic release with another format builds its own beside it.
SYMCACHE_FOLDER = "symcaches"
SYMCACHE_VERSION_MARK = ".v"

# The negative cache's names (docs/cache-format.md): `negative/<FINGERPRINT>/<HEX>` for a
# dSYM, with this suffix for an executable.
NEGATIVE_EXECUTABLE_SUFFIX = ".executable"
# `srv*URL` without a downstream store, and `cache*` without a folder, use this one.
PDB_STORE_FOLDER = "symbols"


def temp_sibling(path: str) -> str:
    """The temporary name a writer of `path` uses before renaming it into place:
    `<path>.<thread>.<pid>.tmp`, since threads of one process (`dsymfind fetch`) may write
    the same path at once; the pid comes last, where temp_writer finds it."""
    return f"{path}.{_thread.get_ident():x}.{bare_os.getpid()}{TEMP_SUFFIX}"


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
    """The sidecar of a partial download: source, validator, total length, bytes kept."""
    return partial_file + PARTIAL_META_SUFFIX


class CacheLayout:
    """The folders inside the cache directory; every writer and reader goes through here."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root

    @property
    def uuids(self) -> str:
        """The file-mapped UUID tree that DebugSymbols can read directly."""
        return bare_os.join(self.root, "uuids")

    @property
    def answers(self) -> str:
        """Remembered helper answers, one file per UUID (see answers.py)."""
        return bare_os.join(self.root, "answers")

    @property
    def index(self) -> str:
        """Persistent indexes of the search paths (see search_index.py)."""
        return bare_os.join(self.root, "index")

    @property
    def dsyms(self) -> str:
        """Bundles dsymfind created itself (downloads, unpacked archives)."""
        return bare_os.join(self.root, "dsyms")

    @property
    def executables(self) -> str:
        """Executables fetched for --copyExecutable."""
        return bare_os.join(self.root, "executables")

    @property
    def locks(self) -> str:
        """One lock file per UUID; lock files are never deleted."""
        return bare_os.join(self.root, "locks")

    @property
    def negative(self) -> str:
        """The negative cache: a marker per UUID no server has, its mtime saying since when,
        in a folder per fingerprint of the store settings (fetch/memory.py)."""
        return bare_os.join(self.root, "negative")

    @property
    def symcaches(self) -> str:
        """Lookup tables built from dSYMs for `dsymfind symbolicate`, one per slice."""
        return bare_os.join(self.root, SYMCACHE_FOLDER)

    def symcache_file(self, uuid_hex: str, version: int) -> str:
        return bare_os.join(self.symcaches, f"{uuid_hex}{SYMCACHE_VERSION_MARK}{version}")

    def entry(self, uuid_hex: str) -> str:
        """The folder of the cache's own bundle for a UUID (cache/entries.py)."""
        return bare_os.join(self.dsyms, uuid_hex)

    def executable_entry(self, uuid_hex: str) -> str:
        return bare_os.join(self.executables, uuid_hex)

    def answer_file(self, uuid_hex: str) -> str:
        return bare_os.join(self.answers, uuid_hex)

    def record_file(self, uuid_hex: str) -> str:
        """A download's status record (fetch/records.py)."""
        return bare_os.join(self.downloads, f"{uuid_hex}.json")

    def use_lock_file(self, uuid_hex: str) -> str:
        """Held shared by helpers answering from `dsyms/<HEX>` or `executables/<HEX>`,
        exclusively by whatever removes one of them (locks.answering, cache/removal.py)."""
        return self.lock_file(f"{uuid_hex}.use")

    def spawn_claim_file(self, uuid_hex: str) -> str:
        """Held by the one helper that may start the UUID's downloader (fetch/miss.py)."""
        return self.lock_file(f"{uuid_hex}.spawn")

    @property
    def pdb_store(self) -> str:
        """The default downstream symbol store, in DbgHelp's own layout."""
        return bare_os.join(self.root, PDB_STORE_FOLDER)

    def negative_marker(self, fingerprint: str, uuid_hex: str, *, executable: bool = False) -> str:
        """No server has the dSYM (or, with `executable`, the executable) of a UUID, as the
        store settings of `fingerprint` reach them."""
        name = uuid_hex + (NEGATIVE_EXECUTABLE_SUFFIX if executable else "")
        return bare_os.join(self.negative, fingerprint, name)

    def failing_server_marker(self, server_url: str) -> str:
        return bare_os.join(self.failing_servers, short_name(server_url))

    def lock_file(self, uuid_hex: str) -> str:
        return bare_os.join(self.locks, f"{uuid_hex}.lock")

    @property
    def downloads(self) -> str:
        """One status record per download, for `dsymfind status` and waiting helpers."""
        return bare_os.join(self.root, "downloads")

    @property
    def failing_servers(self) -> str:
        """One marker per server that recently failed, so lookups skip it for a while."""
        return bare_os.join(self.root, "failing-servers")

    def new_staging(self, prefix: str) -> "tempfile.TemporaryDirectory[str]":
        """A private staging folder under tmp/, removed when the context ends."""
        import tempfile

        bare_os.makedirs(self.tmp, mode=0o700, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix=prefix, dir=self.tmp)

    def staging_of(self, uuid_hex: str) -> list[str]:
        """The staging folders of a UUID's downloads (live only while its lock is held).

        Its partial downloads' folder is not one: it outlives runs on purpose."""
        prefix = staging_prefix(uuid_hex)
        try:
            names = bare_os.listdir(self.tmp)
        except OSError:
            return []
        return [bare_os.join(self.tmp, n) for n in sorted(names) if n.startswith(prefix)]

    def partial_dir(self, uuid_hex: str) -> str:
        """Where a UUID's transfers cut part-way wait to be continued (fetch/transfer.py)."""
        return bare_os.join(self.tmp, PARTIAL_PREFIX + uuid_hex)

    def partial_files(self) -> list[tuple[str, str]]:
        """(UUID hex, path) of every partial download's data file, sidecars aside."""
        found = []
        try:
            names = sorted(bare_os.listdir(self.tmp))
        except OSError:
            return []
        for name in names:
            owner = partial_owner(name)
            folder = bare_os.join(self.tmp, name)
            if owner is None or bare_os.islink(folder):
                continue
            try:
                files = sorted(bare_os.listdir(folder))
            except OSError:
                continue
            found += [
                (owner, bare_os.join(folder, f))
                for f in files
                if not f.endswith(PARTIAL_META_SUFFIX) and temp_writer(f) is None
            ]
        return found

    @property
    def sources(self) -> str:
        """Worktrees of the user's clones at the commits builds were made from (checkouts.py)."""
        return bare_os.join(self.root, "sources")

    def source_lock(self, worktree: str) -> str:
        """Held while a worktree is made and named, and by gc removing it."""
        return bare_os.join(self.locks, f"sources-{worktree}.lock")

    @property
    def clones(self) -> str:
        """The cache's own bare clones, which borrow the objects of the user's clones and
        which the worktrees in sources/ are made from (checkouts.py)."""
        return bare_os.join(self.root, "clones")

    def clone_lock(self, clone: str) -> str:
        """Held while a worktree is made from a clone of clones/, and by gc removing it."""
        return bare_os.join(self.locks, f"clones-{clone}.lock")

    @property
    def tmp(self) -> str:
        """Staging area on the cache's own file system, so renames into place are atomic."""
        return bare_os.join(self.root, "tmp")
