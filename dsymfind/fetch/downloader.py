"""The downloader process: one UUID, under its lock, from check to admitted cache entry.

Started detached by the helper (processes.py). Check, lock, check again: whoever waited on
the lock finds the first run's result and downloads nothing. The lock is an flock, so a
killed downloader frees it at once; what it left in the staging area is removed by the
next run for the same UUID, which alone may hold that lock.

A dSYM whose store recorded its build's commit gets its sources checked out and named in
its per-UUID plists before it is linked into the UUID tree, so that the first answer
carries the mapping (vcs/checkouts.py). That waits no later than the moment the helper that
started the run must answer (`--answer-by`; one helper `timeout` after the run began for
`dsymfind fetch`): a checkout still under way then (a slow remote) does not keep the dSYM
from being answered. It is linked without the mapping, which is written once the checkout
is done; lldb then has the symbols, and the mapping from the next session on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dsymfind import atomic, debugsymbols, paths, permissions, settings
from dsymfind.apple import macho
from dsymfind.cache import entries, locks, place, records, shadow
from dsymfind.cache.removal import Removal
from dsymfind.errors import DsymfindError
from dsymfind.fetch import backoff, fetcher
from dsymfind.local_lookup import Lookup
from dsymfind.paths import CachePaths
from dsymfind.stores import base, layouts, transfer
from dsymfind.uuids import uuid_hex

if TYPE_CHECKING:
    import logging

    from dsymfind.cache.staged import Staged
    from dsymfind.settings import Settings
    from dsymfind.stores.layouts import Want
    from dsymfind.vcs.checkouts import Deadline, Outcome, Pending
    from dsymfind.vcs.provenance import SourceRecord


# Before the helper's own deadline, the dSYM is in the tree by this much: the waiting helper's
# last poll, its look at the new entry and its answer, on a loaded machine too.
ANSWER_MARGIN = 0.5


class Download:
    """One run for one UUID; `run` returns the exit status (0: in the cache afterwards)."""

    def __init__(
        self,
        uuid: str,
        env: Mapping[str, str],
        how: backoff.Asking,
        *,
        answer_by: float | None = None,
        tell: int | None = None,
        current: Settings | None = None,
        secured: str | None = None,
        doors: place.Doors | None = None,
    ) -> None:
        """`how`: what this run takes on trust of the negative cache and backoff; `tell`, a
        descriptor closed once the record is final (the helper that started the run waits
        on it); `current`, the settings `env` gives, when the caller has them loaded, and
        `secured`, the cache's real path as permissions.secure_cache checked it in this
        process (a batch: one load and one check for all its downloads; the check lists the
        entry folders, which grow with every download), and `doors`, the admissions' shared
        descriptors for that path (place.Doors)."""
        from dsymfind.log import get_logger

        self.uuid, self.env, self.how = uuid, env, how
        self._started = time.monotonic()  # git for the sources runs within download_timeout
        self._answer_by = answer_by  # time.time() of the starting helper's answer, if any
        self._tell = tell
        self._secured = secured
        self._doors = doors
        self.settings: Settings = settings.load(env) if current is None else current
        self._use_cache(self.settings["cache_dir"])
        self.log: logging.Logger = get_logger(self.settings["log_file"])
        # For `discard_staging`, called from another thread: whether this run holds the
        # UUID's lock (set and cleared under `_guard`, inside the lock's hold) and whether
        # its staging folders were discarded (no new one is made after).
        self._guard = threading.Lock()
        self._holding = False
        self._discarded = False
        # Whether the last fetch left partial files of cut transfers (their folder not empty).
        self._partials_left = True
        # A checkout whose mapping is written once the record says done: one that missed
        # the moment to link, or a cached dSYM's that was never made.
        self._sources_later: Pending | None = None
        # What the run came to, for a caller in this process (batch.py): the record's final
        # state and message, and the cache's answer once the UUID is in it.
        self.outcome: tuple[str, str] | None = None
        self.answer: debugsymbols.Answer | None = None

    def _use_cache(self, root: str) -> None:
        self.cache = CachePaths(root)
        self.negative = backoff.NegativeCache(self.cache, self.settings, self.how)
        self.backoff = backoff.Backoff(self.cache, self.settings, self.how)

    def run(self, *, copy_executable: bool) -> int:
        # From here on only the checked path: the configured one may pass through a link.
        self._use_cache(self._secured or permissions.secure_cache(self.cache.root))
        with (
            locks.download_lock(self.cache, self.uuid).acquire(
                timeout=self.settings["download_timeout"]
            ),
            self._holding_lock(),
        ):
            status = records.StatusWriter(self.cache, self.uuid)
            try:
                state, message = self._locked(status, copy_executable)
            except BaseException as exc:
                status.finish(records.FAILED, f"internal error: {exc!r}")
                self._told()
                raise
            status.finish(state, message)
            self.outcome = (state, message)
            self._told()
            if self._sources_later is not None:
                # After the record says done, still under the lock: a helper waiting for the
                # executable, or for the record, never waits behind git.
                self._map_placed(self._sources_later)
        self.log.info("%s: %s: %s", self.uuid, state, message)
        return 0 if state == records.DONE else 1

    def _told(self) -> None:
        """The record is final: the helper waiting on our pipe looks now, not at its poll."""
        tell, self._tell = self._tell, None
        if tell is not None:
            with contextlib.suppress(OSError):  # closed already, or never a descriptor
                os.close(tell)

    def _locked(self, status: records.StatusWriter, copy_executable: bool) -> tuple[str, str]:
        self._remove_stale_staging()
        found = self._in_cache()
        if found is not None and debugsymbols.DSYM_PATH not in found:
            # An executable alone (fetched when no store had the dSYM, or a system image
            # recorded here): a dSYM published since is better; without one it still answers.
            state, message = self._fetch_dsym(status)
            if state == records.DONE:
                found = self._admitted()
                if found is None:
                    return records.FAILED, "admitted, but the cache does not answer it"
                return records.DONE, message
            if state != records.NOT_FOUND:
                return state, message
            return records.DONE, f"no dSYM ({message}); its executable is in the cache"
        if found is None:
            state, message = self._fetch_dsym(status)
            if state == records.NOT_FOUND:
                # No store has a dSYM (Apple ships none for its libraries): the executable
                # alone, whose symbol table names functions, is the next best answer.
                return self._fetch_executable_alone(message, status)
            if state != records.DONE:
                return state, message
            found = self._admitted()
            if found is None:
                return records.FAILED, "admitted, but the cache does not answer it"
        else:
            message = "already in the cache"
            if self.settings["source_checkouts"]:
                self._sources_later = self._pending_for_cached()  # beside the executable
        self.answer = found
        if copy_executable and debugsymbols.SYMBOL_RICH_EXECUTABLE not in found:
            message += "; " + self._fetch_executable(found[debugsymbols.DSYM_PATH], status)
            self.answer = None  # the executable is named now: the cache's answer changed
        return records.DONE, message

    def _in_cache(self) -> dict[str, str] | None:
        """Re-check under the lock; a admitted entry whose links a crash lost is relinked.

        An entry that does not verify (a shadow whose user's file was rebuilt with another
        UUID) would block publication for good: it is removed, the one safe way.
        """
        entry = entries.entry_dir(self.cache, self.uuid)
        if os.path.isdir(entry):
            if entries.dsym_entry_problem(entry) is None:
                place.link_entry(self.cache, entry)
            else:
                with Removal(self.cache) as doomed:
                    doomed.take(entry)  # under this run's own lock
        return self._admitted()

    def _admitted(self) -> dict[str, str] | None:
        """The cache's answer (remembered by the lookup) for what this run admitted and
        linked under its lock: the entry needs no second check, nor its links."""
        return Lookup(self.settings, cache_root=self.cache.root).find(self.uuid)

    def _fetch_dsym(self, status: records.StatusWriter) -> tuple[str, str]:
        negative = self.negative.marker(self.uuid)
        absent = self.negative.absent_for(negative)
        if absent is not None:
            return records.NOT_FOUND, backoff.absent_message("it", absent)
        with (
            self._staging() as staging,
            self._fetching(layouts.DSYM, staging, status) as (
                outcome,
                skipped,
            ),
        ):
            admitted = outcome.staged is not None and outcome.winner is not None
            if outcome.staged is not None and outcome.winner is not None:
                with self._sources_first(outcome.staged):
                    self._admit(outcome.staged, staging, outcome.winner.label)
                self.negative.forget(negative)
        if admitted and outcome.winner is not None:
            # Once the losers have settled: their partial files would only wait for gc.
            self._remove_partials()
            return records.DONE, f"from {outcome.winner.label}"
        if outcome.nobody_has_it and not skipped:
            self.negative.note_absent(negative, outcome.not_found)
            return records.NOT_FOUND, "not on " + ", ".join(outcome.not_found)
        reasons = outcome.failures + skipped or ["no server configured"]
        status.note(refused=outcome.refused)
        return records.FAILED, "; ".join(reasons)

    @contextlib.contextmanager
    def _sources_first(self, staged: Staged) -> Iterator[None]:
        """Around the admission: the build's sources checked out and named in the staged
        plists, the worktree held against gc until the bundle naming it is in place. A
        checkout not done by the link deadline is left to finish after (`_sources_later`)."""
        record = None if staged.in_place else _staged_record(staged, self.uuid)
        if record is None:
            yield
            return
        from dsymfind.vcs import checkouts, git  # git and subprocess: for provenance alone

        pending = checkouts.Pending(
            self.cache, record, self.settings["source_checkouts"], self._git_deadline()
        )
        if not pending.done_by(self._link_by()):
            self._log_sources(
                "not checked out yet when a debugger may be waiting: the dSYM is answered "
                "without them, and they are named once checked out"
            )
            self._sources_later = pending
            yield
            return
        outcome = self._outcome(pending)
        said = outcome if isinstance(outcome, str) or outcome is None else outcome.described()
        with contextlib.ExitStack() as naming:
            if outcome is not None and not isinstance(outcome, str):
                try:
                    naming.enter_context(
                        checkouts.naming(self.cache, outcome, self._git_deadline())
                    )
                    staged.plist_values.update(outcome.plist_values())
                except (git.GitError, checkouts.SourcesError) as exc:
                    said = f"no sources: {exc}"
            yield
        self._log_sources(said)

    def _map_placed(self, pending: Pending, what: str = "sources") -> str | None:
        """A checkout's mapping written into the cache's bundle of the UUID; said in the log
        and returned (None when there is nothing to say)."""
        from dsymfind.vcs import checkouts

        bundle_dir = entries.entry_bundle(entries.entry_dir(self.cache, self.uuid))
        outcome = self._outcome(pending)
        if bundle_dir is None or outcome is None:
            return None
        said = checkouts.map_placed(
            self.cache, bundle_dir, self.uuid, outcome, self._git_deadline()
        )
        self._log_sources(said, what)
        return said

    def _pending_for_cached(self) -> Pending | None:
        """A checkout for the cache's bundle of the UUID, started now, when it names no
        checkout although its store recorded a commit."""
        from dsymfind.vcs import checkouts

        bundle_dir = entries.entry_bundle(entries.entry_dir(self.cache, self.uuid))
        if bundle_dir is None or not checkouts.mapping_due(bundle_dir, self.uuid):
            return None
        record = checkouts.source_record(bundle_dir, self.uuid)
        assert record is not None  # mapping_due says there is one
        return checkouts.Pending(
            self.cache, record, self.settings["source_checkouts"], self._git_deadline()
        )

    def map_cached_sources(self) -> str | None:
        """For a dSYM the cache holds without its sources (`source_checkouts` configured
        after it was fetched, its worktree removed): check them out and name them now,
        under the UUID's lock, as its download would have. What happened, or None when the
        cache's bundle names them already or its store recorded no commit."""
        self._use_cache(permissions.secure_cache(self.cache.root))
        timeout = self.settings["download_timeout"]
        try:
            with locks.download_lock(self.cache, self.uuid).acquire(timeout=timeout):
                pending = self._pending_for_cached()
                return None if pending is None else self._map_placed(pending, "sources now")
        except locks.LockTimeout:
            raise DsymfindError(
                f"another process has been downloading {self.uuid} for over {timeout:.0f} s"
            ) from None

    def _outcome(self, pending: Pending) -> Outcome | None:
        """The checkout's outcome; None after a bug in it, logged in full."""
        try:
            return pending.outcome()
        except Exception:
            self.log.exception("%s: sources: internal error", self.uuid)
            return None

    def _log_sources(self, said: str | None, what: str = "sources") -> None:
        if said is not None:
            self.log.info("%s: %s: %s", self.uuid, what, said)

    def _git_deadline(self) -> Deadline:
        """What is left of download_timeout, which git for the sources runs within."""
        from dsymfind.vcs import checkouts

        return checkouts.Deadline(
            self._started + self.settings["download_timeout"] - time.monotonic()
        )

    def _link_by(self) -> float:
        """When a new dSYM must be in the tree (monotonic): the deadline of the helper that
        started this run, else one helper timeout after the run began, less ANSWER_MARGIN."""
        if self._answer_by is not None:
            answer_by = time.monotonic() + (self._answer_by - time.time())
        else:
            answer_by = self._started + self.settings["timeout"]
        return answer_by - ANSWER_MARGIN

    def _admit(self, staged: Staged, staging: str, label: str) -> None:
        """Into the cache: a download admitted, or a file already on this machine linked
        in place as `dsymfind index` links a user's bundle."""
        if not staged.in_place:
            values = staged.plist_values
            place.admit(self.cache, self.uuid, staged, staging, label, values, doors=self._doors)
            return
        uuids = [str(s.uuid) for s in entries.dsym_slices(staged.slices)]
        _linked, conflicts = place.link_uuids(self.cache, uuids, staged.dwarf_path)
        for conflict in conflicts:
            self.log.info("%s: %s; kept", self.uuid, conflict)

    def _fetch_executable(self, dwarf_path: str, status: records.StatusWriter) -> str:
        executable, message = self._executable(status, in_place=True)
        if executable is not None:
            self._name_executable(dwarf_path, executable)
        return message

    def _fetch_executable_alone(
        self, dsym_message: str, status: records.StatusWriter
    ) -> tuple[str, str]:
        """The executable of a UUID no store has a dSYM for, admitted into the cache's
        `executables/<HEX>`, where a lookup answers it (local_lookup.py)."""
        executable, message = self._executable(status, in_place=False)
        if executable is None:
            return records.NOT_FOUND, dsym_message
        atomic.unlink_quietly(self.cache.answer_file(uuid_hex(self.uuid)))
        return records.DONE, f"no dSYM ({dsym_message}); {message}"

    def _executable(
        self, status: records.StatusWriter, *, in_place: bool
    ) -> tuple[str | None, str]:
        """(the executable's file, what became of it): fetched and verified as an executable
        (the Mach-O reader, its UUID), or None when no store has it. `in_place`: a file a
        store keeps on this machine is used where it lies, else copied into the entry."""
        negative = self.negative.marker(self.uuid, executable=True)
        absent = self.negative.absent_for(negative)
        if absent is not None:
            return None, backoff.absent_message("the executable", absent)
        with (
            self._staging() as staging,
            self._fetching(layouts.EXECUTABLE, staging, status) as (
                outcome,
                skipped,
            ),
        ):
            if outcome.staged is None:
                if outcome.nobody_has_it and not skipped:
                    self.negative.note_absent(negative, outcome.not_found)
                return None, "executable not found"
            executable = self._place_executable(outcome.staged, staging, in_place=in_place)
        if executable is None:
            return None, "executable fetched, but its entry holds no one file"
        return executable, "executable fetched"

    def _place_executable(self, staged: Staged, staging: str, *, in_place: bool) -> str | None:
        """The executable's file: a download admitted into its cache entry, or one already
        on this machine where it is (`in_place`); None when the entry holds no one file."""
        if staged.in_place and in_place:
            return staged.dwarf_path
        admitted = _copied(staged, staging, self.uuid) if staged.in_place else staged
        if admitted is None:
            return None
        folder = place.admit_executable(self.cache, self.uuid, admitted, staging, self._doors)
        return entries.executable_file(folder)

    def _name_executable(self, dwarf_path: str, executable: str) -> None:
        """Name the executable in the cache's own bundle of the dSYM, never in a user's.

        A dSYM the cache does not own (a search path's, a file-mapped tree's, a bundle
        indexed in place) gets a shadow entry to carry the name.
        """
        entry = entries.entry_dir(self.cache, self.uuid)
        owned = entries.cache_bundle(self.cache, dwarf_path) or entries.entry_bundle(entry)
        if owned is None:
            owned = self._admit_shadow(dwarf_path)
        if owned is not None:
            place.set_rich_executable(owned, self.uuid, executable)
        # The remembered answer may name the user's file, whose stamps did not change.
        atomic.unlink_quietly(self.cache.answer_file(uuid_hex(self.uuid)))

    def _admit_shadow(self, dwarf_path: str) -> str | None:
        """A shadow entry for a user's dSYM; its bundle, or None when it is no dSYM."""
        try:
            slices = entries.dsym_slices(macho.read_slices(dwarf_path))
        except macho.MachOError:
            return None
        if not slices:
            return None
        with self._staging() as staging:
            staged = shadow.stage(staging, dwarf_path, slices)
            name = os.path.basename(str(staged.bundle_dir))
            place.admit(self.cache, self.uuid, staged, staging, dwarf_path, doors=self._doors)
        return os.path.join(entries.entry_dir(self.cache, self.uuid), name)

    @contextlib.contextmanager
    def _fetching(
        self, want: Want, staging: str, status: records.StatusWriter
    ) -> Iterator[tuple[fetcher.FetchResult, list[str]]]:
        """The fetch's outcome, to admit from before the losing candidates have settled."""
        limits = base.Limits(
            total_timeout=self.settings["download_timeout"],
            max_bytes=self.settings["max_download_bytes"],
        )
        with transfer.Session(limits) as session:
            chosen, skipped = fetcher.candidates(
                self.settings["servers"], self.uuid, want, self.env, session, self.backoff
            )
            outcome = fetcher.fetch(
                chosen,
                self.uuid,
                want,
                staging=staging,
                limits=limits,
                max_unpacked=self.settings["max_download_bytes"],
                progress=status.progress,
                log=lambda line: self.log.info("%s: %s", self.uuid, line),
                partials=self.cache.partial_dir(uuid_hex(self.uuid)),
            )
            try:
                yield outcome, skipped
            finally:
                outcome.settle()
                # Only when empty: no transfer was cut, or the cut ones were discarded.
                self._partials_left = _kept_by_rmdir(self.cache.partial_dir(uuid_hex(self.uuid)))
        for server in outcome.unhealthy:
            self.backoff.note_failing(server["url"])
        if outcome.winner is not None:
            self.backoff.note_healthy(outcome.winner.server["url"])

    @contextlib.contextmanager
    def _holding_lock(self) -> Iterator[None]:
        with self._guard:
            self._holding = True
        try:
            yield
        finally:
            # Before the lock goes: a discard under way finishes while it is still ours.
            with self._guard:
                self._holding = False

    @contextlib.contextmanager
    def _staging(self) -> Iterator[str]:
        """A new private staging folder in tmp/, removed when the context ends: with one
        rmdir when the admission took all it held, as it does."""
        with self._guard:
            if self._discarded:
                raise DsymfindError("interrupted: its staging folders were discarded")
            prefix = paths.staging_prefix(uuid_hex(self.uuid))
            try:
                # tmp/ is there but in a new cache: made only when the folder's mkdir says so.
                folder = tempfile.mkdtemp(prefix=prefix, dir=self.cache.tmp)
            except FileNotFoundError:
                os.makedirs(self.cache.tmp, mode=0o700, exist_ok=True)
                folder = tempfile.mkdtemp(prefix=prefix, dir=self.cache.tmp)
        try:
            yield folder
        finally:
            if _kept_by_rmdir(folder):
                shutil.rmtree(folder, ignore_errors=True)

    def discard_staging(self) -> None:
        """Ctrl-C in `dsymfind fetch` (batch.py): the process is about to end while this run
        goes on in a thread that cannot be stopped, so its staging folders' own cleanup would
        never run. They go now, while the lock is this process's (no other run may have
        staging folders of this UUID), and no new one is made after.

        The thread may still be writing there: each folder is first renamed, so that what
        the thread opens by its path fails instead of landing in the folder being removed; a
        folder it makes again (os.makedirs) is caught by the next pass. What it makes after
        the last pass is what a killed downloader leaves, cleared by the next run.
        """
        # Their git processes, in sessions of their own, would outlive this one; git is
        # loaded only by a dSYM carrying provenance.
        git = sys.modules.get("dsymfind.vcs.git")
        if git is not None:
            git.end_all()
        with self._guard:
            self._discarded = True
            if not self._holding:
                return  # waiting for another process's lock: those folders are its own
            for _ in range(_DISCARD_PASSES):
                leftovers = self.cache.staging_of(uuid_hex(self.uuid))
                if not leftovers:
                    return
                for folder in leftovers:
                    _remove_staging_folder(folder)

    def _remove_stale_staging(self) -> None:
        """Leftovers of a killed run for this UUID: nobody else may hold this UUID's lock.

        Its partial downloads stay (staging_of leaves them out): continuing them is the
        point of keeping them across runs."""
        for leftover in self.cache.staging_of(uuid_hex(self.uuid)):
            shutil.rmtree(leftover, ignore_errors=True)

    def _remove_partials(self) -> None:
        """Once the UUID is admitted: the cancelled candidates' partial files, when the
        fetch left any (its folder was not empty)."""
        if self._partials_left:
            shutil.rmtree(self.cache.partial_dir(uuid_hex(self.uuid)), ignore_errors=True)


