"""Search paths: folders searched recursively for `.dSYM` bundles, each with a catalog.

The catalog of each search root lives in the cache's catalogs folder (`<cache>/index/` on
disk). It remembers every folder's mtime with its subfolders and bundles, and every DWARF
file's stat with its UUIDs, so a refresh re-lists only changed folders and re-reads only
changed files. A miss refreshes at most once per REFRESH_INTERVAL, so LLDB's burst of
lookups at start-up walks a tree once.

Beside the catalog, answer shards hold the answer for every UUID it knows, ready to serve:
answers.py records, valid while the files they name are unchanged. A lookup reads the
one small shard of its UUID (quick_find): no Mach-O reader, no plistlib, and no catalog
whose size grows with the tree (unmarshalling a 10,000-bundle catalog costs about as much
as the interpreter's start-up). The walk and the Mach-O reads load only on a refresh.
"""

import time

from dsymfind import _bare_os, answers, atomic, paths
from dsymfind.uuids import uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.answers import Record
    from dsymfind.apple.macho import Slice
    from dsymfind.debugsymbols import Answer

    # A shard: UUID -> DWARF path -> the answer record for that file.
    Shard = dict[str, dict[str, Record]]

# A miss re-walks the tree only if the last walk is older than this.
REFRESH_INTERVAL = 5.0
# ...and at least this many times the last walk's duration: a long walk takes at most a tenth
# of the time, whatever the size of the tree.
WALK_INTERVAL_FACTOR = 10.0
_FORMAT = 1
# Shards are named by a UUID's last hex digits (lld's UUIDs all begin 4C4C44, Apple's are
# random). Two digits: 256 shards, each a few KiB for a tree of 10,000 bundles.
_SHARD_DIGITS = 2
# In the shard folder; its mtime is the time of the walk that the shards reflect, and it
# holds how long that walk took (seconds, ASCII): the walk's interval depends on it.
_WALKED_MARKER = "walked"
_MARKER_BYTES = 64
# Longer than any walk: a marker that says more is not one this module wrote.
_LONGEST_WALK = 86400.0

DirRecord = tuple[int, list[str], list[str]]  # mtime_ns, subfolder names, bundle names
DwarfRecord = tuple[int, int, list[tuple[str, str]]]  # mtime_ns, size, [(uuid, arch)]


