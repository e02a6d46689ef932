"""Verifying the whole cache, and repairing it: `dsymfind check [--repair]`.

Three kinds of finding:
- invalid: breaks a guarantee (a link to nothing or to the wrong UUID, an entry that
  is not a complete bundle of the UUID it is named by). Never expected; --repair
  removes it.
- leftover: what an interrupted run leaves (staging folders, temporary files, a
  published entry whose links were not made yet, a record of a dead download). The
  cache is still valid: no final name leads to it, and the next run for the same UUID
  clears or completes it. --repair does that now.
- foreign: not made by dsymfind. Reported and always left alone.

Each entry is judged under its download lock, taken without waiting: a busy entry is
being written and is skipped.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import filelock

from dsymfind import atomic, bundle, downloads, locks, macho, publish
from dsymfind.eviction import hex_folders, hex_of_link, mtime, tree_links
from dsymfind.indexer import REMOVED_PREFIX, remove_entry, shadow_target
from dsymfind.paths import CacheLayout
from dsymfind.uuids import dashed

INVALID, LEFTOVER, FOREIGN = "invalid", "leftover", "foreign"
if TYPE_CHECKING:
    EntryCheck = Callable[[str, dict[str, str]], Iterator["Finding"]]
# Folders whose files are written temp-then-rename as `<name>.<pid>.tmp` (atomic.py).
_ATOMIC_FOLDERS = ("answers", "downloads", "index", "negative", "failing-servers")


@dataclass
class Finding:
    kind: str
    path: str
    reason: str
    repair: Callable[[], None] | None = None


@dataclass
class Report:
    findings: list[Finding]
    entries: int
    links: int

    def count(self, kind: str) -> int:
        return sum(1 for f in self.findings if f.kind == kind)


class Checker:
    def __init__(self, layout: CacheLayout, *, stale_after: float) -> None:
        """`stale_after`: seconds after which untracked staging debris cannot be a live run's."""
        self.layout = layout
        self.stale_after = stale_after
        self.now = time.time()

    def run(self) -> Report:
        links = tree_links(self.layout.uuids)
        findings: list[Finding] = []
        entries = 0
        for folder, check in (
            (self.layout.dsyms, self._dsym),
            (self.layout.executables, self._exe),
        ):
            findings += self._foreign(folder)
            for entry in hex_folders(folder):
                entries += 1
                findings += self._locked(entry, check, links)
        findings += self._links(links)
        findings += self._staging()
        findings += self._temp_files()
        findings += self._records()
        return Report(findings, entries, len(links))

    def _locked(self, entry: str, check: EntryCheck, links: dict[str, str]) -> list[Finding]:
        lock = locks.download_lock(self.layout, os.path.basename(entry))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return []  # being downloaded or evicted right now
        try:
            return list(check(entry, links))
        finally:
            lock.release()

    # entries

    def _dsym(self, entry: str, links: dict[str, str]) -> Iterator[Finding]:
        problem, uuids = _dsym_problem(entry)
        if problem is not None:
            yield Finding(INVALID, entry, problem, lambda: self._remove(entry, links))
            return
        linked = {hex_of_link(link) for link in links}
        unlinked = [u for u in uuids if u.replace("-", "") not in linked]
        if unlinked:
            yield Finding(
                LEFTOVER,
                entry,
                f"published but not linked yet: {', '.join(unlinked)}",
                self._relinker(entry),
            )

    def _exe(self, entry: str, links: dict[str, str]) -> Iterator[Finding]:
        uuid = dashed(os.path.basename(entry))
        path = os.path.join(entry, uuid)
        try:
            found = macho.slice_for_uuid(macho.read_slices(path), uuid)
        except macho.MachOError as exc:
            problem: str | None = str(exc)
        else:
            problem = (
                "carries another UUID"
                if found is None
                else "is a dSYM, not an executable"
                if found.filetype_name == "MH_DSYM"
                else None
            )
        if problem is not None:
            yield Finding(INVALID, entry, problem, lambda: self._remove(entry, links))

    def _relinker(self, entry: str) -> Callable[[], None]:
        def relink() -> None:
            publish.link_entry(self.layout, entry)

        return relink

    def _remove(self, entry: str, links: dict[str, str]) -> None:
        inside = entry + os.sep
        for link, target in links.items():
            if target.startswith(inside):
                atomic.unlink_quietly(link)
        remove_entry(self.layout, entry)

    def _foreign(self, folder: str) -> Iterator[Finding]:
        ours = set(hex_folders(folder))
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            path = os.path.join(folder, name)
            if path not in ours:
                yield Finding(FOREIGN, path, "not made by dsymfind; left alone")

    # the UUID tree

    def _links(self, links: dict[str, str]) -> Iterator[Finding]:
        for link in links:
            if link.endswith(".tmp"):
                if not self._live_temp(link):
                    yield Finding(LEFTOVER, link, "an unfinished link", _unlinker(link))
                continue
            uuid = _uuid_of_link(link)
            if uuid is None:
                yield Finding(FOREIGN, link, "not a UUID entry; left alone")
                continue
            problem = _link_problem(link, uuid)
            if problem is not None:
                yield Finding(INVALID, link, problem, _unlinker(link))

    # debris

    def _staging(self) -> Iterator[Finding]:
        try:
            names = sorted(os.listdir(self.layout.tmp))
        except OSError:
            return
        for name in names:
            path = os.path.join(self.layout.tmp, name)
            if self._staging_in_use(name, path):
                continue
            yield Finding(
                LEFTOVER, path, "staging debris of an interrupted run", _tree_remover(path)
            )

    def _staging_in_use(self, name: str, path: str) -> bool:
        uuid_hex, dash, _ = name.partition("-")
        if dash and len(uuid_hex) == 32 and not name.startswith(REMOVED_PREFIX):
            return locks.is_held(self.layout, uuid_hex)  # a download's own staging folder
        return self.now - mtime(path) < self.stale_after

    def _temp_files(self) -> Iterator[Finding]:
        folders = [self.layout.root, *(os.path.join(self.layout.root, f) for f in _ATOMIC_FOLDERS)]
        for folder in folders:
            for path in glob.glob(os.path.join(glob.escape(folder), "*.tmp")):
                if not self._live_temp(path):
                    yield Finding(
                        LEFTOVER, path, "a temporary file of a dead process", _unlinker(path)
                    )

    def _live_temp(self, path: str) -> bool:
        """A `<name>.<pid>.tmp` file whose writer still runs."""
        stem, dot, suffix = path.rpartition(".")
        pid = stem.rpartition(".")[2]
        return dot == "." and suffix == "tmp" and pid.isdigit() and _alive(int(pid))

    def _records(self) -> Iterator[Finding]:
        for path in sorted(glob.glob(os.path.join(glob.escape(self.layout.downloads), "*.json"))):
            uuid_hex = os.path.basename(path).removesuffix(".json")
            record = downloads.read(self.layout.downloads, uuid_hex)
            if record is None or record.get("state") != downloads.RUNNING:
                continue
            if not locks.is_held(self.layout, uuid_hex):
                yield Finding(LEFTOVER, path, "a download that died", _unlinker(path))


