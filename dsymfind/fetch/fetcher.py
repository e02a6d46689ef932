"""Fetching one UUID's dSYM (or executable) from the configured servers, verified.

Every server's candidate URL is tried at once; the first answer that unpacks to a Mach-O
carrying the requested UUID (of the right file type) wins and the others are cancelled.
Nothing here touches the cache's final names: results stay in the staging folder until
cache/place.py moves them.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from dsymfind import atomic, debugsymbols, paths, stores
from dsymfind.apple import bundle, macho, unpack
from dsymfind.cache.staged import Staged
from dsymfind.errors import DsymfindError
from dsymfind.fetch import backoff
from dsymfind.stores import base, layouts, meta
from dsymfind.vcs import provenance

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from dsymfind.fetch.backoff import Backoff
    from dsymfind.stores.base import Server
    from dsymfind.stores.layouts import Want
    from dsymfind.stores.transfer import Session

# A per-UUID plist is a few hundred bytes; anything near this is not one.
COMPANION_MAX = 64 * 1024
COMPANION_KEYS = (
    debugsymbols.BUILD_SOURCE_PATH,
    debugsymbols.SOURCE_PATH,
    debugsymbols.SOURCE_PATH_REMAPPING,
)


class Candidate(NamedTuple):
    """One key of one server, and the reader that reaches that server."""

    server: Server
    reader: base.Reader
    key: str

    @property
    def label(self) -> str:
        """Where the key is, as it may be logged: no user name, password or query."""
        return self.reader.where(self.key)


class FetchResult:
    """What a fetch came to: a staged result, or why not."""

    def __init__(self) -> None:
        self.staged: Staged | None = None
        self.winner: Candidate | None = None
        self.not_found: list[str] = []
        self.failures: list[str] = []
        # The servers among them that refused our credentials: a setting to fix.
        self.refused: list[str] = []
        # Servers that failed in a way worth avoiding for a while (timeouts, 5xx, resets).
        self.unhealthy: list[Server] = []
        self._pool: ThreadPoolExecutor | None = None

    def settle(self) -> None:
        """Wait for the cancelled losers: before their session and staging folder go away."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    @property
    def nobody_has_it(self) -> bool:
        """Every server answered "not found": the only outcome worth a negative-cache entry."""
        return self.staged is None and not self.failures and bool(self.not_found)


def candidates(
    servers: list[Server],
    uuid: str,
    want: Want,
    env: Mapping[str, str],
    session: Session,
    servers_backoff: Backoff | None,
) -> tuple[list[Candidate], list[str]]:
    """The keys to ask for, in preference order, and why any server was left out.

    `servers_backoff` skips servers in backoff (None: ask every server, as doctor's probe does).
    """
    chosen, skipped = [], []
    for server in servers:
        key = layouts.server_key(server, uuid, want)
        if key is None:
            continue
        waiting = None if servers_backoff is None else servers_backoff.waiting(server["url"])
        if waiting is not None:
            skipped.append(backoff.backoff_message(server["name"], server["url"], waiting))
            continue
        try:
            fresh = servers_backoff is not None and not servers_backoff.how.trusts_absent
            reader = open_server(server, env, session, fresh=fresh)
        except DsymfindError as exc:
            skipped.append(f"{server['name']}: {exc}")
            continue
        chosen.append(Candidate(server, reader, key))
    return chosen, skipped


def open_server(
    server: Server, env: Mapping[str, str], session: Session, *, fresh: bool = False
) -> base.Reader:
    """The reader reaching a configured server, with its headers' ${VAR}s filled in;
    `fresh`: the caller asks again about what the negative cache holds (a chained helper
    is asked to as well)."""
    options = base.Options(
        headers=expand_headers(server["headers"], env),
        resolve_references=server["layout"] == layouts.TEMPLATE,
        name=server["name"],
        settings=server["settings"],
        ignore_negative_cache=fresh,
    )
    return stores.open_reader(server["url"], session, options)