# Passes over a UUID's staging folders when a run is discarded (see discard_staging).
_DISCARD_PASSES = 3
# The name a discarded staging folder takes while it is removed: still its UUID's, so the
# next run for the UUID (and `dsymfind check`) clears it should the removal be cut short.
_DISCARDED_SUFFIX = ".discarded"


def _kept_by_rmdir(folder: str) -> bool:
    """Remove `folder` when empty; whether it is still there (not empty, or not removable)
    rather than removed or missing."""
    try:
        os.rmdir(folder)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def _remove_staging_folder(folder: str) -> None:
    doomed = folder + _DISCARDED_SUFFIX
    try:
        os.rename(folder, doomed)
    except OSError:
        doomed = folder  # gone already, or a former pass's doomed name is taken: as it is
    shutil.rmtree(doomed, ignore_errors=True)


def run_download(
    uuid: str,
    env: Mapping[str, str],
    *,
    ignore_negative_cache: bool,
    copy_executable: bool,
    answer_by: float | None = None,
    tell: int | None = None,
) -> int:
    """The detached downloader a helper started: it trusts what the helper trusts."""
    how = backoff.asking(on_purpose=False, ignore=ignore_negative_cache)
    run = Download(uuid, env, how, answer_by=answer_by, tell=tell)
    return run.run(copy_executable=copy_executable)


