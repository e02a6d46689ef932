"""Least-recently-used eviction of what the cache created, and of its leftovers.

Candidates are the entries `<cache>/dsyms/<UUIDHEX>` and `<cache>/executables/<UUIDHEX>`
only: user bundles indexed in place are never deleted, only the links to them that
dangle. "Last used" is the newest of the atimes of the entry's files (DebugSymbols and
lldb read them through the UUID tree), the atime of its remembered answers (the helper
reads one on every answer) and the entry folder's mtime (its publication). On volumes
mounted noatime that degrades to the publication time.

Whatever removes an entry (gc, index replacing a shadow, check --repair, a downloader
replacing an entry that does not verify) does it through Removal, the one way: under the
entry's download lock, its links and remembered answers first (for an executable, the
key of the per-UUID plist naming it too, under that plist's entry's lock as well), so no
new answer names it; then, after a grace period for answers given a moment before, its
folder leaves its final name for `<cache>/tmp` and is deleted there. A crash at any
instant leaves no link to nothing and no half-deleted entry, and a path the helper just
answered still exists when the debugger opens it (the helper takes no lock: its hit path
must stay a few stats).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType

import filelock

from dsymfind import atomic, bundle, locks, publish, shadow
from dsymfind.paths import CacheLayout
from dsymfind.uuids import dashed, tree_entry

# An answer read just before its entry was unlinked is printed and opened within
# milliseconds; a second keeps its path valid even for a helper descheduled meanwhile.
ANSWER_GRACE = 1.0
# What Removal renames an entry to in <cache>/tmp before deleting it there.
REMOVED_PREFIX = "removed-"
# A status record is for following a download; a day after its last write nobody is.
STALE_RECORD_AGE = 86400.0
_HEX_LENGTH = 32
_HEX = frozenset("0123456789ABCDEF")


class Removal:
    """Entries leaving the cache together; use as a context manager.

    `claim` takes an entry's download lock without waiting, `take` unlinks what names
    the entry, `finish` waits one grace period for all taken entries and removes them.
    Claimed locks are held until the block ends, so what the caller publishes after
    `finish` (a replacing shadow) is under them too.
    """

    def __init__(self, layout: CacheLayout, links: dict[str, str] | None = None) -> None:
        self.layout = layout
        self._links = links  # the UUID tree's links, read when first needed
        self._locks: dict[str, filelock.BaseFileLock] = {}
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
            for lock in self._locks.values():
                lock.release()
            self._locks.clear()

    def claim(self, uuid_hex: str) -> bool:
        """Hold a UUID's download lock; False when another process holds it."""
        if uuid_hex in self._locks:
            return True
        lock = locks.download_lock(self.layout, uuid_hex)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
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
        """Give back a claimed lock, unless an entry of that UUID was taken (held to its end)."""
        if any(os.path.basename(entry) == uuid_hex for entry in self._taken):
            return
        lock = self._locks.pop(uuid_hex, None)
        if lock is not None:
            lock.release()

    def claim_entry(self, entry: str) -> bool:
        """Hold the locks an entry's removal needs: its UUID's and, for an executable, those
        of the cache entries whose plists name it; False, holding none of them anew, when
        another process holds one."""
        held_before = set(self._locks)
        if self.claim(os.path.basename(entry)):
            holders = [os.path.basename(os.path.dirname(b)) for b in self.naming_bundles(entry)]
            if all(self.claim(hex_name) for hex_name in holders):
                return True
        for hex_name in set(self._locks) - held_before:
            self.release(hex_name)
        return False

    def take(self, entry: str) -> None:
        """Unlink the links, answers and plist keys naming an entry whose locks are claimed
        here (claim_entry) or held by the caller; it goes when the removal finishes."""
        links = self.links_into(entry)
        for path in links + answers_of(self.layout, entry, links):
            atomic.unlink_quietly(path)
        for found in self.naming_bundles(entry):
            publish.drop_rich_executable(found, dashed(os.path.basename(entry)))
        self._taken.append(entry)

    def naming_bundles(self, entry: str) -> list[str]:
        """The cache's bundles whose per-UUID plist names a file of an executables entry:
        the UUID's own entry, or the entry its tree link leads into (a universal dSYM's)."""
        if os.path.normpath(os.path.dirname(entry)) != os.path.normpath(self.layout.executables):
            return []
        uuid = dashed(os.path.basename(entry))
        if self._links is None:
            self._links = tree_links(self.layout.uuids)
        linked = self._links.get(tree_entry(self.layout.uuids, uuid))
        candidates = [
            publish.entry_bundle(publish.entry_dir(self.layout, uuid)),
            None if linked is None else publish.cache_bundle(self.layout, linked),
        ]
        inside = os.path.realpath(entry) + os.sep
        return [
            found
            for found in dict.fromkeys(candidates)
            if found is not None
            and os.path.realpath(publish.rich_executable(found, uuid) or "/").startswith(inside)
        ]

    def links_into(self, entry: str) -> list[str]:
        if self._links is None:
            self._links = tree_links(self.layout.uuids)
        inside = entry + os.sep
        return [link for link, target in self._links.items() if target.startswith(inside)]

    def finish(self) -> list[str]:
        """Remove what was taken, after one grace period; returns those that could not go."""
        if not self._taken:
            return []
        time.sleep(ANSWER_GRACE)
        failed = []
        for entry in self._taken:
            try:
                remove_entry(self.layout, entry)
            except OSError:
                failed.append(entry)
        self._taken.clear()
        return failed