class SearchCatalog:
    def __init__(self, catalogs_dir: str, root: str) -> None:
        self.root = root
        self.path = _catalog_path(catalogs_dir, root)
        self.refreshed = 0.0
        self.dirs: dict[str, DirRecord] = {}
        self.dwarf: dict[str, DwarfRecord] = {}
        self.by_uuid: dict[str, list[str]] = {}
        # The slices of the files read by this process's refresh, for write_answers.
        self.read_now: dict[str, list[Slice]] = {}
        # A due walk did not fit the caller's time (find's `until`).
        self.unfinished = False
        self.walk_seconds = 0.0  # how long the last complete walk took
        self._load()

    def find(self, uuid: str, *, until: float | None = None) -> "tuple[str, Slice] | None":
        """A DWARF file below the root verified to carry `uuid`.

        A walk that is due stops at `until` (monotonic) and leaves the index as it was:
        then `unfinished` is set, and the caller hands the walk to a process of its own.
        """
        found = self._verified(uuid)
        interval = walk_interval(self.walk_seconds)
        if found is None and time.time() - self.refreshed >= interval:
            if self.refresh(until=until):
                found = self._verified(uuid)
            else:
                self.unfinished = True
        return found

    def _verified(self, uuid: str) -> "tuple[str, Slice] | None":
        candidates = self.by_uuid.get(uuid, [])
        if not candidates:
            return None
        from dsymfind.apple import bundle  # the Mach-O reader's door: only for a candidate

        for path in candidates:
            found = bundle.verified_slice(path, uuid)
            if found is not None:
                return path, found
        return None

    def refresh(self, *, until: float | None = None) -> bool:
        """Walk the tree again, reusing what is unchanged, and save the result.

        False when `until` (monotonic) came first: the index is then left as it was.
        """
        old_dirs, old_dwarf = self.dirs, self.dwarf
        self.dirs, self.dwarf = {}, {}
        started = time.monotonic()
        stack = [self.root]
        if self.root.endswith(".dSYM"):  # a search path may name one bundle
            stack = []
            self._index_bundle(self.root, old_dwarf)
        while stack:
            if until is not None and time.monotonic() >= until:
                self.dirs, self.dwarf, self.read_now = old_dirs, old_dwarf, {}
                return False
            folder = stack.pop()
            record = self._list_folder(folder, old_dirs.get(folder))
            if record is None:
                continue
            self.dirs[folder] = record
            for name in record[2]:
                self._index_bundle(_bare_os.join(folder, name), old_dwarf)
            stack.extend(_bare_os.join(folder, name) for name in record[1])
        self.by_uuid = _invert(self.dwarf)
        self.refreshed = time.time()
        self.walk_seconds = time.monotonic() - started
        self._save()
        return True

    def _list_folder(self, folder: str, old: DirRecord | None) -> DirRecord | None:
        try:
            mtime = _bare_os.stat(folder).st_mtime_ns
            if old is not None and old[0] == mtime:
                return old
            subfolders: list[str] = []
            bundles: list[str] = []
            with _bare_os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        is_bundle = entry.name.endswith(".dSYM")
                        (bundles if is_bundle else subfolders).append(entry.name)
        except OSError:
            return None
        return mtime, sorted(subfolders), sorted(bundles)

    def _index_bundle(self, path: str, old_dwarf: dict[str, DwarfRecord]) -> None:
        from dsymfind.apple import bundle

        for dwarf_path in bundle.dwarf_files(path):
            try:
                st = _bare_os.stat(dwarf_path)
            except OSError:
                continue
            old = old_dwarf.get(dwarf_path)
            if old is not None and old[:2] == (st.st_mtime_ns, st.st_size):
                self.dwarf[dwarf_path] = old
                continue
            from dsymfind.apple import macho  # only for a new or changed DWARF file

            try:
                slices = macho.read_slices(dwarf_path)
            except macho.MachOError:
                continue
            uuids = [(s.uuid, s.arch) for s in slices if s.uuid is not None]
            self.dwarf[dwarf_path] = (st.st_mtime_ns, st.st_size, uuids)
            self.read_now[dwarf_path] = slices

    def _load(self) -> None:
        data = atomic.read_marshal(self.path)
        try:
            if data["format"] != _FORMAT or data["root"] != self.root:
                return
            self.refreshed, self.dirs = data["refreshed"], data["dirs"]
            self.dwarf, self.by_uuid = data["dwarf"], data["by_uuid"]
            self.walk_seconds = data.get("walk_seconds", 0.0)
        except (TypeError, KeyError):
            self.refreshed, self.dirs, self.dwarf, self.by_uuid = 0.0, {}, {}, {}

    def _save(self) -> None:
        data = {
            "format": _FORMAT,
            "root": self.root,
            "refreshed": self.refreshed,
            "walk_seconds": self.walk_seconds,
            "dirs": self.dirs,
            "dwarf": self.dwarf,
            "by_uuid": self.by_uuid,
        }
        atomic.write_marshal(self.path, data)

    def write_answers(self, origin: str) -> None:
        """The answer shards for the last walk; `origin` names the root in the answers.

        Records that are still valid are kept, and only changed shards are written. Best
        effort: a lost shard only sends its lookups down the slower path.
        """
        folder = _answers_folder(self.path)
        old = _read_shards(folder)
        new: dict[str, Shard] = {}
        for uuid, dwarf_paths in self.by_uuid.items():
            kept = old.get(_shard_name(uuid), {}).get(uuid, {})
            records = {p: self._answer_record(p, uuid, origin, kept.get(p)) for p in dwarf_paths}
            usable = {p: r for p, r in records.items() if r is not None}
            if usable:
                new.setdefault(_shard_name(uuid), {})[uuid] = usable
        try:
            _bare_os.makedirs(folder, mode=0o700, exist_ok=True)
            for name in old.keys() - new.keys():
                _bare_os.unlink(_bare_os.join(folder, name))
            for name, shard in new.items():
                if old.get(name) != shard:
                    data = {"format": _FORMAT, "records": shard}
                    atomic.write_marshal(_bare_os.join(folder, name), data)
            marker = _bare_os.join(folder, _WALKED_MARKER)
            atomic.write_bytes(marker, repr(self.walk_seconds).encode(), fsync=False, mode=0o600)
            _bare_os.utime(marker, (self.refreshed, self.refreshed))
        except OSError:
            pass

    def _answer_record(
        self, dwarf_path: str, uuid: str, origin: str, old: "Record | None"
    ) -> "Record | None":
        if old is not None and answers.check(old, (origin,)) is not None:
            return old
        from dsymfind.apple import bundle, macho

        read = self.read_now.get(dwarf_path)
        found = (
            macho.slice_for_uuid(read, uuid) if read else bundle.verified_slice(dwarf_path, uuid)
        )
        if found is None:
            return None
        answer, inputs = bundle.answer_for(dwarf_path, uuid, found)
        return answers.make_record(answer, origin, inputs)


