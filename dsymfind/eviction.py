"""Least-recently-used eviction of what the cache created, and of its leftovers.

Candidates are the entries `<cache>/dsyms/<UUIDHEX>` and `<cache>/executables/<UUIDHEX>`
only: user bundles indexed in place are never deleted, only the links to them that
dangle. "Last used" is the newest of the atimes of the entry's files (DebugSymbols and
lldb read them through the UUID tree), the atime of its remembered answers (the helper
reads one on every answer) and the entry folder's mtime (its publication). On volumes
mounted noatime that degrades to the publication time.

An entry goes under its download lock, taken without waiting (busy ones are skipped):
its links and remembered answers first, so no new answer names it; then, after a grace
period for answers given a moment before, its folder leaves its final name for
`<cache>/tmp` and is deleted there. A crash at any instant leaves no link to nothing
and no half-deleted entry, and a path the helper just answered still exists when the
debugger opens it (the helper takes no lock: its hit path must stay a few stats).
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import filelock

from dsymfind import atomic, locks
from dsymfind.indexer import REMOVED_PREFIX, remove_entry, shadow_target
from dsymfind.paths import CacheLayout

# An answer read just before its entry was unlinked is printed and opened within
# milliseconds; a second keeps its path valid even for a helper descheduled meanwhile.
ANSWER_GRACE = 1.0
# A status record is for following a download; a day after its last write nobody is.
STALE_RECORD_AGE = 86400.0
_HEX_LENGTH = 32
_HEX = frozenset("0123456789ABCDEF")


@dataclass
class Entry:
    path: str
    uuid_hex: str
    size: int
    last_used: float
    links: list[str] = field(default_factory=list)  # the tree's links into it
    answers: list[str] = field(default_factory=list)  # remembered answers naming it


@dataclass
class Result:
    removed: list[tuple[Entry, str]] = field(default_factory=list)  # with the reason
    busy: list[Entry] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
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
        held: list[tuple[Entry, filelock.BaseFileLock]] = []
        try:
            for entry in entries:
                reason = self._reason(entry, total)
                if reason is not None and self._unlink(entry, reason, held):
                    total -= entry.size
            if held:
                time.sleep(ANSWER_GRACE)
            for entry, _lock in held:
                remove_entry(self.layout, entry.path)
        finally:
            for _entry, lock in held:
                lock.release()
        self._remove_dangling(links)
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
                target = shadow_target(path)
                if target is not None and os.path.exists(target):
                    continue  # a user's bundle indexed in place: never evicted while it exists
                entry = self._measure(path, links)
                if target is not None:
                    entry.last_used = 0.0  # its user bundle is gone: nothing left to use
                yield entry

    def _measure(self, path: str, links: dict[str, str]) -> Entry:
        hex_name = os.path.basename(path)
        inside = path + os.sep
        entry_links = [link for link, target in links.items() if target.startswith(inside)]
        hexes = dict.fromkeys([hex_name, *(hex_of_link(link) for link in entry_links)])
        answers = [os.path.join(self.layout.answers, h) for h in hexes]
        size, last_used = _size_and_atime(path)
        for answer in answers:
            last_used = max(last_used, _atime(answer))
        return Entry(path, hex_name, size, last_used, entry_links, answers)

    def _unlink(
        self, entry: Entry, reason: str, held: list[tuple[Entry, filelock.BaseFileLock]]
    ) -> bool:
        """Take the entry's links and answers away, keeping its lock until it is removed."""
        if self.dry_run:
            if locks.is_held(self.layout, entry.uuid_hex):
                self.result.busy.append(entry)
                return False
            self.result.removed.append((entry, reason))
            return True
        lock = locks.download_lock(self.layout, entry.uuid_hex)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            self.result.busy.append(entry)
            return False
        held.append((entry, lock))
        for path in entry.links + entry.answers:
            atomic.unlink_quietly(path)
        self.result.removed.append((entry, reason))
        return True

    def _remove_dangling(self, links: dict[str, str]) -> None:
        # Their empty folders stay: a downloader may be linking into one right now.
        gone = {link for entry, _ in self.result.removed for link in entry.links}
        for link in links:
            if link not in gone and os.path.islink(link) and not os.path.exists(link):
                self.result.dangling.append(link)
                if not self.dry_run:
                    atomic.unlink_quietly(link)

    def _remove_stale_records(self) -> None:
        pattern = os.path.join(glob.escape(self.layout.downloads), "*.json")
        for record in sorted(glob.glob(pattern)):
            hex_name = os.path.basename(record).removesuffix(".json")
            if self.now - mtime(record) <= STALE_RECORD_AGE:
                continue
            if locks.is_held(self.layout, hex_name):
                continue  # a download still under way, however slowly
            self.result.records.append(record)
            if not self.dry_run:
                atomic.unlink_quietly(record)

    def _remove_debris(self) -> None:
        """What an interrupted gc left in the staging area, already out of every final name."""
        if self.dry_run:
            return
        pattern = os.path.join(glob.escape(self.layout.tmp), f"{REMOVED_PREFIX}*")
        for debris in glob.glob(pattern):
            shutil.rmtree(debris, ignore_errors=True)


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