def _dsym_problem(entry: str) -> tuple[str | None, list[str]]:
    """Why a dsyms/<HEX> entry is not a complete bundle of its UUID, and its dSYM UUIDs."""
    target = shadow_target(entry)
    if target is not None and not os.path.exists(target):
        return f"stands for {target}, which is gone", []
    bundles = sorted(glob.glob(os.path.join(glob.escape(entry), "*.dSYM")))
    if len(bundles) != 1:
        return f"holds {len(bundles)} dSYM bundles, not one", []
    dwarf = _entry_dwarf_files(bundles[0])
    if not dwarf:
        return "its bundle has no DWARF file", []
    uuids: list[str] = []
    for path in dwarf:
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            return str(exc), []
        uuids += [s.uuid for s in slices if s.uuid and s.filetype_name == "MH_DSYM"]
    wanted = dashed(os.path.basename(entry))
    if wanted not in uuids:
        return f"holds no dSYM of {wanted}", []
    for uuid in uuids:
        info = bundle.read_uuid_plist(bundles[0], uuid)
        named = info.get("DBGDSYMPath")
        if isinstance(named, str) and not os.path.exists(named):
            return f"its {uuid}.plist names {named}, which does not exist", []
    return None, uuids


def _entry_dwarf_files(bundle_dir: str) -> list[str]:
    folder = os.path.join(bundle_dir, bundle.DWARF_SUBDIR)
    try:
        return sorted(os.path.join(folder, name) for name in os.listdir(folder))
    except OSError:
        return []


def _link_problem(link: str, uuid: str) -> str | None:
    if not os.path.exists(link):
        return f"points to {os.readlink(link)}, which does not exist"
    try:
        found = macho.slice_for_uuid(macho.read_slices(link), uuid)
    except macho.MachOError as exc:
        return f"points to a file that is no Mach-O: {exc}"
    if found is None:
        return f"points to {os.path.realpath(link)}, which does not carry {uuid}"
    return None


def _uuid_of_link(link: str) -> str | None:
    digits = hex_of_link(link)
    if len(digits) != 32 or not all(c in "0123456789ABCDEF" for c in digits):
        return None
    return dashed(digits)


def _unlinker(path: str) -> Callable[[], None]:
    return lambda: atomic.unlink_quietly(path)


def _tree_remover(path: str) -> Callable[[], None]:
    return lambda: shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
