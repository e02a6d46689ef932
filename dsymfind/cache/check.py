"""Verifying the whole cache, and repairing it: `dsymfind check [--repair]`.

Three kinds of finding:
- invalid: breaks a guarantee (a link to nothing or to the wrong UUID, an entry that
  is not a complete bundle of the UUID it is named by). Never expected; --repair
  removes it.
- leftover: what an interrupted run leaves (staging folders, temporary files, a
  admitted entry whose links were not made yet, a record of a dead download). The
  cache is still valid: no final name leads to it, and the next run for the same UUID
  clears or completes it. --repair does that now.
- foreign: not made by dsymfind. Reported and always left alone.

A symlink where the cache keeps a folder of its own (an entry, a staging folder, a folder
of the UUID tree) is invalid and never followed: --repair removes the link, never what it
leads to. A remembered answer naming a dSYM outside the cache and its origin is invalid
(it is never served; --repair removes it), and so is one that would be served while its
dSYM no longer carries the UUID. Folders that others own or may write are the command's
business (commands/check.py): nothing is judged, let alone repaired, in such a cache.

Each entry, link and download record is judged under its UUID's download lock, taken
without waiting (a busy one is being written and is skipped); with --repair it is
repaired at once under that same lock, so no repair acts on what another process
changed since. Entries go the one safe way (cache/removal.py), all after one grace period.
Everything is listed before it is judged: what a removal (gc) took away in between is
gone, not invalid.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from dsymfind import answers, atomic, debugsymbols, paths, permissions, processes
from dsymfind.apple import bundle, macho
from dsymfind.cache import entries, locks, negative, place, records, systems
from dsymfind.cache.entries import executable_file, hex_folders, mtime
from dsymfind.cache.removal import STALE_PARTIAL_AGE, Removal, partial_written, remove_partial
from dsymfind.cache.tree import hex_of_link, tree_links, uuid_of_link
from dsymfind.paths import CachePaths
from dsymfind.stores.base import read_partial_meta
from dsymfind.uuids import dashed, normalize_uuid, uuid_hex

INVALID, LEFTOVER, FOREIGN = "invalid", "leftover", "foreign"
if TYPE_CHECKING:
    from dsymfind.cache.symcache_files import TableCheck

    EntryCheck = Callable[[str, dict[str, str]], Iterator["Finding"]]


@dataclass
class Finding:
    kind: str
    path: str
    reason: str
    # Called under the lock right after judging; True when the problem is gone.
    repair: Callable[[], bool] | None = None
    repaired: bool = False


@dataclass
class Report:
    findings: list[Finding]
    entries: int
    links: int

    def count(self, kind: str) -> int:
        return sum(1 for f in self.findings if f.kind == kind)


class Checker:
    def __init__(
        self,
        cache: CachePaths,
        *,
        stale_after: float,
        repair: bool = False,
        origins: Sequence[str] | None = None,
        symcaches: TableCheck | None = None,
    ) -> None:
        """`stale_after`: seconds after which untracked staging debris cannot be a live run's.

        `origins`: the configured origins remembered answers may come from (Lookup.origins);
        without them, only answers remembered from the cache itself are judged.
        `symcaches`: what symbolic makes of a SymCache table; without it, symcaches/ is
        not judged.
        """
        self.cache = cache
        self.symcaches = symcaches
        self.stale_after = stale_after
        self.repair = repair
        self.origins = [debugsymbols.CACHE_ORIGIN] if origins is None else list(origins)
        self.judge_all_answers = origins is not None
        self.now = time.time()
        self.removal = Removal(cache)

    def run(self) -> Report:
        # Symlinks where the cache keeps folders of its own go first, unfollowed: what
        # follows judges (and relinks) only the cache's own folders.
        findings = self._repaired(self._planted_links())
        links = tree_links(self.cache.uuids)
        entries = 0
        with Removal(self.cache, links) as self.removal:
            for folder, check in (
                (self.cache.dsyms, self._dsym),
                (self.cache.executables, self._exe),
            ):
                findings += self._foreign(folder)
                for entry in hex_folders(folder):
                    if os.path.islink(entry):
                        continue  # reported above, and never followed
                    judged = self._locked(entry, check, links)
                    if judged is not None:
                        entries += 1
                        findings += judged
            findings += self._repaired(self._links(links))
            findings += self._repaired(self._answers())
            findings += self._repaired(self._staging())
            findings += self._repaired(self._temp_files())
            findings += self._repaired(self._records())
            findings += self._repaired(self._symcaches())
            findings += self._repaired(self._systems())
            self._finish_removals(findings)
        return Report(findings, entries, len(links))

    def _locked(self, entry: str, check: EntryCheck, links: dict[str, str]) -> list[Finding] | None:
        """An entry's findings, judged under its locks; None when it is gone."""
        hex_name = os.path.basename(entry)
        if not self.removal.claim_entry(entry, removing=False):
            return []  # being downloaded or evicted right now
        try:
            # Listed before its lock was had: a removal (gc) may have taken it since. It is
            # gone, not invalid.
            if not os.path.lexists(entry):
                return None
            return self._repaired(check(entry, links))
        finally:
            self.removal.release(hex_name)

    def _repaired(self, findings: Iterable[Finding]) -> list[Finding]:
        """Each finding repaired (when asked) as soon as it is judged, before the next."""
        done = []
        for finding in findings:
            if self.repair and finding.repair is not None:
                try:
                    finding.repaired = finding.repair()
                except OSError as exc:
                    finding.reason += f" (repair failed: {exc.strerror or exc})"
            done.append(finding)
        return done

    def _finish_removals(self, findings: list[Finding]) -> None:
        failed = set(self.removal.finish())
        for finding in findings:
            if finding.path in failed and finding.repaired:
                finding.repaired = False
                finding.reason += " (repair failed: could not remove it)"

    # entries

    def _dsym(self, entry: str, links: dict[str, str]) -> Iterator[Finding]:
        problem, uuids = entries.dsym_problem(entry)
        if problem is not None:
            yield Finding(INVALID, entry, problem, self._remover(entry))
            return
        yield from self._named_executables(entry, uuids)
        linked = {hex_of_link(link) for link in links}
        unlinked = [u for u in uuids if u.replace("-", "") not in linked]
        if unlinked:
            yield Finding(
                LEFTOVER,
                entry,
                f"admitted but not linked yet: {', '.join(unlinked)}",
                self._relinker(entry),
            )

    def _named_executables(self, entry: str, uuids: list[str]) -> Iterator[Finding]:
        """Per-UUID plists naming an executable that is gone (DebugSymbols reads them)."""
        found = entries.entry_bundle(entry)
        if found is None:
            return  # judged already: _dsym_problem
        for uuid in uuids:
            named = place.rich_executable(found, uuid)
            if named is not None and not entries.exists(named):
                yield Finding(
                    INVALID,
                    bundle.uuid_plist_path(found, uuid),
                    f"names the executable {named}, which does not exist",
                    self._unnamer(found, uuid),
                )

    def _unnamer(self, found: str, uuid: str) -> Callable[[], bool]:
        def unname() -> bool:
            # The UUID's lock too: its downloader writes this plist (--copyExecutable).
            with self.removal.claimed(uuid_hex(uuid)) as held:
                named = place.rich_executable(found, uuid)  # judged again, under the locks
                if held and named is not None and not entries.exists(named):
                    place.drop_rich_executable(found, uuid)
                    named = None
                return named is None

        return unname

    def _exe(self, entry: str, links: dict[str, str]) -> Iterator[Finding]:
        uuid = dashed(os.path.basename(entry))
        path = executable_file(entry)
        if path is None:
            yield Finding(INVALID, entry, "holds no one executable", self._remover(entry))
            return
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
            yield Finding(INVALID, entry, problem, self._remover(entry))

    def _relinker(self, entry: str) -> Callable[[], bool]:
        def relink() -> bool:
            place.link_entry(self.cache, entry)
            return True

        return relink

    def _remover(self, entry: str) -> Callable[[], bool]:
        def remove() -> bool:
            # Its lock is claimed (_locked judges under it); a helper may still be answering
            # from it, and its answer must name paths that exist: a later run removes it.
            if not self.removal.claim_use(os.path.basename(entry)):
                return False
            self.removal.take(entry)
            return True

        return remove

    def _foreign(self, folder: str) -> Iterator[Finding]:
        ours = set(hex_folders(folder))
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            path = os.path.join(folder, name)
            if path not in ours and not os.path.islink(path):  # links: _planted_links
                yield Finding(FOREIGN, path, "not made by dsymfind; left alone")

    # symlinks in the place of the cache's own folders

    def _planted_links(self) -> Iterator[Finding]:
        for path, (_, fix), is_link in permissions.folder_problems(self.cache.root):
            if is_link:
                reason = f"{permissions.PLANTED_LINK} (fix: {fix})"
                yield Finding(INVALID, path, reason, _link_unlinker(path))

    # remembered answers

    def _answers(self) -> Iterator[Finding]:
        try:
            names = sorted(os.listdir(self.cache.answers))
        except OSError:
            return
        for name in names:
            if paths.temp_writer(name) is not None:
                continue  # _temp_files
            path = os.path.join(self.cache.answers, name)
            uuid = normalize_uuid(name)
            if uuid is None or uuid_hex(uuid) != name:
                yield Finding(FOREIGN, path, "not made by dsymfind; left alone")
                continue
            judged = self._judge_answer(path, uuid)
            if judged is not None:
                kind, reason = judged
                yield Finding(kind, path, reason, self._answer_remover(path, uuid))

    def _judge_answer(self, path: str, uuid: str) -> tuple[str, str] | None:
        """Why a remembered answer is invalid (or a leftover); None when it is fine, or
        harmless: damaged, or stale (a lookup never serves it and writes a new one)."""
        record = atomic.read_marshal(path)
        try:
            answer, origin = record["answer"], record["source"]
        except (TypeError, KeyError, IndexError):
            return None
        if not isinstance(answer, dict) or not isinstance(origin, str):
            return None
        if origin not in self.origins:
            if not self.judge_all_answers:
                return None
            return LEFTOVER, f"remembered from {origin}, no longer configured; never served"
        if origin == debugsymbols.SYSTEM_ORIGIN:
            return self._judge_system_answer(record, answer, uuid)
        dsym = answer.get(debugsymbols.DSYM_PATH)
        if not isinstance(dsym, str):
            return None  # no answer anyone would serve
        problem = debugsymbols.dsym_misplaced(dsym, origin, uuid=uuid, cache_root=self.cache.root)
        if problem is not None:
            return INVALID, f"{problem}; never served"
        if answers.check(record, [origin], uuid=uuid, cache_root=self.cache.root) is None:
            return None
        try:  # served as it stands: it must still verify
            found = macho.slice_for_uuid(macho.read_slices(dsym), uuid)
        except macho.MachOError as exc:
            if not os.path.exists(dsym):
                return None  # removed since it was stat-ed: the answer is stale, never served
            return INVALID, f"names {dsym}, which is no Mach-O: {exc}"
        if found is None:
            return INVALID, f"names {dsym}, which does not carry {uuid}"
        return None

    def _judge_system_answer(
        self, record: object, answer: dict[str, object], uuid: str
    ) -> tuple[str, str] | None:
        """A system image's answer that would be served must name a file carrying the UUID."""
        origins = [debugsymbols.SYSTEM_ORIGIN]
        if answers.check(record, origins, uuid=uuid, cache_root=self.cache.root) is None:
            return None  # never served: a lookup builds it again
        executable = str(answer.get(debugsymbols.SYMBOL_RICH_EXECUTABLE))
        problem = _system_image_problem(executable, uuid)
        return None if problem is None else (INVALID, f"{problem}; served as it stands")

    def _answer_remover(self, path: str, uuid: str) -> Callable[[], bool]:
        def remove() -> bool:
            # Lookups rewrite answers without a lock: judged again, then removed at once.
            if self._judge_answer(path, uuid) is not None:
                atomic.unlink_quietly(path)
            return self._judge_answer(path, uuid) is None

        return remove

    # the UUID tree

    def _links(self, links: dict[str, str]) -> Iterator[Finding]:
        for link in links:
            if paths.temp_writer(link) is not None:
                if not self._live_temp(link):
                    yield Finding(LEFTOVER, link, "an unfinished link", _unlinker(link))
                continue
            uuid = uuid_of_link(link)
            if uuid is None:
                yield Finding(FOREIGN, link, "not a UUID entry; left alone")
                continue
            problem = _link_problem(link, uuid, self.cache.root)
            if problem is not None:
                yield Finding(INVALID, link, problem, self._link_remover(link, uuid))

    def _link_remover(self, link: str, uuid: str) -> Callable[[], bool]:
        root = self.cache.root

        def unlink() -> bool:
            if not self.removal.claim(uuid_hex(uuid)):
                return False  # being downloaded right now: it may be fixing this very link
            try:
                if _link_problem(link, uuid, root) is not None:  # judged again, under the lock
                    atomic.unlink_quietly(link)
                return _link_problem(link, uuid, root) is None
            finally:
                self.removal.release(uuid_hex(uuid))

        return unlink

    # debris

    def _staging(self) -> Iterator[Finding]:
        try:
            names = sorted(os.listdir(self.cache.tmp))
        except OSError:
            return
        for name in names:
            path = os.path.join(self.cache.tmp, name)
            owner = paths.partial_owner(name)
            if owner is not None and not os.path.islink(path):
                if not locks.is_held(self.cache, owner):  # else a download may continue it
                    yield from self._partials(path)
                continue
            if os.path.islink(path) or self._staging_in_use(name, path):
                continue  # a link: _planted_links
            yield Finding(
                LEFTOVER, path, "staging debris of an interrupted run", _tree_remover(path)
            )

    def _partials(self, folder: str) -> Iterator[Finding]:
        """A UUID's transfers cut part-way, kept for the next run to continue: harmless, so
        a leftover whatever the sidecar says; never judged as a dSYM, being unfinished.
        --repair removes only those gc would (not written for a day): a fresh one is a
        lookup's head start, and `gc` or the next download settles it."""
        files = [path for _, path in self.cache.partial_files() if os.path.dirname(path) == folder]
        for path in files:
            meta = read_partial_meta(path)
            total = meta.get("total") if meta else None
            kept = meta.get("bytes") if meta else None
            of = f"{kept} of {total} bytes, " if isinstance(kept, int) else ""
            age = self.now - partial_written(path)
            stale = age > STALE_PARTIAL_AGE
            yield Finding(
                LEFTOVER,
                path,
                f"a resumable partial download ({of}written {_age_text(age)} ago"
                + ("; stale)" if stale else "; kept until it is a day old)"),
                self._partial_remover(path) if stale else None,
            )
        if not files:
            yield Finding(
                LEFTOVER, folder, "an empty partial downloads folder", _tree_remover(folder)
            )

    def _partial_remover(self, path: str) -> Callable[[], bool]:
        owner = paths.partial_owner(os.path.basename(os.path.dirname(path)))

        def remove() -> bool:
            # Under the UUID's lock: a download that began meanwhile may be continuing it.
            if owner is None:
                return False
            with self.removal.claimed(owner) as held:
                if not held:
                    return False
                remove_partial(path)
            return not os.path.lexists(path)

        return remove

    def _staging_in_use(self, name: str, path: str) -> bool:
        owner = paths.staging_owner(name)
        if owner is not None:
            return locks.is_held(self.cache, owner)  # a download's own staging folder
        return self.now - mtime(path) < self.stale_after

    def _temp_files(self) -> Iterator[Finding]:
        folders = [self.cache.root, *self.cache.temp_sibling_folders()]
        folders += negative.folders(self.cache)  # its markers are per fingerprint
        for folder in folders:
            for path in glob.glob(os.path.join(glob.escape(folder), "*" + paths.TEMP_SUFFIX)):
                if not self._live_temp(path):
                    yield Finding(
                        LEFTOVER, path, "a temporary file of a dead process", _unlinker(path)
                    )

    def _live_temp(self, path: str) -> bool:
        """A `<name>.<pid>.tmp` file whose writer still runs."""
        writer = paths.temp_writer(path)
        return writer is not None and processes.alive(writer)

    def _symcaches(self) -> Iterator[Finding]:
        """symbolicate's tables, each read and its digest checked as symbolicate does:
        rebuilt from their dSYM when gone, so any bad one may go (a folder with it)."""
        from dsymfind.cache import symcache_files

        tables = self.symcaches
        if tables is None:
            return
        for judged in symcache_files.judge_all(self.cache, tables):
            repair = (
                None
                if judged.kind == FOREIGN
                else partial(symcache_files.remove_untrusted, judged.path, tables)
            )
            yield Finding(judged.kind, judged.path, judged.reason, repair)

    def _systems(self) -> Iterator[Finding]:
        """Records of system images (`dsymfind index`): one whose file is gone is a
        leftover (never answered; gc drops it too), one whose file no longer carries the
        UUID is invalid (the helper checks the file before it answers, symbolicate may not)."""
        try:
            names = sorted(os.listdir(self.cache.systems))
        except OSError:
            return
        for name in names:
            path = os.path.join(self.cache.systems, name)
            if paths.temp_writer(name) is not None:
                continue  # _temp_files
            if systems.is_shard_name(name):
                yield from self._system_shard(name, path)
            elif systems.is_hex_name(name):
                reason = "a record of the older layout (a file per slice); index moves it"
                yield Finding(LEFTOVER, path, reason, self._systems_migrator(path))
            else:
                yield Finding(FOREIGN, path, "not made by dsymfind; left alone")

    def _system_shard(self, shard: str, path: str) -> Iterator[Finding]:
        found = atomic.read_marshal(path)
        if not isinstance(found, dict):
            reason = "a damaged shard of system image records"
            yield Finding(
                LEFTOVER, path, reason, partial(systems.discard_damaged, self.cache, shard)
            )
            return
        for name, value in sorted((n, v) for n, v in found.items() if systems.in_shard(n, shard)):
            image = systems.image_of(name, value)
            label = systems.label(self.cache, name)
            if image is None:
                yield Finding(LEFTOVER, label, "a damaged record", self._system_dropper(name, None))
            elif not os.path.isfile(image.path):
                reason = f"a system image record whose file {image.path} is gone"
                yield Finding(LEFTOVER, label, reason, self._system_dropper(name, image))
            else:
                problem = _system_image_problem(image.path, image.uuid)
                if problem is not None:
                    yield Finding(INVALID, label, problem, self._system_dropper(name, image))

    def _system_dropper(self, name: str, judged: systems.SystemImage | None) -> Callable[[], bool]:
        def drop() -> bool:
            systems.drop(self.cache, {name: judged})
            return systems.recorded(self.cache, name) is None

        return drop

    def _systems_migrator(self, old_record: str) -> Callable[[], bool]:
        def migrate() -> bool:
            systems.migrate(self.cache)
            return not os.path.lexists(old_record)

        return migrate

    def _records(self) -> Iterator[Finding]:
        for path in sorted(glob.glob(os.path.join(glob.escape(self.cache.downloads), "*.json"))):
            hex_name = os.path.basename(path).removesuffix(".json")
            if _running(self.cache, hex_name) and not locks.is_held(self.cache, hex_name):
                yield Finding(LEFTOVER, path, "a download that died", self._record_remover(path))

    def _record_remover(self, path: str) -> Callable[[], bool]:
        hex_name = os.path.basename(path).removesuffix(".json")

        def remove() -> bool:
            if not self.removal.claim(hex_name):
                return False  # a new download of the UUID began meanwhile
            try:
                if _running(self.cache, hex_name):
                    atomic.unlink_quietly(path)
                return not _running(self.cache, hex_name)
            finally:
                self.removal.release(hex_name)

        return remove