def answers_of(layout: CacheLayout, entry: str, links: list[str]) -> list[str]:
    """The remembered answers that may name an entry: its own UUID's and its links' UUIDs'."""
    hexes = dict.fromkeys([os.path.basename(entry), *(hex_of_link(link) for link in links)])
    return [os.path.join(layout.answers, h) for h in hexes]


def remove_entry(layout: CacheLayout, entry: str) -> None:
    """Out of its final name first, so a crash leaves debris only; already gone is fine."""
    os.makedirs(layout.tmp, mode=0o700, exist_ok=True)
    doomed = tempfile.mkdtemp(prefix=REMOVED_PREFIX, dir=layout.tmp)
    try:
        os.rename(entry, os.path.join(doomed, os.path.basename(entry)))
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
    finally:
        shutil.rmtree(doomed, ignore_errors=True)


@dataclass
class Entry:
    path: str
    uuid_hex: str
    size: int
    last_used: float
    links: list[str] = field(default_factory=list)  # the tree's links into it
    answers: list[str] = field(default_factory=list)  # remembered answers naming it
    orphan: str | None = None  # a shadow standing for nothing any more: why


@dataclass
class Result:
    removed: list[tuple[Entry, str]] = field(default_factory=list)  # with the reason
    busy: list[Entry] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    stale_links: list[str] = field(default_factory=list)  # to a file without their UUID
    records: list[str] = field(default_factory=list)

    @property
    def freed(self) -> int:
        return sum(entry.size for entry, _ in self.removed)


