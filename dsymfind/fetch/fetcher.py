"""Fetching one UUID's dSYM (or executable) from the configured servers, verified.

Every server's candidate URL is tried at once; the first answer that unpacks to a Mach-O
carrying the requested UUID (of the right file type) wins and the others are cancelled.
Nothing here touches the cache's final names: results stay in the staging folder until
store/place.py moves them.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING

import httpx

from dsymfind.apple import bundle, macho
from dsymfind.errors import DsymfindError
from dsymfind.fetch import layouts, transfer, unpack
from dsymfind.store.place import Staged

if TYPE_CHECKING:
    from dsymfind.settings import Server

DSYM, EXECUTABLE = "dsym", "executable"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Candidate:
    """One URL of one server, with the request headers that server needs."""

    __slots__ = ("allow_scripts", "headers", "server", "url")

    def __init__(self, server: Server, url: str, headers: dict[str, str]) -> None:
        self.server, self.url, self.headers = server, url, headers
        self.allow_scripts = server["allow_scripts"]

    @property
    def label(self) -> str:
        """The URL as it may be logged: no user name or password."""
        return transfer.redact(self.url)


class Outcome:
    """What a fetch came to: a staged result, or why not."""

    def __init__(self) -> None:
        self.staged: Staged | None = None
        self.winner: Candidate | None = None
        self.not_found: list[str] = []
        self.failures: list[str] = []
        # Servers that failed in a way worth avoiding for a while (timeouts, 5xx, resets).
        self.unhealthy: list[Server] = []
        self._pool: ThreadPoolExecutor | None = None

    def settle(self) -> None:
        """Wait for the cancelled losers: before their client and staging folder go away."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    @property
    def nobody_has_it(self) -> bool:
        """Every server answered "not found": the only outcome worth a negative-cache entry."""
        return self.staged is None and not self.failures and bool(self.not_found)


def candidates(
    servers: list[Server],
    uuid: str,
    want: str,
    env: Mapping[str, str],
    skip: Callable[[Server], bool],
) -> tuple[list[Candidate], list[str]]:
    """The URLs to try, in preference order, and why any server was left out."""
    chosen, skipped = [], []
    for server in servers:
        if skip(server):
            skipped.append(f"{server['name']}: failed recently, skipped for now")
            continue
        url = _url(server, uuid, want)
        if url is None:
            continue
        try:
            headers = expand_headers(server["headers"], env)
        except DsymfindError as exc:
            skipped.append(f"{server['name']}: {exc}")
            continue
        chosen.append(Candidate(server, url, headers))
    return chosen, skipped


def _url(server: Server, uuid: str, want: str) -> str | None:
    layout = server["layout"]
    if layout == layouts.TEMPLATE:
        if want != DSYM:
            return None
        return urllib.parse.urljoin(
            _base(server["url"]), layouts.expand_template(server["template"], uuid)
        )
    if want == DSYM:
        key: str | None = layouts.debug_file_key(layout, uuid)
    else:
        key = layouts.executable_key(layout, uuid, None)
    if key is None:
        return None
    return _base(server["url"]) + layouts.apply_casing(key, server["casing"])


def _base(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def expand_headers(headers: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """Header values with ${VAR} replaced from the environment, so tokens stay out of files."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise DsymfindError(f"a header needs ${{{name}}}, which is not set")
        return env[name]

    return {key: _ENV_REFERENCE.sub(value, raw) for key, raw in headers.items()}


def fetch(
    chosen: list[Candidate],
    uuid: str,
    want: str,
    *,
    staging: str,
    client: httpx.Client,
    limits: transfer.Limits,
    max_unpacked: int,
    progress: Callable[[str, int, int | None], None],
    log: Callable[[str], None],
) -> Outcome:
    """Try every candidate at once; the first verified result wins.

    The others are cancelled but may still be winding down (a stalled server takes up to
    its first-byte timeout): the caller publishes first, then calls `Outcome.settle`.
    """
    outcome = Outcome()
    if not chosen:
        return outcome
    cancel = threading.Event()
    pool = ThreadPoolExecutor(max_workers=len(chosen), thread_name_prefix="fetch")
    futures: dict[Future[Staged], Candidate] = {}
    for i, candidate in enumerate(chosen):
        work = os.path.join(staging, f"candidate-{i}")
        job = _Job(candidate, uuid, want, work, client, limits, max_unpacked, progress, cancel, log)
        futures[pool.submit(job.run)] = candidate
    pending = set(futures)
    while pending and outcome.staged is None:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in sorted(done, key=lambda f: chosen.index(futures[f])):
            _collect(outcome, futures[future], future, log)
            if outcome.staged is not None:
                break
    cancel.set()
    pool.shutdown(wait=False, cancel_futures=True)
    outcome._pool = pool
    return outcome


def _collect(
    outcome: Outcome, candidate: Candidate, future: Future[Staged], log: Callable[[str], None]
) -> None:
    try:
        staged = future.result()
    except transfer.NotFound:
        outcome.not_found.append(candidate.label)
        log(f"{candidate.label}: not found")
        return
    except (DsymfindError, OSError) as exc:
        if isinstance(exc, transfer.TransferError) and exc.retryable:
            outcome.unhealthy.append(candidate.server)
        outcome.failures.append(f"{candidate.server['name']}: {exc}")
        log(f"{candidate.label}: {exc}")
        return
    if outcome.staged is None:
        outcome.staged, outcome.winner = staged, candidate


class VerificationFailed(DsymfindError):
    """The server answered, but not with the file asked for."""


class _Job:
    """Download one candidate into its own folder, unpack, verify."""

    def __init__(
        self,
        candidate: Candidate,
        uuid: str,
        want: str,
        work: str,
        client: httpx.Client,
        limits: transfer.Limits,
        max_unpacked: int,
        progress: Callable[[str, int, int | None], None],
        cancel: threading.Event,
        log: Callable[[str], None],
    ) -> None:
        self.candidate, self.uuid, self.want, self.work = candidate, uuid, want, work
        self.client, self.limits, self.max_unpacked = client, limits, max_unpacked
        self.progress, self.cancel, self.log = progress, cancel, log

    def run(self) -> Staged:
        os.makedirs(self.work)
        download = os.path.join(self.work, "download")
        got = transfer.download(
            self.client,
            self.candidate.url,
            download,
            headers=self.candidate.headers,
            limits=self.limits,
            progress=lambda done, total: self.progress(self.candidate.label, done, total),
            cancel=self.cancel,
        )
        if got.is_html:
            raise VerificationFailed(
                f"{transfer.redact(got.final_url)}: answered a web page ({got.content_type}), "
                "an error or sign-in page, instead of a file"
            )
        unpacked_dir = os.path.join(self.work, "unpacked")
        os.makedirs(unpacked_dir)
        unpacked = unpack.unpack(
            download,
            unpacked_dir,
            max_unpacked_bytes=self.max_unpacked,
            allow_scripts=self.candidate.allow_scripts,
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
        return staged

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
        if found is None or (found.filetype_name == "MH_DSYM") != (self.want == DSYM):
            return None
        return Staged(path, slices, bundle_dir)

    def _mismatch(self, path: str) -> str:
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            return f"answer is not a usable Mach-O file ({exc})"
        found = ", ".join(f"{s.uuid} {s.filetype_name}" for s in slices) or "no UUID"
        return f"answer does not carry {self.uuid} as a {self.want} (it has {found})"
