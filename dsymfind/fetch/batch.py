"""Several downloads in the foreground, for `dsymfind fetch` and `dsymfind prefetch`.

Each download is the detached downloader's own code (downloader.Download) in a thread,
so it takes the same per-UUID lock: a UUID another process is already fetching is
waited for, not fetched twice. Progress comes from the status records the downloads
write (records.py), the same records `dsymfind status` shows.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from dsymfind import debugsymbols, permissions
from dsymfind.cache import locks, place, records
from dsymfind.errors import DsymfindError
from dsymfind.fetch import backoff
from dsymfind.fetch.downloader import Download
from dsymfind.local_lookup import Lookup
from dsymfind.paths import CachePaths
from dsymfind.progress import Progress

if TYPE_CHECKING:
    from dsymfind.settings import Settings

# Downloads at once: each already asks every server in parallel, so a few saturate a link.
MAX_PARALLEL = 4
# How often the progress lines are refreshed from the status records (written about as often).
POLL_INTERVAL = records.MIN_WRITE_INTERVAL
# The exit status of a command interrupted by SIGINT, as shells report it.
INTERRUPTED = 130

FOUND, NOT_FOUND, FAILED = "found", "not-found", "failed"
# A miss's message when no server is configured (the downloader's own words for it).
NO_SERVER = "no server configured"


class Result(NamedTuple):
    uuid: str
    state: str  # FOUND, NOT_FOUND or FAILED
    path: str | None  # the DWARF file (DBGDSYMPath) when found; see symbol_table
    message: str
    fetched: bool  # False when it was on this machine before
    refused: tuple[str, ...] = ()  # the servers that refused our credentials (FAILED)
    # Found without a dSYM: `path` is the image itself, named by its symbol table (an
    # Apple library indexed here, or its executable fetched alone).
    symbol_table: bool = False

    def line(self) -> str:
        if self.state == FOUND:
            return f"{self.uuid}  found  {self.path}"
        label = "not found" if self.state == NOT_FOUND else "failed"
        return f"{self.uuid}  {label}: {self.message}" if self.message else f"{self.uuid}  {label}"

    def as_json(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "state": self.state, "path": self.path, "message": self.message}


def fetch_all(
    uuids: Sequence[str],
    current: Settings,
    env: Mapping[str, str],
    *,
    ignore_negative_cache: bool,
    progress: Progress | None,
    executables: bool = False,
) -> list[Result]:
    """Every UUID's result, in the order given; those found locally are not fetched
    (with `executables`, unless their executable is not found locally either).

    Ctrl-C ends the process with status 130 (see `_abandon`).
    """
    lookup = Lookup(current)
    running = _Running()
    results: dict[str, Result] = {}
    missing = []
    for uuid in dict.fromkeys(uuids):
        found = lookup.find(uuid)
        if found is None or (executables and debugsymbols.SYMBOL_RICH_EXECUTABLE not in found):
            missing.append(uuid)
            continue
        results[uuid] = _found(uuid, found, "already on this machine", fetched=False)
        _finish(progress, results[uuid])
    try:
        if current["servers"]:
            wanted = _Wanted(ignore_negative_cache, executables, current)
            results.update(_fetch(missing, lookup, env, wanted, progress, running))
        else:
            results.update(_unfetchable(missing, progress))
    except KeyboardInterrupt:
        _abandon(progress, running)
    return [results[uuid] for uuid in dict.fromkeys(uuids)]


def _unfetchable(uuids: list[str], progress: Progress | None) -> dict[str, Result]:
    """Misses with no server to ask: what their downloads would say, without running them.

    Each download takes its lock, writes its record and makes a staging folder only to
    find no server (milliseconds per UUID: a minute for a report of 2,000 images).
    """
    results = {}
    for uuid in uuids:
        results[uuid] = Result(uuid, FAILED, None, NO_SERVER, True)
        _finish(progress, results[uuid])
    return results


def _fetch(
    uuids: list[str],
    lookup: Lookup,
    env: Mapping[str, str],
    wanted: _Wanted,
    progress: Progress | None,
    running: _Running,
) -> dict[str, Result]:
    # No `with`: leaving it would wait for the downloads, and Ctrl-C must not.
    pool = ThreadPoolExecutor(max_workers=MAX_PARALLEL, thread_name_prefix="download")
    futures = {pool.submit(_download, running, uuid, env, wanted): uuid for uuid in uuids}
    results = {}
    pending: set[Future[_Ran]] = set(futures)
    live = progress is not None and progress.live
    # Without live lines to refresh, the main thread sleeps until a download ends: a wake
    # every POLL_INTERVAL would take the GIL from the downloads for nothing.
    poll = POLL_INTERVAL if live else None
    while pending:
        done, pending = wait(pending, timeout=poll, return_when=FIRST_COMPLETED)
        for future in done:
            uuid = futures[future]
            results[uuid] = _result(uuid, future.result(), lookup)
            _finish(progress, results[uuid])
        if live and progress is not None:
            # Queued downloads get no line: a long prefetch would fill the terminal.
            for future in filter(Future.running, pending):
                uuid = futures[future]
                progress.update(uuid, f"{uuid}  {_live_text(lookup.cache, uuid)}")
    pool.shutdown()
    running.close()
    return results


class _Running:
    """The downloads this process has started, so that Ctrl-C can discard their staging."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._downloads: list[Download] = []
        self._stopped = False
        # The cache's real path once checked (permissions.secure_cache): checked once per
        # batch, as its folders stay private to this user meanwhile.
        self._secured: str | None = None
        # What its admissions share (the descriptors of dsyms/ and the like), from then on.
        self._doors: place.Doors | None = None

    def start(self, uuid: str, env: Mapping[str, str], wanted: _Wanted) -> Download:
        with self._lock:
            if self._stopped:  # a queued download whose thread got to it during Ctrl-C
                raise DsymfindError("interrupted")
            # Run on purpose: the negative cache may hide a publish since (fetch/backoff.py).
            how = backoff.asking(on_purpose=True, ignore=wanted.ignore_negative_cache)
            if self._secured is None:  # a refusal fails this download, and the next checks again
                self._secured = permissions.secure_cache(wanted.settings["cache_dir"])
                self._doors = place.Doors(CachePaths(self._secured)).shared()
            download = Download(
                uuid, env, how, current=wanted.settings, secured=self._secured, doors=self._doors
            )
            self._downloads.append(download)
            return download

    def close(self) -> None:
        """Once every download has ended."""
        if self._doors is not None:
            self._doors.close()

    def discard(self) -> None:
        """No download starts any more, and none leaves a staging folder behind."""
        with self._lock:
            self._stopped = True
            started = list(self._downloads)
        for download in started:
            download.discard_staging()