class Collector:
    def __init__(
        self,
        layout: CacheLayout,
        *,
        max_size: int | None,
        max_age: float,
        dry_run: bool,
        now: float | None = None,
    ) -> None:
        self.layout = layout
        self.max_size, self.max_age, self.dry_run = max_size, max_age, dry_run
        self.now = time.time() if now is None else now
        self.result = Result()

    def run(self) -> Result:
        links = tree_links(self.layout.uuids)
        entries = sorted(self._entries(links), key=lambda e: e.last_used)
        total = sum(e.size for e in entries)
        with Removal(self.layout, links) as removal:
            for entry in entries:
                reason = entry.orphan or self._reason(entry, total)
                if reason is not None and self._evict(entry, reason, removal):
                    total -= entry.size
        self._remove_broken_links(links)
        self._remove_stale_records()
        self._remove_debris()
        return self.result

    def _reason(self, entry: Entry, total: int) -> str | None:
        unused_days = (self.now - entry.last_used) / 86400
        if self.now - entry.last_used > self.max_age:
            return f"unused for {unused_days:.0f} days"
        if self.max_size is not None and total > self.max_size:
            return f"over the size limit, unused for {unused_days:.1f} days"
        return None

    def _entries(self, links: dict[str, str]) -> Iterator[Entry]:
        for folder in (self.layout.dsyms, self.layout.executables):
            for path in hex_folders(folder):
                orphan = shadow.orphan_reason(path)
                if orphan is None and shadow.target(path) is not None:
                    continue  # a user's bundle indexed in place: never evicted while it serves
                entry = self._measure(path, links)
                entry.orphan = orphan
                yield entry

    def _measure(self, path: str, links: dict[str, str]) -> Entry:
        inside = path + os.sep
        entry_links = [link for link, target in links.items() if target.startswith(inside)]
        answers = answers_of(self.layout, path, entry_links)
        size, last_used = _size_and_atime(path)
        for answer in answers:
            last_used = max(last_used, _atime(answer))
        return Entry(path, os.path.basename(path), size, last_used, entry_links, answers)

    def _evict(self, entry: Entry, reason: str, removal: Removal) -> bool:
        """Take the entry's links and answers away; it goes when the removal finishes."""
        if self.dry_run:
            busy = _lock_held(self.layout, entry.uuid_hex)
        else:
            busy = not removal.claim_entry(entry.path)
        if busy:
            self.result.busy.append(entry)
            return False
        if not self.dry_run:
            removal.take(entry.path)
        self.result.removed.append((entry, reason))
        return True

    def _remove_broken_links(self, links: dict[str, str]) -> None:
        """Links to nothing, and links to a file that no longer carries their UUID.

        Their empty folders stay: a downloader may be linking into one right now. Links
        of entries being removed, or kept busy, are the removal's or their owner's.
        """
        handled = {link for entry, _ in self.result.removed for link in entry.links}
        handled.update(link for entry in self.result.busy for link in entry.links)
        for link in links:
            if link in handled or not os.path.islink(link):
                continue
            uuid = uuid_of_link(link)
            if not os.path.exists(link):
                found = self.result.dangling
            elif uuid is not None and bundle.verified_slice(link, uuid) is None:
                found = self.result.stale_links
            else:
                continue
            found.append(link)
            if not self.dry_run:
                atomic.unlink_quietly(link)

    def _remove_stale_records(self) -> None:
        pattern = os.path.join(glob.escape(self.layout.downloads), "*.json")
        for record in sorted(glob.glob(pattern)):
            hex_name = os.path.basename(record).removesuffix(".json")
            if self.now - mtime(record) <= STALE_RECORD_AGE:
                continue
            if _lock_held(self.layout, hex_name):
                continue  # a download still under way, however slowly
            self.result.records.append(record)
            if not self.dry_run:
                atomic.unlink_quietly(record)

    def _remove_debris(self) -> None:
        """What an interrupted removal left in the staging area, out of every final name."""
        if self.dry_run:
            return
        pattern = os.path.join(glob.escape(self.layout.tmp), f"{REMOVED_PREFIX}*")
        for debris in glob.glob(pattern):
            shutil.rmtree(debris, ignore_errors=True)


def _lock_held(layout: CacheLayout, uuid_hex: str) -> bool:
    """Whether a UUID's lock is held, creating nothing: a holder makes the lock file first."""
    return os.path.exists(layout.lock_file(uuid_hex)) and locks.is_held(layout, uuid_hex)


def hex_folders(folder: str) -> list[str]:
    """The entries the cache named by a UUID; anything else there is not ours to judge."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(
        os.path.join(folder, n)
        for n in names
        if len(n) == _HEX_LENGTH and _HEX.issuperset(n) and os.path.isdir(os.path.join(folder, n))
    )


def tree_links(root: str) -> dict[str, str]:
    """Every symlink in the UUID tree, with the path it names (lexically resolved)."""
    links: dict[str, str] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            link = os.path.join(folder, name)
            try:
                target = os.readlink(link)
            except OSError:
                continue  # not a symlink: not something the cache made
            links[link] = os.path.normpath(os.path.join(folder, target))
    return links


def hex_of_link(link: str) -> str:
    """The UUID digits a tree link stands for: its last six path components."""
    return "".join(link.split(os.sep)[-6:])


def uuid_of_link(link: str) -> str | None:
    """The UUID a tree link stands for; None for a name the cache would not make."""
    digits = hex_of_link(link)
    if len(digits) != _HEX_LENGTH or not _HEX.issuperset(digits):
        return None
    return dashed(digits)


def _size_and_atime(path: str) -> tuple[int, float]:
    """Bytes used by an entry (symlinks not followed) and the newest use of anything in it."""
    size, last_used = 0, mtime(path)
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            size += st.st_size
            last_used = max(last_used, st.st_atime)
    return size, last_used


def _atime(path: str) -> float:
    try:
        return os.stat(path).st_atime
    except OSError:
        return 0.0


def mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
