"""The one safe way to take an entry out of the cache.

Whatever removes an entry (gc, index replacing a shadow, check --repair, a downloader
replacing an entry that does not verify) does it through Removal, the one way: under the
entry's download lock and its use lock (no helper is answering from it after a wait,
locks.answering), its links and remembered answers first (for an executable, the key of
the per-UUID plist naming it too, under that plist's entry's lock as well), so no new
answer names it; then, after a grace period for answers given a moment before, its
folder leaves its final name for `<cache>/tmp` and is deleted there. A crash at any
instant leaves no link to nothing and no half-deleted entry, and a path the helper just
answered still exists when the debugger opens it (a plain hit takes no lock: its path
must stay a few stats, and the grace covers it; docs/cache-format.md says why).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from types import TracebackType

from dsymfind import atomic, paths
from dsymfind.cache import entries, locks, place
from dsymfind.cache.tree import hex_of_link, tree_links
from dsymfind.paths import CachePaths
from dsymfind.uuids import dashed, tree_entry

TYPE_CHECKING = False
if TYPE_CHECKING:
    import filelock

    AnyLock = filelock.BaseFileLock | locks.FlockLock

# An answer read just before its entry was unlinked is printed and opened within
# milliseconds; a second keeps its path valid even for a helper descheduled meanwhile.
ANSWER_GRACE = 1.0
# A partial download not written for this long is removed (gc, check --repair): its store
# has likely changed the object, and a day-old 2 GB file is worth the disk back.
STALE_PARTIAL_AGE = 86400.0


class Removal:
    """Entries leaving the cache together; use as a context manager.

    `claim` takes an entry's download lock without waiting, `take` unlinks what names
    the entry, `finish` waits one grace period for all taken entries and removes them.
    Claimed locks are held until the block ends, so what the caller admits after
    `finish` (a replacing shadow) is under them too.
    """

    def __init__(self, cache: CachePaths, links: dict[str, str] | None = None) -> None:
        self.cache = cache
        self._links = links  # the UUID tree's links, read when first needed
        self._locks: dict[str, AnyLock] = {}
        self._use_locks: dict[str, AnyLock] = {}  # locks.answering's, by UUID
        self._taken: list[str] = []

    def __enter__(self) -> Removal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if kind is None:
                self.finish()
        finally:
            for held in (self._locks, self._use_locks):
                for lock in held.values():
                    lock.release()
                held.clear()

    def claim(self, uuid_hex: str) -> bool:
        """Hold a UUID's download lock; False when another process holds it."""
        if uuid_hex not in self._locks:
            lock = _acquired(locks.download_lock(self.cache, uuid_hex))
            if lock is None:
                return False
            self._locks[uuid_hex] = lock
        return True

    @contextlib.contextmanager
    def claimed(self, uuid_hex: str) -> Iterator[bool]:
        """A UUID's lock held for a moment, unless held here already; whether it was had."""
        fresh = uuid_hex not in self._locks
        held = self.claim(uuid_hex)
        try:
            yield held
        finally:
            if held and fresh:
                self.release(uuid_hex)

    def release(self, uuid_hex: str) -> None:
        """Give back a claimed lock (and use lock), unless an entry of that UUID was taken
        (held to its end)."""
        if any(os.path.basename(entry) == uuid_hex for entry in self._taken):
            return
        for held in (self._locks, self._use_locks):
            lock = held.pop(uuid_hex, None)
            if lock is not None:
                lock.release()

    def claim_entry(self, entry: str, *, removing: bool = True) -> bool:
        """Hold the locks an entry's removal needs: its UUID's, its use lock (no helper is
        answering from it, locks.answering) and, for an executable, the locks of the cache
        entries whose plists name it; False, holding none of them anew, when another
        process holds one. `removing=False` (to judge the entry): not its use lock, which
        `claim_use` takes if it is to go after all."""
        held_before = set(self._locks) | set(self._use_locks)
        hex_name = os.path.basename(entry)
        if self.claim(hex_name) and (not removing or self.claim_use(hex_name)):
            holders = [os.path.basename(os.path.dirname(b)) for b in self.naming_bundles(entry)]
            if all(self.claim(holder) for holder in holders):
                return True
        for name in (set(self._locks) | set(self._use_locks)) - held_before:
            self.release(name)
        return False

    def claim_use(self, uuid_hex: str) -> bool:
        """Hold the use lock of a UUID's entries: False while a helper answers from one."""
        if uuid_hex not in self._use_locks:
            lock = _acquired(locks.key_lock(self.cache.use_lock_file(uuid_hex)))
            if lock is None:
                return False
            self._use_locks[uuid_hex] = lock
        return True

    def take(self, entry: str) -> None:
        """Unlink the links, answers and plist keys naming an entry whose locks are claimed
        here (claim_entry) or held by the caller; it goes when the removal finishes."""
        links = self.links_into(entry)
        for path in links + answers_of(self.cache, entry, links):
            atomic.unlink_quietly(path)
        for found in self.naming_bundles(entry):
            place.drop_rich_executable(found, dashed(os.path.basename(entry)))
        self._taken.append(entry)

    def naming_bundles(self, entry: str) -> list[str]:
        """The cache's bundles whose per-UUID plist names a file of an executables entry:
        the UUID's own entry, or the entry its tree link leads into (a universal dSYM's)."""
        if os.path.normpath(os.path.dirname(entry)) != os.path.normpath(self.cache.executables):
            return []
        uuid = dashed(os.path.basename(entry))
        linked = _named_by(tree_entry(self.cache.uuids, uuid))  # now, not as first listed
        candidates = [
            entries.entry_bundle(entries.entry_dir(self.cache, uuid)),
            None if linked is None else entries.cache_bundle(self.cache, linked),
        ]
        inside = os.path.realpath(entry) + os.sep
        return [
            found
            for found in dict.fromkeys(candidates)
            if found is not None
            and os.path.realpath(place.rich_executable(found, uuid) or "/").startswith(inside)
        ]

    def links_into(self, entry: str) -> list[str]:
        """The tree's links into an entry: those listed when the removal began, and those
        its UUIDs have now (a download or index may have linked it after that listing and
        before its lock was claimed here; with the lock held, none is made)."""
        if self._links is None:
            self._links = tree_links(self.cache.uuids)
        inside = entry + os.sep
        listed = [link for link, target in self._links.items() if target.startswith(inside)]
        now = [tree_entry(self.cache.uuids, uuid) for uuid in entries.entry_uuids(entry)]
        return [link for link in dict.fromkeys(listed + now) if _leads_into(link, inside)]

    def finish(self) -> list[str]:
        """Remove what was taken, after one grace period; returns those that could not go."""
        if not self._taken:
            return []
        time.sleep(ANSWER_GRACE)
        failed = []
        for entry in self._taken:
            try:
                remove_entry(self.cache, entry)
            except OSError:
                failed.append(entry)
        self._taken.clear()
        return failed