def _copied(staged: Staged, staging: str, uuid: str) -> Staged | None:
    """A copy in `staging` of a file a store keeps on this machine, read again to carry
    `uuid` (the original may change in between): what the cache may admit; None if not."""
    from dsymfind.cache.staged import Staged

    copy = os.path.join(staging, "adopted")
    shutil.copyfile(staged.dwarf_path, copy)
    try:
        slices = macho.read_slices(copy)
    except macho.MachOError:
        return None
    if macho.slice_for_uuid(slices, uuid) is None:
        return None
    copied = Staged(copy, slices, None)
    copied.name = os.path.basename(staged.dwarf_path)
    return copied


def download_detached(
    uuid: str,
    *,
    ignore_negative_cache: bool,
    copy_executable: bool,
    answer_by: float | None,
    tell: int | None = None,
) -> int:
    """The hidden verb's run, in the process processes.py started: its stdio is /dev/null,
    so the log is the only place it reports to. `tell`: a descriptor closed once the record
    is final (the helper waiting on it)."""
    from dsymfind.uuids import normalize_uuid

    os.umask(paths.PRIVATE_UMASK)  # it writes the cache, as the helper that started it would
    if tell is not None:
        with contextlib.suppress(OSError):  # not a descriptor: nobody to tell
            os.set_inheritable(tell, False)  # git and the like must not hold it open
    try:
        # Not commands/fetch.py's `normalized`: it would load the batch (a thread pool)
        # before the first request.
        checked = normalize_uuid(uuid)
        if checked is None:
            raise DsymfindError(f"not a UUID: {uuid!r}")
        return run_download(
            checked,
            os.environ,
            ignore_negative_cache=ignore_negative_cache,
            copy_executable=copy_executable,
            answer_by=answer_by,
            tell=tell,
        )
    except DsymfindError as exc:
        from dsymfind.log import configured_log_file, get_logger

        get_logger(configured_log_file(os.environ)).error("%s: %s", uuid, exc)
        raise