def expand_headers(headers: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """Header values with ${VAR} replaced from the environment, so tokens stay out of files."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise DsymfindError(f"a header needs ${{{name}}}, which is not set")
        return env[name]

    expanded = {key: base.ENV_REFERENCE.sub(value, raw) for key, raw in headers.items()}
    for key, text in expanded.items():
        problem = base.header_value_problem(text)
        if problem:
            raise DsymfindError(f"header {key}: {problem} (from a ${{VAR}} it refers to)")
    return expanded


def fetch(
    chosen: list[Candidate],
    uuid: str,
    want: Want,
    *,
    staging: str,
    limits: base.Limits,
    max_unpacked: int,
    progress: Callable[[str, int, int | None], None],
    log: Callable[[str], None],
    partials: str | None = None,
) -> FetchResult:
    """Try every candidate at once; the first verified result wins.

    `partials`: the folder where transfers cut part-way are kept and continued
    (paths.partial_dir), which only the holder of the UUID's lock may touch.

    The others are cancelled but may still be winding down (a stalled server takes up to
    its first-byte timeout): the caller admits first, then calls `FetchResult.settle`.
    """
    outcome = FetchResult()
    if not chosen:
        return outcome
    cancel = threading.Event()
    jobs = []
    kept: set[str] = set()
    for i, candidate in enumerate(chosen):
        # One candidate works in the staging folder itself (its names do not meet those of
        # the admission): a folder less to make on every download.
        work = staging if len(chosen) == 1 else os.path.join(staging, f"candidate-{i}")
        if work != staging:
            os.mkdir(work)
        job = _CandidateFetch(
            candidate, uuid, want, work, limits, max_unpacked, progress, cancel, log
        )
        job.partial = _partial(candidate, partials, kept)
        jobs.append(job)
    if len(jobs) == 1:
        # One store (the common setting): fetched in this thread, with no pool to start
        # (concurrent.futures and the logging it imports cost a detached downloader
        # about 8 ms before its first request).
        _collect(outcome, chosen[0], jobs[0].run, log)
        return outcome
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=len(chosen), thread_name_prefix="fetch")
    futures: dict[Future[Staged], Candidate] = {
        pool.submit(job.run): candidate for job, candidate in zip(jobs, chosen, strict=True)
    }
    pending = set(futures)
    while pending and outcome.staged is None:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in sorted(done, key=lambda f: chosen.index(futures[f])):
            _collect(outcome, futures[future], future.result, log)
            if outcome.staged is not None:
                break
    cancel.set()
    pool.shutdown(wait=False, cancel_futures=True)
    outcome._pool = pool
    return outcome


def _partial(candidate: Candidate, folder: str | None, kept: set[str]) -> base.Partial | None:
    """Where this candidate's transfer keeps its bytes, when its store's transfers can be
    continued; None for the second of two candidates naming one partial file (the same
    store listed twice): one writer only."""
    if folder is None or not stores.kind_for(candidate.server["kind"]).RESUMABLE:
        return None
    label = candidate.label  # redacted: no credential spelt in a name or sidecar
    path = os.path.join(folder, paths.partial_name(label))
    if path in kept:
        return None
    kept.add(path)
    return base.Partial(path, label)


def _collect(
    outcome: FetchResult,
    candidate: Candidate,
    result: Callable[[], Staged],
    log: Callable[[str], None],
) -> None:
    """`result`: the candidate's fetch (run now, or a finished future's result)."""
    try:
        staged = result()
    except base.NotFound:
        outcome.not_found.append(candidate.label)
        log(f"{candidate.label}: not found")
        return
    except (DsymfindError, OSError) as exc:
        if isinstance(exc, base.TransferError) and exc.retryable:
            outcome.unhealthy.append(candidate.server)
        if isinstance(exc, base.AuthFailed):
            outcome.refused.append(candidate.server["name"])
        outcome.failures.append(f"{candidate.server['name']}: {exc}")
        log(f"{candidate.label}: {exc}")
        if isinstance(exc, base.ReaderBug):
            log(f"bug in source {candidate.label}:\n{exc.details}")
        return
    if outcome.staged is None:
        outcome.staged, outcome.winner = staged, candidate


class VerificationFailed(DsymfindError):
    """The server answered, but not with the file asked for."""


class _CandidateFetch:
    """Download one candidate into its own folder, unpack, verify."""

    def __init__(
        self,
        candidate: Candidate,
        uuid: str,
        want: Want,
        work: str,
        limits: base.Limits,
        max_unpacked: int,
        progress: Callable[[str, int, int | None], None],
        cancel: threading.Event,
        log: Callable[[str], None],
    ) -> None:
        self.candidate, self.uuid, self.want, self.work = candidate, uuid, want, work
        self.limits, self.max_unpacked = limits, max_unpacked
        self.progress, self.cancel, self.log = progress, cancel, log
        self.partial: base.Partial | None = None

    def run(self) -> Staged:
        """The verified result; a bug in unpacking or verifying, as in the reader, fails
        this candidate only (base.contained)."""
        with base.contained(self.candidate.label, self.partial):
            return self._run()

    def _run(self) -> Staged:
        download = os.path.join(self.work, "download")

        def progress(done: int, total: int | None) -> None:
            self.progress(self.candidate.label, done, total)

        terms = base.Terms(self.limits, progress, self.cancel, self.partial)
        got = self.candidate.reader.get(self.candidate.key, download, terms)
        if got.in_place is not None:
            return self._adopted(got.in_place)
        if got.is_html:
            raise VerificationFailed(
                f"{got.location}: answered a web page ({got.content_type}), "
                "an error or sign-in page, instead of a file"
            )
        unpacked_dir = os.path.join(self.work, "unpacked")  # made by unpack when needed
        unpacked = unpack.unpack(
            download,
            unpacked_dir,
            max_unpacked_bytes=self.max_unpacked,
            allow_scripts=self.candidate.server["allow_scripts"],
        )
        if unpacked.skipped_scripts:
            self.log(
                f"{self.candidate.label}: left out {len(unpacked.skipped_scripts)} script file(s) "
                "under Contents/Resources/Python, since lldb may run them and this server does "
                f"not have allow_scripts: {', '.join(unpacked.skipped_scripts[:5])}"
            )
        staged = self._verify(unpacked)
        if staged is None:
            raise VerificationFailed(self._mismatch(download))
        if staged.bundle_dir is None:
            # The two small requests go at once: each is a round trip (a signed GET on S3)
            # the answer would otherwise wait for in turn.
            plist: dict[str, object] = {}
            failed: list[BaseException] = []
            beside = None
            if self.want == layouts.DSYM:

                def fetch_plist() -> None:
                    try:
                        plist.update(self._companion_plist())
                    except BaseException as exc:  # noqa: BLE001 - raised below, in this job
                        failed.append(exc)

                beside = threading.Thread(target=fetch_plist, name="fetch-plist", daemon=True)
                beside.start()
            try:
                described = self._meta()
            finally:
                if beside is not None:
                    beside.join()  # no thread outlives the candidate's folder
            if failed:
                raise failed[0]
            staged.name, staged.bundle_name = (
                (None, None) if described is None else meta.decode(described)
            )
            if self.want == layouts.DSYM:
                staged.plist_values = plist
                record = provenance.from_meta(described)
                if record is not None:  # kept in the cached plist, for vcs/checkouts.py
                    staged.plist_values[debugsymbols.SOURCE_CONTROL] = record.as_dict()
        return staged

    def _adopted(self, path: str) -> Staged:
        """A file the store keeps on this machine, verified where it is, to link in place."""
        staged = self._verify_file(path, bundle.bundle_of(path))
        if staged is None:
            raise VerificationFailed(f"{self.candidate.label}: {self._mismatch(path)}")
        staged.in_place = True
        return staged

    def _meta(self) -> bytes | None:
        """The store's metadata of a bare file (stores/meta.py): its names, where it was built."""
        server = self.candidate.server
        key = layouts.metadata_key(server["layout"], self.candidate.key, server["casing"])
        return None if key is None else self._companion(key, "meta", meta.META_MAX)

    def _companion_plist(self) -> dict[str, object]:
        """The source mapping of the per-UUID plist a store keeps beside a bare DWARF file
        (`<key>.plist`, as `dsymfind admit` writes it); nothing when there is none.

        Only the source keys are kept: the other values name the build machine's files."""
        from dsymfind.apple import plists

        data = self._companion(self.candidate.key + ".plist", "companion.plist", COMPANION_MAX)
        try:
            values = plists.loads_dict(data) if data is not None else {}
        except plists.UnreadablePlist as exc:
            self.log(f"{self.candidate.label}.plist: left out ({exc})")
            return {}
        return {key: values[key] for key in COMPANION_KEYS if key in values}

    def _companion(self, key: str, name: str, max_bytes: int) -> bytes | None:
        """A small file the store keeps beside the one fetched; None when it has none."""
        path = os.path.join(self.work, name)
        limits = base.Limits(total_timeout=self.limits.total_timeout, max_bytes=max_bytes)
        try:
            self.candidate.reader.get(key, path, base.Terms(limits))
            return atomic.read_small_file(path, max_bytes)
        except base.NotFound:
            return None
        except (DsymfindError, OSError) as exc:
            self.log(f"{self.candidate.reader.where(key)}: left out ({exc})")
            return None

    def _verify(self, unpacked: unpack.Unpacked) -> Staged | None:
        if unpacked.kind == "bundles":
            for bundle_dir in unpacked.paths:
                for dwarf_path in bundle.dwarf_files(bundle_dir):
                    staged = self._verify_file(dwarf_path, bundle_dir)
                    if staged is not None:
                        return staged
            return None
        return self._verify_file(unpacked.paths[0], None)

    def _verify_file(self, path: str, bundle_dir: str | None) -> Staged | None:
        try:
            slices = macho.read_slices(path)
        except macho.MachOError:
            return None
        found = macho.slice_for_uuid(slices, self.uuid)
        if found is None or (found.filetype_name == "MH_DSYM") != (self.want == layouts.DSYM):
            return None
        return Staged(path, slices, bundle_dir)

    def _mismatch(self, path: str) -> str:
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            return f"answer is not a usable Mach-O file ({exc})"
        found = ", ".join(f"{s.uuid} {s.filetype_name}" for s in slices) or "no UUID"
        return f"answer does not carry {self.uuid} as a {self.want} (it has {found})"
