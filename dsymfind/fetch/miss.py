"""The helper's miss path: negative cache, the detached downloader, and the deadline.

The helper never downloads itself. It starts a downloader unless one is already at work
on the UUID (its lock is held), however little time is left, then waits, never past its
deadline, for the cache to answer or the downloader to give up. Past the deadline it
answers a DBGError saying the download goes on; a later lookup answers from the cache
(DebugSymbols documentation).
"""

from __future__ import annotations

import os
import time

from dsymfind.errors import DsymfindError
from dsymfind.uuids import tree_entry, uuid_hex

# The negative-cache answer is a hot path too: json, threading, subprocess load later.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.debugsymbols import Answer
    from dsymfind.local_lookup import Lookup

# How often a waiting helper looks at the cache and the download's status; more often once
# every byte has arrived, when verifying and admitting take tens of milliseconds.
POLL_INTERVAL = 0.05
FINISHING_POLL_INTERVAL = 0.01
# Kept back from the deadline for printing the answer and exiting.
EXIT_MARGIN = 0.15


def fetch_on_miss(
    lookup: Lookup,
    uuid: str,
    deadline: float,
    *,
    ignore_negative_cache: bool,
    copy_executable: bool,
) -> Answer | None:
    """The answer once the download finished in time; None when no server has the UUID.

    The caller has checked that servers are configured and the negative cache allows it.

    With `copy_executable`, the answer comes from the finished download (the executable
    too), or is the dSYM alone at the deadline.
    Raises DownloadContinues at the deadline and DownloadFailed when it failed.
    """
    from dsymfind.fetch import backoff

    # A dead host must not cost every lookup a downloader start.
    how = backoff.asking(on_purpose=False, ignore=ignore_negative_cache)
    servers = backoff.Backoff(lookup.cache, lookup.settings, how)
    waiting = servers.all_waiting([server["url"] for server in lookup.settings["servers"]])
    if waiting is not None:
        raise DownloadFailed(backoff.all_failing_message(waiting))
    # Started even when no time is left to wait (a small `timeout`, or the later slices of a
    # universal file): the downloader is detached, so starting it costs this helper a fork
    # and exec, never the child's start-up; refusing would mean nothing is ever fetched.
    waiting_since = time.time()

    claim = _spawn_claim(lookup, uuid)
    starter = (
        None
        if claim is None
        else _Starter(lookup, uuid, deadline, ignore_negative_cache, copy_executable)
    )
    try:
        if starter is not None:
            starter.start_if_free()
        return _wait(
            lookup,
            uuid,
            deadline - EXIT_MARGIN,
            waiting_since,
            until_done=copy_executable,
            starter=starter,
        )
    finally:
        if starter is not None:
            starter.close()
        if claim is not None:
            os.close(claim)


class _Starter:
    """Starts the downloader once the UUID's download lock is free: at once, or later in
    the wait when the lock's holder was a download ending as this helper began (its
    record older than our wait: nobody would start the one we wait for)."""

    def __init__(
        self,
        lookup: Lookup,
        uuid: str,
        deadline: float,
        ignore_negative_cache: bool,
        copy_executable: bool,
    ) -> None:
        self.lookup, self.uuid, self.deadline = lookup, uuid, deadline
        self.ignore_negative_cache, self.copy_executable = ignore_negative_cache, copy_executable
        self.child: int | None = None
        # The end of a pipe the downloader closes once its record is final (or it dies):
        # this helper wakes then, not at its next poll. For a child of the resident
        # downloader, the connection to it, which it closes the same way.
        self.told: int | None = None
        self.resident = False  # the child is the resident downloader's, not ours

    def start_if_free(self) -> None:
        from dsymfind.cache import locks

        if self.child is not None or locks.is_held(self.lookup.cache, self.uuid):
            return
        from dsymfind import processes

        left = self.deadline - EXIT_MARGIN - time.monotonic()
        answer_by = time.time() + left
        if self.lookup.settings["resident_downloader"] > 0:
            from dsymfind.fetch import resident

            words = processes.downloader_words(
                self.uuid,
                ignore_negative_cache=self.ignore_negative_cache,
                copy_executable=self.copy_executable,
                answer_by=answer_by,
            )
            asked = resident.ask(self.lookup.cache, words, min(resident.ACK_TIMEOUT, left))
            if asked is not None:
                (self.child, self.told), self.resident = asked, True
                return
        told, tell = os.pipe()
        try:
            self.child = processes.spawn_downloader(
                self.uuid,
                ignore_negative_cache=self.ignore_negative_cache,
                copy_executable=self.copy_executable,
                answer_by=answer_by,
                tell=tell,
            )
            self.told = told
        except BaseException:
            os.close(told)
            raise
        finally:
            os.close(tell)

    def ended(self) -> bool:
        """Whether the downloader started has exited (a resident's child: closed its
        connection, which it does once its record is final or when it dies)."""
        if self.child is None:
            return False
        if self.resident:
            return self.told is None
        return _ended(self.child)

    def heard(self) -> None:
        """The downloader closed its end: the record, or the child's exit, says how."""
        self.close()

    def close(self) -> None:
        told, self.told = self.told, None
        if told is not None:
            os.close(told)