def _system_image_problem(path: str, uuid: str) -> str | None:
    """Why the file a system image's record or answer names is not that image; else None."""
    from dsymfind.apple import device_support

    try:
        slices = macho.read_slices(path)
    except macho.MachOError as exc:
        return f"names {path}, which is no Mach-O: {exc}"
    found = macho.slice_for_uuid(slices, uuid)
    if found is None or not device_support.is_image(found):
        return f"names {path}, which does not carry {uuid} as an image"
    return None


def _running(cache: CachePaths, hex_name: str) -> bool:
    record = records.read(cache, hex_name)
    return record is not None and record.get("state") == records.RUNNING


def _link_problem(link: str, uuid: str, root: str) -> str | None:
    """What is wrong with a tree link; None when it is right, or gone meanwhile."""
    try:
        named = os.readlink(link)
    except OSError:
        return None
    if not os.path.exists(link):
        return f"points to {named}, which does not exist"
    escape = _escape(link, named, root)
    if escape is not None:
        return escape
    try:
        found = macho.slice_for_uuid(macho.read_slices(link), uuid)
    except macho.MachOError as exc:
        if not os.path.lexists(link):
            return None  # unlinked since it was listed (a removal's first step): gone
        return f"points to a file that is no Mach-O: {exc}"
    if found is None:
        return f"points to {os.path.realpath(link)}, which does not carry {uuid}"
    return None