def main(words: list[str], *, resident_child: bool = False) -> int:
    """The entry point of the process processes.spawn_downloader starts: its words read
    without argparse and dsymfind.main (a tenth of the downloader's start-up). Words it was
    not written for (a helper of another dsymfind version) are logged and refused: its
    helper answers at its deadline, and the next lookup starts a downloader of this one.

    A spawned downloader leaves a resident downloader beside it for the misses that follow
    (fetch/resident.py); `resident_child`: this is one of its children, started by a fork."""
    request = _spawned_request(words)
    if request is None:
        from dsymfind.log import configured_log_file, get_logger

        get_logger(configured_log_file(os.environ)).error("downloader: not its words: %r", words)
        return 2
    if not resident_child:
        _start_resident(request["tell"])
    try:
        return download_detached(**request)
    except DsymfindError:
        return 1  # logged
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: the details go to the log
        from dsymfind.log import log_internal_error

        log_internal_error(exc, os.environ)
        return 1


def _start_resident(tell: int | None) -> None:
    """The resident downloader for this cache, when configured and none listens yet."""
    from dsymfind.fetch import resident

    try:
        current = settings.load(os.environ)
        root = permissions.refuse_unsafe(current["cache_dir"])
    except (DsymfindError, OSError):
        return  # the download itself says why, in the log
    keep_closed = () if tell is None else (tell,)
    resident.start_beside(
        CachePaths(root), current["resident_downloader"], forked_download, keep_closed
    )


