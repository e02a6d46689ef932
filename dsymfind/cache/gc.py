"""Least-recently-used eviction of what the cache created, and of its leftovers.

Candidates are the entries `<cache>/dsyms/<UUIDHEX>` and `<cache>/executables/<UUIDHEX>`
only: user bundles indexed in place are never deleted, only the links to them that
dangle; entries leave through removal.py. "Last used" is the newest of the atimes of
the entry's files (DebugSymbols and lldb read them through the UUID tree), the atime of
its remembered answers (the helper reads one on every answer) and the entry folder's
mtime (its publication). On volumes mounted noatime that degrades to the publication time.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from dsymfind import atomic, paths
from dsymfind.apple import bundle
from dsymfind.cache import locks, shadow, systems
from dsymfind.cache.entries import hex_folders, mtime
from dsymfind.cache.removal import (
    STALE_PARTIAL_AGE,
    Removal,
    answers_of,
    partial_written,
    remove_partial,
)
from dsymfind.cache.tree import tree_links, uuid_of_link
from dsymfind.paths import CachePaths

# A status record is for following a download; a day after its last write nobody is.
STALE_RECORD_AGE = 86400.0


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
    partials: list[str] = field(default_factory=list)  # partial downloads removed
    symcaches: list[str] = field(default_factory=list)  # symbolicate's tables removed
    systems: list[str] = field(default_factory=list)  # records of system images gone

    @property
    def freed(self) -> int:
        return sum(entry.size for entry, _ in self.removed)


class Collector:
    def __init__(
        self,
        cache: CachePaths,
        *,
        max_size: int | None,
        max_age: float,
        dry_run: bool,
        now: float | None = None,
        symcache_version: int | None = None,
    ) -> None:
        """`symcache_version`: the SymCache format symbolic writes now, tables of another
        being leftovers; without it, symcaches/ is left alone."""
        self.cache = cache
        self.symcache_version = symcache_version
        self.max_size, self.max_age, self.dry_run = max_size, max_age, dry_run
        self.now = time.time() if now is None else now
        self.result = Result()

    def run(self) -> Result:
        links = tree_links(self.cache.uuids)
        entries = sorted(self._entries(links), key=lambda e: e.last_used)
        total = sum(e.size for e in entries)
        with Removal(self.cache, links) as removal:
            for entry in entries:
                reason = entry.orphan or self._reason(entry, total)
                if reason is not None and self._evict(entry, reason, removal):
                    total -= entry.size
        self._remove_broken_links(links)
        self._remove_stale_records()
        self._remove_stale_partials()
        self._remove_debris()
        self._remove_unused_symcaches()
        self._remove_gone_systems()
        return self.result

    def _reason(self, entry: Entry, total: int) -> str | None:
        unused_days = (self.now - entry.last_used) / 86400
        if self.now - entry.last_used > self.max_age:
            return f"unused for {unused_days:.0f} days"
        if self.max_size is not None and total > self.max_size:
            return f"over the size limit, unused for {unused_days:.1f} days"
        return None

    def _entries(self, links: dict[str, str]) -> Iterator[Entry]:
        for folder in (self.cache.dsyms, self.cache.executables):
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
        answers = answers_of(self.cache, path, entry_links)
        size, last_used = _size_and_atime(path)
        for answer in answers:
            last_used = max(last_used, _atime(answer))
        return Entry(path, os.path.basename(path), size, last_used, entry_links, answers)

    def _evict(self, entry: Entry, reason: str, removal: Removal) -> bool:
        """Take the entry's links and answers away; it goes when the removal finishes."""
        if self.dry_run:
            busy = _lock_held(self.cache, entry.uuid_hex) or locks.in_use(
                self.cache, entry.uuid_hex
            )
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
        pattern = os.path.join(glob.escape(self.cache.downloads), "*.json")
        for record in sorted(glob.glob(pattern)):
            hex_name = os.path.basename(record).removesuffix(".json")
            if self.now - mtime(record) <= STALE_RECORD_AGE:
                continue
            if _lock_held(self.cache, hex_name):
                continue  # a download still under way, however slowly
            self.result.records.append(record)
            if not self.dry_run:
                atomic.unlink_quietly(record)

    def _remove_stale_partials(self) -> None:
        """Partial downloads not written for a day, under their UUID's lock (without waiting:
        a download continuing one keeps it)."""
        for owner, path in self.cache.partial_files():
            if self.now - partial_written(path) <= STALE_PARTIAL_AGE:
                continue
            if self.dry_run:
                if not _lock_held(self.cache, owner):
                    self.result.partials.append(path)
                continue
            with Removal(self.cache) as removal, removal.claimed(owner) as held:
                if not held:
                    continue  # a download of the UUID may be continuing it
                remove_partial(path)
            self.result.partials.append(path)

    def _remove_unused_symcaches(self) -> None:
        from dsymfind.cache import symcache_files

        if self.symcache_version is None:
            return
        everything = self.max_size == 0
        for path in symcache_files.unused(
            self.cache,
            self.symcache_version,
            now=self.now,
            max_age=self.max_age,
            everything=everything,
        ):
            if not self.dry_run:
                symcache_files.discard(path)
            self.result.symcaches.append(path)

    def _remove_gone_systems(self) -> None:
        """Records of system images whose file is gone (a DeviceSupport folder deleted):
        the file is the user's, the record only points at it."""
        gone = systems.gone(self.cache)
        if gone and not self.dry_run:
            # Judged without the writers' lock: an index meanwhile may have recorded one anew.
            gone = dict.fromkeys(systems.drop(self.cache, gone))
        self.result.systems += [systems.label(self.cache, name) for name in gone]

    def _remove_debris(self) -> None:
        """What an interrupted removal left in the staging area, out of every final name."""
        if self.dry_run:
            return
        pattern = os.path.join(glob.escape(self.cache.tmp), paths.REMOVED_PREFIX + "*")
        for debris in glob.glob(pattern):
            shutil.rmtree(debris, ignore_errors=True)


def _lock_held(cache: CachePaths, uuid_hex: str) -> bool:
    """Whether a UUID's lock is held, creating nothing: a holder makes the lock file first."""
    return os.path.exists(cache.lock_file(uuid_hex)) and locks.is_held(cache, uuid_hex)


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