class _Wanted(NamedTuple):
    """What each download of a batch is asked for."""

    ignore_negative_cache: bool
    executables: bool
    settings: Settings  # the batch's, loaded once for all its downloads


class _Ran(NamedTuple):
    """How one download went: why it could not run (None: it ran), and the run itself."""

    problem: str | None
    download: Download | None = None


def _download(running: _Running, uuid: str, env: Mapping[str, str], wanted: _Wanted) -> _Ran:
    """Run one download; its record says how it ended."""
    try:
        download = running.start(uuid, env, wanted)
        timeout = download.settings["download_timeout"]
        try:
            download.run(copy_executable=wanted.executables)
        except locks.LockTimeout:
            return _Ran(f"another process has been downloading it for over {timeout:.0f} s")
    except (DsymfindError, OSError) as exc:
        return _Ran(str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug: logged in full, the others go on
        from dsymfind.log import log_internal_error

        return _Ran(f"internal error: {exc!r}; details in {log_internal_error(exc, env)}")
    return _Ran(None, download)


def _result(uuid: str, ran: _Ran, lookup: Lookup) -> Result:
    """What the cache holds now decides; the download's record says why not. A run that
    ended with the UUID in the cache says both itself, with no second look."""
    download = ran.download
    if download is not None and download.answer is not None and download.outcome is not None:
        return _found(uuid, download.answer, download.outcome[1] or "fetched", fetched=True)
    problem = ran.problem
    record = records.read(lookup.cache, uuid) or {}
    found = lookup.find(uuid)
    if found is not None:
        return _found(uuid, found, str(record.get("message") or "fetched"), fetched=True)
    if problem is not None:
        return Result(uuid, FAILED, None, problem, True)
    state = NOT_FOUND if record.get("state") == records.NOT_FOUND else FAILED
    refused = record.get("refused") or []
    names = tuple(name for name in refused if isinstance(name, str)) if state == FAILED else ()
    return Result(uuid, state, None, str(record.get("message") or ""), True, names)


def _found(uuid: str, found: debugsymbols.Answer, message: str, *, fetched: bool) -> Result:
    """A lookup's answer as a result: its dSYM, else the executable it names alone."""
    dwarf = found.get(debugsymbols.DSYM_PATH)
    if dwarf is not None:
        return Result(uuid, FOUND, dwarf, message, fetched)
    executable = found[debugsymbols.SYMBOL_RICH_EXECUTABLE]
    return Result(uuid, FOUND, executable, message, fetched, symbol_table=True)


def _live_text(cache: CachePaths, uuid: str) -> str:
    record = records.read(cache, uuid)
    if record is None or record.get("state") != records.RUNNING:
        return "waiting"
    return records.progress_text(*records.bytes_done(record), records.rate(record))


def _finish(progress: Progress | None, result: Result) -> None:
    if progress is not None:
        progress.finish(result.uuid, result.line())


def _abandon(progress: Progress | None, running: _Running) -> NoReturn:
    """Ctrl-C: stop waiting now.

    The download threads cannot be cancelled, and a normal exit would wait for them.
    Ending the process is what a killed downloader does, which the cache is built to
    survive: the lock goes with the process, nothing unverified has a final name, and
    `dsymfind status` shows the records left behind as stale. Unlike a killed process,
    this one can still remove its downloads' staging folders (their staging cleanup
    never runs once the process ends): they go first.
    """
    running.discard()
    if progress is not None:
        progress.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)


def live_progress(stream: Any) -> Progress | None:
    """A Progress on `stream` when it is a terminal, else None (no lines at all)."""
    progress = Progress(stream)
    return progress if progress.live else None