class DownloadContinues(DsymfindError):
    """The deadline came first; the message says how far the download got."""


class DownloadFailed(DsymfindError):
    """Every server failed (not "not found"); the message says how."""


def _spawn_claim(lookup: Lookup, uuid: str) -> int | None:
    """The right to start the downloader, held while this helper waits; None: another has it.

    A downloader takes its download lock only after its own start-up (a fraction of a
    second), so helpers asking at once would all see the lock free and each start one:
    32 interpreter start-ups on the machine, for one download.
    """
    from dsymfind.cache import locks

    return locks.try_claim(lookup.cache.spawn_claim_file(uuid_hex(uuid)))


def _wait(
    lookup: Lookup,
    uuid: str,
    deadline: float,
    since: float,
    *,
    until_done: bool,
    starter: _Starter | None,
) -> Answer | None:
    """Poll the cache and the status record; `until_done` waits for the executable too.

    `starter`, held by the helper with the right to start the downloader: the child it
    started (if it ends without a record, a refused cache or a broken configuration,
    waiting on is pointless), and the pipe that child closes when it is done, which ends
    a wait at once. A lock held when the wait began, let go with no record for us, gets
    a downloader of our own.
    """
    from dsymfind.cache import records

    link = tree_entry(lookup.cache.uuids, uuid)
    while True:
        child = None if starter is None else starter.child
        ended = starter is not None and starter.ended()
        # The downloader remembers its answer right after linking it: recalling it spares
        # each waiting helper the Mach-O reader. A full look waits for the record or deadline.
        if not until_done and os.path.exists(link):
            found = lookup.recall(uuid)
            if found is not None:
                return found
        record = records.read(lookup.cache, uuid)
        if _finished_since(record, since):
            assert record is not None
            return _outcome(lookup, uuid, record)
        if ended:
            raise DownloadFailed(f"the downloader of {uuid} stopped without a result (see the log)")
        if starter is not None and child is None:
            starter.start_if_free()
        interval = _poll_interval(record)
        if time.monotonic() + interval >= deadline:
            found = lookup.find(uuid) if os.path.exists(link) else None
            if found is not None:
                return found
            raise DownloadContinues(_progress_message(uuid, record))
        told = None if starter is None else starter.told
        if told is None:
            time.sleep(interval)
        elif _closed_within(told, interval):
            assert starter is not None
            starter.heard()


def _closed_within(told: int, seconds: float) -> bool:
    """Whether the downloader closed its end of the pipe within `seconds` (or died)."""
    import select  # a built-in module's few hundred microseconds, for the starter alone

    readable, _, _ = select.select([told], [], [], seconds)
    return bool(readable)


def _poll_interval(record: dict[str, object] | None) -> float:
    from dsymfind.cache import records

    done, total = records.bytes_done(record) if record else (0, None)
    return FINISHING_POLL_INTERVAL if total is not None and done >= total else POLL_INTERVAL


def _ended(pid: int) -> bool:
    """Whether our child `pid` has exited (and reap it)."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # already reaped
    return done == pid


def _finished_since(record: dict[str, object] | None, since: float) -> bool:
    """A run that ended after we began waiting; an older record is another run's."""
    from dsymfind.cache import records

    if record is None or record.get("state") not in records.TERMINAL:
        return False
    finished = record.get("finished")
    return isinstance(finished, int | float) and finished >= since


def _outcome(lookup: Lookup, uuid: str, record: dict[str, object]) -> Answer | None:
    from dsymfind.cache import records

    state = record.get("state")
    if state == records.DONE:
        return lookup.find(uuid)
    if state == records.NOT_FOUND:
        return None
    from dsymfind.fetch.backoff import in_helper_words

    said = in_helper_words(str(record.get("message")))
    raise DownloadFailed(f"download of {uuid} failed: {said}")


def _progress_message(uuid: str, record: dict[str, object] | None) -> str:
    from dsymfind.cache import records
    from dsymfind.progress import human_size

    done, total = records.bytes_done(record) if record else (0, None)
    progress = (
        f"{human_size(done)} of {human_size(total)}" if total else f"{human_size(done)} so far"
    )
    return (
        f"timed out waiting; the download of {uuid} continues in the background"
        f" ({progress}); ask again shortly"
    )