def serve_as_agent(env: Mapping[str, str]) -> int:
    """The login agent's resident downloader (helper.py's RESIDENT_AGENT_ARGS); its exit
    status."""
    from dsymfind.fetch import resident

    return resident.serve_agent(env, forked_download)


def forked_download(words: list[str]) -> int:
    """What a resident's forked child runs (fetch/resident.py)."""
    return main(words, resident_child=True)


def _spawned_request(words: list[str]) -> dict[str, Any] | None:
    """download_detached's arguments from the words processes.spawn_downloader writes;
    None for any other words."""
    from dsymfind import processes

    if len(words) < 2 or words[0] != processes.DOWNLOAD_VERB or words[1].startswith("-"):
        return None
    request: dict[str, Any] = {
        "uuid": words[1],
        "ignore_negative_cache": False,
        "copy_executable": False,
        "answer_by": None,
        "tell": None,
    }
    switches = {
        processes.IGNORE_NEGATIVE_CACHE_FLAG: "ignore_negative_cache",
        processes.COPY_EXECUTABLE_FLAG: "copy_executable",
    }
    valued = {processes.ANSWER_BY_FLAG: ("answer_by", float), processes.TELL_FLAG: ("tell", int)}
    rest = iter(words[2:])
    for word in rest:
        if word in switches:
            request[switches[word]] = True
        elif word in valued:
            name, kind = valued[word]
            try:
                request[name] = kind(next(rest))
            except (StopIteration, ValueError):
                return None
        else:
            return None
    return request


def _staged_record(staged: Staged, uuid: str) -> SourceRecord | None:
    """The source record the staged dSYM's plist will keep: the store's metadata's, else
    the one in a downloaded bundle's own per-UUID plist."""
    from dsymfind.apple import bundle
    from dsymfind.vcs import provenance

    values = staged.plist_values
    if debugsymbols.SOURCE_CONTROL not in values and staged.bundle_dir is not None:
        values = bundle.read_uuid_plist(staged.bundle_dir, uuid)
    return provenance.checked(values.get(debugsymbols.SOURCE_CONTROL))