def refresh_in_background(catalogs_dir: str, root: str) -> None:
    """Hand a walk that did not fit the helper's deadline to a process of its own.

    One at a time per search path: an flock on a file beside the index, held by the
    walker (`dsymfind _refresh`), probed here without waiting.
    """
    from dsymfind import processes

    if not _walker_running(catalogs_dir, root):
        processes.spawn_refresher(root)


def walker_lock(catalogs_dir: str, root: str) -> int | None:
    """The right to walk `root` (a descriptor holding an flock), or None while another has it."""
    from dsymfind.cache import locks

    return locks.try_claim(_catalog_path(catalogs_dir, root) + ".walking")


def _walker_running(catalogs_dir: str, root: str) -> bool:
    fd = walker_lock(catalogs_dir, root)
    if fd is None:
        return True
    _bare_os.close(fd)
    return False


def quick_find(
    catalogs_dir: str, root: str, uuid: str, origin: str
) -> "tuple[tuple[Answer, Record] | None, bool]":
    """The answer shards' verdict on `uuid` below `root`, whose answers name `origin`.

    ((answer, its record), True): a valid answer. (None, True): the last walk, which is not
    due again yet (walk_interval), found no such UUID. (None, False): only SearchCatalog.find can
    tell (no shards, an older walk, or files changed since the walk).
    """
    folder = _answers_folder(_catalog_path(catalogs_dir, root))
    try:
        walked = _bare_os.stat(_bare_os.join(folder, _WALKED_MARKER)).st_mtime
    except OSError:
        return None, False
    shard = _read_shard(_bare_os.join(folder, _shard_name(uuid)))
    try:
        records = list(shard.get(uuid, {}).values())
    except AttributeError:
        return None, False
    for record in records:
        found = answers.check(record, (origin,))
        if found is not None:
            return (found[0], record), True
    return None, not records and _walk_not_due(_bare_os.join(folder, _WALKED_MARKER), walked)


def walk_interval(walk_seconds: float) -> float:
    """How long a walk's findings stand: a tree that takes long to walk is walked less
    often (at most a tenth of the time)."""
    return max(REFRESH_INTERVAL, WALK_INTERVAL_FACTOR * walk_seconds)


def _walk_not_due(marker: str, walked: float) -> bool:
    """Whether the walk of `walked` (the marker's mtime) still stands, as SearchCatalog.find
    would judge it: then what it did not find is not there, and the index need not load
    (unmarshalling a large one costs about as much as the interpreter's start-up)."""
    age = time.time() - walked
    if age < 0:
        return False  # a clock set back: walk again
    return age < REFRESH_INTERVAL or age < walk_interval(_walk_seconds(marker))


def _walk_seconds(marker: str) -> float:
    """How long the walk took, as its marker says; 0 for a marker without it."""
    try:
        seconds = float(atomic.read_small_file(marker, _MARKER_BYTES))
    except (OSError, ValueError):
        return 0.0
    return seconds if 0.0 <= seconds <= _LONGEST_WALK else 0.0


def _catalog_path(catalogs_dir: str, root: str) -> str:
    return _bare_os.join(catalogs_dir, f"search-{paths.short_name(root)}")


def _answers_folder(index_path: str) -> str:
    return f"{index_path}.answers"


def _shard_name(uuid: str) -> str:
    return uuid_hex(uuid)[-_SHARD_DIGITS:]


def _read_shards(folder: str) -> "dict[str, Shard]":
    """Every shard in `folder` by name (a missing or damaged shard reads as empty)."""
    try:
        names = [n for n in _bare_os.listdir(folder) if len(n) == _SHARD_DIGITS]
    except OSError:
        return {}
    return {name: _read_shard(_bare_os.join(folder, name)) for name in names}


def _read_shard(path: str) -> "Shard":
    data = atomic.read_marshal(path)
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return {}
    records = data.get("records")
    return records if isinstance(records, dict) else {}


def _invert(dwarf: dict[str, DwarfRecord]) -> dict[str, list[str]]:
    by_uuid: dict[str, list[str]] = {}
    for path, (_, _, uuids) in dwarf.items():
        for uuid, _arch in uuids:
            by_uuid.setdefault(uuid, []).append(path)
    return by_uuid