def _leads_into(link: str, inside: str) -> bool:
    """Whether `link` is a symlink naming a path below `inside`."""
    named = _named_by(link)
    return named is not None and named.startswith(inside)


def _named_by(link: str) -> str | None:
    """The path a symlink names, lexically resolved (as tree_links has it); None for
    what is no symlink."""
    try:
        target = os.readlink(link)
    except OSError:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(link), target))


def _acquired(lock: AnyLock) -> AnyLock | None:
    """`lock` taken without waiting; None when another process holds it."""
    import filelock  # only when an entry goes: every `dsymfind index` builds a Removal

    try:
        lock.acquire(timeout=0)
    except (filelock.Timeout, locks.LockTimeout):
        return None
    return lock


def answers_of(cache: CachePaths, entry: str, links: list[str]) -> list[str]:
    """The remembered answers that may name an entry: its own UUID's and its links' UUIDs'."""
    hexes = dict.fromkeys([os.path.basename(entry), *(hex_of_link(link) for link in links)])
    return [cache.answer_file(h) for h in hexes]


def remove_entry(cache: CachePaths, entry: str) -> None:
    """Out of its final name first, so a crash leaves debris only; already gone is fine."""
    os.makedirs(cache.tmp, mode=0o700, exist_ok=True)
    doomed = tempfile.mkdtemp(prefix=paths.REMOVED_PREFIX, dir=cache.tmp)
    try:
        os.rename(entry, os.path.join(doomed, os.path.basename(entry)))
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
    finally:
        shutil.rmtree(doomed, ignore_errors=True)


def partial_written(path: str) -> float:
    """When a partial download (its bytes or its sidecar) was last written."""
    return max(entries.mtime(path), entries.mtime(paths.partial_meta(path)))


def remove_partial(path: str) -> None:
    """A partial download and its sidecar; the caller holds its UUID's lock."""
    atomic.unlink_quietly(path)
    atomic.unlink_quietly(paths.partial_meta(path))
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))  # when it was the last one