def _escape(link: str, named: str, root: str) -> str | None:
    """A link into the cache whose folders lead out of it: through a symlink planted in
    the place of an entry or a bundle folder. (The file itself may be a link: a shadow's.)"""
    target = os.path.normpath(os.path.join(os.path.dirname(link), named))
    real_root = os.path.realpath(root)
    relative = None
    for spelling in (root, real_root):
        if target.startswith(spelling.rstrip(os.sep) + os.sep):
            relative = os.path.relpath(os.path.dirname(target), spelling)
            break
    if relative is None:
        return None  # a user's bundle, linked where it is
    expected = os.path.normpath(os.path.join(real_root, relative))
    if os.path.realpath(os.path.dirname(target)) == expected:
        return None
    return f"leads out of the cache through a symlink inside it, to {os.path.realpath(link)}"


def _link_unlinker(path: str) -> Callable[[], bool]:
    """Removes a symlink itself, never what it leads to (and nothing that is not a link)."""

    def unlink() -> bool:
        if os.path.islink(path):
            atomic.unlink_quietly(path)
        return not os.path.islink(path)

    return unlink


def _unlinker(path: str) -> Callable[[], bool]:
    def unlink() -> bool:
        atomic.unlink_quietly(path)
        return not os.path.lexists(path)

    return unlink


def _age_text(seconds: float) -> str:
    if seconds < 120:
        return f"{max(0, int(seconds))} s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min"
    return f"{seconds / 3600:.0f} h"


def _tree_remover(path: str) -> Callable[[], bool]:
    def remove() -> bool:
        shutil.rmtree(path, ignore_errors=True)
        return not os.path.lexists(path)

    return remove
