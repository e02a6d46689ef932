"""Find the PDB that matches a PE file: on disk, in symbol stores, or from symbol servers.

Search order (docs/symbol-stores.md, as DbgHelp searches): the PDB path the PE records and
the PE's own folder, then each symbol path element in turn: plain folders, `cache*` stores
and `srv*` chains, whose local stores are checked before their server is asked. A store is
laid out as DbgHelp's, `STORE/<name>/<GUID><AGE>/<name>` (two-tier, under the name's first
two characters, when `index2.txt` is at its root), and may hold `file.ptr` (a `PATH:` to the
real file) or the CAB-compressed `<name minus its last character>_` instead of the file.

The guarantees are the dSYM path's: every candidate is verified (GUID and age, with
windows/pdb.py) before it is answered or placed; a download goes to a temporary file in
the final folder and is renamed into place only once verified, under a per-key lock
in the store's own lock folder, so concurrent processes download a key once; a key
no server has is remembered for `negative_cache_ttl`, a failing server skipped for
`server_backoff`; transfers use transfer.py (retries, timeouts, size caps, no
credentials after a redirect).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import filelock
import httpx

from dsymfind import atomic, markers, permissions
from dsymfind.apple import bundle
from dsymfind.cache_layout import CacheLayout
from dsymfind.errors import DsymfindError
from dsymfind.fetch import layouts, transfer
from dsymfind.log import get_logger
from dsymfind.paths import short_name
from dsymfind.windows import cab, pdb
from dsymfind.windows.pe import CodeView
from dsymfind.windows.symbol_path import Cache, Chain, Element, Folder

if TYPE_CHECKING:
    from dsymfind.settings import Settings

INDEX2_FILE = "index2.txt"
POINTER_FILE = "file.ptr"
POINTER_PREFIX = "PATH:"
MESSAGE_PREFIX = "MSG:"
# file.ptr holds one path; index2.txt's content is irrelevant: neither needs more.
SMALL_FILE_BYTES = 64 * 1024
# Hidden in the store's root, where DbgHelp never looks; lock files are never deleted.
LOCK_FOLDER = ".dsymfind-locks"
# Temporary files share the final folder so the rename is atomic; this suffix marks
# a killed run's leftovers, removed by the next holder of the key's lock.
TEMP_SUFFIX = ".dsymfind-tmp"
NAME_MAX_BYTES = 255  # one path component on every file system we run on


class PdbNotFound(DsymfindError):
    """No matching PDB anywhere on the symbol path; the message says what was seen."""


def compressed_name(name: str) -> str:
    """The CAB form's name: the last character replaced by `_` (crash.pdb -> crash.pd_)."""
    return name[:-1] + "_"


def key_folder(name: str, key: str, *, two_tier: bool) -> str:
    """`<name>/<key>`, or `<prefix>/<name>/<key>` in a two-tier store (spec: index2)."""
    one_tier = f"{name}/{key}"
    return f"{layouts.index2_prefix(one_tier)}/{one_tier}" if two_tier else one_tier


@dataclass
class _Wanted:
    """One PDB being looked for, and the notable things seen on the way."""

    codeview: CodeView
    name: str
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.codeview.key


# One pass over the symbol path: (element, what is wanted, cache* stores to its left).
_Step = Callable[[Element, "_Wanted", list[str]], str | None]


class _Rejected(Exception):
    """A candidate that is not the wanted PDB (or cannot be unpacked): never placed."""


class Search:
    """Finds PDBs along one symbol path; one HTTP client and index2 memory for all files."""

    def __init__(self, settings: Settings, elements: list[Element]) -> None:
        self.settings = settings
        self.elements = elements
        self.layout = CacheLayout(settings["cache_dir"])
        permissions.secure_cache(self.layout.root)
        self.log = get_logger(settings["log_file"])
        self.limits = transfer.Limits(
            total_timeout=settings["download_timeout"], max_bytes=settings["max_download_bytes"]
        )
        self._client: httpx.Client | None = None
        self._two_tier: dict[str, bool] = {}  # per server URL: probed once, remembered

    def __enter__(self) -> Search:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = transfer.make_client(self.limits)
        return self._client

    def find(self, pe_path: str, codeview: CodeView) -> str:
        """The path of the matching PDB; raises PdbNotFound with what was seen."""
        wanted = _Wanted(codeview, _store_name(pe_path, codeview))
        for candidate in _beside(pe_path, codeview, wanted.name):
            if self._matches(candidate, wanted, "found at"):
                return candidate
        # Issue 5's order: plain folders, then stores; and no server is asked while a
        # local store has it (every store's copy is verified, so any one will do).
        for step in (self._in_folder, self._in_local_stores, self._from_server):
            found = self._walk(step, wanted)
            if found is not None:
                return found
        seen = "; ".join(dict.fromkeys(wanted.problems))
        raise PdbNotFound(
            f"{pe_path}: no matching {wanted.name} ({wanted.key}) found"
            + (f": {seen}" if seen else "")
        )

    # --- the symbol path's elements ------------------------------------------------------

    def _walk(self, step: _Step, wanted: _Wanted) -> str | None:
        """`step` on each element in order, knowing the cache* stores to its left."""
        caches: list[str] = []
        for element in self.elements:
            found = step(element, wanted, caches)
            if found is not None:
                return found
            if isinstance(element, Cache):
                caches.append(element.path)
        return None

    def _in_folder(self, element: Element, wanted: _Wanted, caches: list[str]) -> str | None:
        if not isinstance(element, Folder):
            return None
        path = os.path.join(element.path, wanted.name)
        return self._keep(path, caches, wanted) if self._matches(path, wanted, "found at") else None

    def _in_local_stores(self, element: Element, wanted: _Wanted, caches: list[str]) -> str | None:
        if isinstance(element, Cache):
            found = self._in_store(element.path, element.path, wanted)
            return None if found is None else self._keep(found, caches, wanted)
        if isinstance(element, Chain):
            downstream = element.stores[0]
            for position, store in enumerate(element.local_stores):
                found = self._in_store(store, downstream, wanted)
                if found is not None:
                    return self._keep(found, [*caches, *element.stores[:position]], wanted)
        return None

    def _from_server(self, element: Element, wanted: _Wanted, caches: list[str]) -> str | None:
        if not isinstance(element, Chain) or element.url is None:
            return None
        found = self._download(element.url, element.stores[0], wanted)
        return (
            None if found is None else self._keep(found, [*caches, *element.local_stores], wanted)
        )

    def _keep(self, found: str, stores: list[str], wanted: _Wanted) -> str:
        """Copy a find into every store left of where it was found; the leftmost copy wins."""
        copies = []
        for store in stores:
            if _inside(found, store):
                copies.append(found)
                continue
            with contextlib.suppress(_Rejected):
                copies.append(self._place(store, wanted, lambda tmp: _copy(found, tmp)))
        return copies[0] if copies else found

    # --- local stores ----------------------------------------------------------------------

    def _in_store(self, store: str, downstream: str, wanted: _Wanted) -> str | None:
        """A local store's file, file.ptr target or unpacked CAB (unpacked into downstream)."""
        folder = os.path.join(store, key_folder(wanted.name, wanted.key, two_tier=_two_tier(store)))
        path = os.path.join(folder, wanted.name)
        if self._matches(path, wanted, "found at"):
            return path
        pointer = os.path.join(folder, POINTER_FILE)
        if os.path.isfile(pointer):
            try:
                text = _read_small(pointer)
            except OSError as exc:
                wanted.problems.append(f"{pointer}: {exc.strerror or exc}")
                return None
            return self._pointed(text, pointer, wanted)
        packed = os.path.join(folder, compressed_name(wanted.name))
        if os.path.isfile(packed):
            with contextlib.suppress(_Rejected):
                return self._place(downstream, wanted, lambda tmp: self._unpack(packed, tmp))
        return None

    def _pointed(self, text: str, where: str, wanted: _Wanted) -> str | None:
        """What a file.ptr's `PATH:` names, when it is the wanted PDB."""
        line = text.strip()
        if line.startswith(MESSAGE_PREFIX):
            wanted.problems.append(f"{where} says {line[len(MESSAGE_PREFIX) :].strip()!r}")
            return None
        if not line.startswith(POINTER_PREFIX):
            wanted.problems.append(f"{where} is not a PATH: pointer")
            return None
        target = line[len(POINTER_PREFIX) :].strip()
        if not os.path.isfile(target):
            wanted.problems.append(f"{where} points to {target}, which is not here")
            return None
        return target if self._matches(target, wanted, f"{where} pointed to") else None

    # --- symbol servers --------------------------------------------------------------------

    def _download(self, url: str, downstream: str, wanted: _Wanted) -> str | None:
        shown = transfer.redact(url)
        absent = self.layout.negative_marker(
            "pdb-" + short_name(f"{url}|{wanted.name}/{wanted.key}")
        )
        failing = self.layout.failing_server_marker(url)
        if markers.fresh(absent, self.settings["negative_cache_ttl"]):
            return None
        if markers.fresh(failing, self.settings["server_backoff"]):
            backoff = self.settings["server_backoff"]
            wanted.problems.append(f"{shown} skipped: it failed in the last {backoff:g} s")
            return None
        try:
            folder = key_folder(wanted.name, wanted.key, two_tier=self._server_two_tier(url))
            found = self._download_variants(url, folder, downstream, absent, wanted)
        except transfer.TransferError as exc:
            wanted.problems.append(str(exc))
            if exc.retryable:
                markers.mark(failing)
            return None
        except _Rejected:
            return None  # the downstream store's lock: unwritable, or held too long (noted)
        except OSError as exc:  # the cache's scratch folder, for index2.txt and file.ptr
            wanted.problems.append(f"{shown}: cannot fetch ({exc.strerror or exc})")
            return None
        markers.clear(failing)
        return found

    def _server_two_tier(self, url: str) -> bool:
        if url not in self._two_tier:
            self._two_tier[url] = self._exists(_join_url(url, INDEX2_FILE))
        return self._two_tier[url]

    def _exists(self, url: str) -> bool:
        """Whether the server has `url` (its content is not wanted)."""
        try:
            self._get_small(url)
        except transfer.NotFound:
            return False
        except transfer.TooLarge:
            pass
        return True

    def _get_small(self, url: str) -> str:
        """A small text file from the server (index2.txt, file.ptr)."""
        os.makedirs(self.layout.tmp, mode=0o700, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.layout.tmp) as scratch:
            path = os.path.join(scratch, "small")
            self._get(url, path, SMALL_FILE_BYTES)
            return _read_small(path)

    def _download_variants(
        self, url: str, folder: str, downstream: str, absent: str, wanted: _Wanted
    ) -> str | None:
        """The file, else its CAB form, else its file.ptr: placed in downstream when found."""
        base = _join_url(url, folder)
        variants: list[Callable[[str], object]] = [
            lambda tmp: self._get(_join_url(base, wanted.name), tmp),
            lambda tmp: self._get_packed(_join_url(base, compressed_name(wanted.name)), tmp),
        ]
        final = os.path.join(
            downstream,
            key_folder(wanted.name, wanted.key, two_tier=_two_tier(downstream)),
            wanted.name,
        )
        with self._key_lock(downstream, wanted):
            if self._matches(final, wanted, "found at"):
                return final  # another process fetched it while we waited for the lock
            if markers.fresh(absent, self.settings["negative_cache_ttl"]):
                return None
            for fetch in variants:
                try:
                    return self._place(downstream, wanted, fetch, locked=True)
                except transfer.NotFound:
                    continue
                except _Rejected:
                    return None
            pointer = _join_url(base, POINTER_FILE)
            try:
                text = self._get_small(pointer)
            except transfer.NotFound:
                markers.mark(absent)  # only when the server has none of the three
                return None
            target = self._pointed(text, transfer.redact(pointer), wanted)
            if target is None:
                return None
            with contextlib.suppress(_Rejected):
                return self._place(downstream, wanted, lambda tmp: _copy(target, tmp), locked=True)
            return None

    def _get(self, url: str, dest: str, max_bytes: int | None = None) -> transfer.Downloaded:
        limits = self.limits
        if max_bytes is not None:
            limits = transfer.Limits(total_timeout=limits.total_timeout, max_bytes=max_bytes)
        got = transfer.download(self.client, url, dest, limits=limits)
        self.log.info("pdb: downloaded %s (%d bytes)", transfer.redact(url), got.size)
        return got

    def _get_packed(self, url: str, tmp: str) -> None:
        packed = tmp + ".cab"
        try:
            self._get(url, packed)
            self._unpack(packed, tmp)
        finally:
            atomic.unlink_quietly(packed)

    def _unpack(self, packed: str, tmp: str) -> None:
        try:
            cab.extract_single(packed, tmp, max_bytes=self.settings["max_download_bytes"])
        except cab.CabError as exc:
            raise _Rejected(str(exc)) from exc

    # --- verification and placement --------------------------------------------------------

    def _matches(self, path: str, wanted: _Wanted, seen: str) -> bool:
        """Whether `path` is the wanted PDB; a PDB that is not is noted (absence is not)."""
        if not os.path.lexists(path):
            return False
        problem = _problem(path, wanted.codeview)
        if problem is not None:
            wanted.problems.append(f"{path}: {problem}")
            self.log.info("pdb: %s %s: %s", seen, path, problem)
            return False
        return True

    def _place(
        self,
        store: str,
        wanted: _Wanted,
        write: Callable[[str], object],
        *,
        locked: bool = False,
    ) -> str:
        """Write, verify and rename a PDB into `store`; raises _Rejected (noted) if it is not
        the wanted one or cannot be written. transfer.NotFound passes through."""
        folder = os.path.join(store, key_folder(wanted.name, wanted.key, two_tier=_two_tier(store)))
        final = os.path.join(folder, wanted.name)
        with contextlib.nullcontext() if locked else self._key_lock(store, wanted):
            if not locked and self._matches(final, wanted, "found at"):
                return final
            try:
                os.makedirs(folder, exist_ok=True)
                _remove_leftovers(folder)
                tmp = os.path.join(folder, f".{wanted.name}.{os.getpid()}{TEMP_SUFFIX}")
                try:
                    write(tmp)
                    problem = _problem(tmp, wanted.codeview)
                    if problem is not None:
                        raise _Rejected(f"the answer is not the PDB wanted: {problem}")
                    os.replace(tmp, final)
                finally:
                    atomic.unlink_quietly(tmp)
            except _Rejected as exc:
                self._reject(f"{final}: {exc}", wanted)
                raise
            except OSError as exc:
                self._reject(f"{final}: cannot write ({exc.strerror or exc})", wanted)
                raise _Rejected(str(exc)) from exc
        self.log.info("pdb: placed %s", final)
        return final

    def _reject(self, problem: str, wanted: _Wanted) -> None:
        wanted.problems.append(problem)
        self.log.warning("pdb: %s", problem)

    @contextlib.contextmanager
    def _key_lock(self, store: str, wanted: _Wanted) -> Iterator[None]:
        """One writer per key and store, across processes (locks.py's flock, per store)."""
        folder = os.path.join(store, LOCK_FOLDER)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            self._reject(f"{store}: cannot write ({exc.strerror or exc})", wanted)
            raise _Rejected(str(exc)) from exc
        lock = filelock.FileLock(
            os.path.join(folder, short_name(f"{wanted.name}/{wanted.key}") + ".lock"),
            timeout=self.settings["download_timeout"],
        )
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            self._reject(f"{store}: another process held {wanted.name} too long", wanted)
            raise _Rejected(str(exc)) from exc
        try:
            yield
        finally:
            lock.release()


# --- small helpers -------------------------------------------------------------------------


def _store_name(pe_path: str, codeview: CodeView) -> str:
    """The PDB's file name as stores file it; refused when it could leave its folder."""
    name = codeview.pdb_name
    if (
        name in ("", ".", "..")
        or "\0" in name
        or len(name.encode("utf-8", "replace")) > NAME_MAX_BYTES
    ):
        raise PdbNotFound(f"{pe_path}: the PE names no usable PDB file ({codeview.pdb_path!r})")
    return name


def _beside(pe_path: str, codeview: CodeView, name: str) -> list[str]:
    """The recorded PDB path (relative to the PE when relative), then the PE's own folder."""
    here = os.path.dirname(os.path.abspath(pe_path))
    recorded = os.path.join(here, codeview.pdb_path) if codeview.pdb_path else ""
    candidates = [recorded, os.path.join(here, name)]
    return [c for i, c in enumerate(candidates) if c and c not in candidates[:i]]


def _problem(path: str, codeview: CodeView) -> str | None:
    """None when `path` is the PDB `codeview` names; else what is wrong with it."""
    try:
        return pdb.read_identity(path).mismatch(codeview)
    except pdb.PdbError as exc:
        return str(exc).removeprefix(f"{path}: ")


def _two_tier(store: str) -> bool:
    return os.path.isfile(os.path.join(store, INDEX2_FILE))


def _inside(path: str, store: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(store)]) == os.path.abspath(
        store
    )


def _join_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + urllib.parse.quote(path, safe="/")


def _read_small(path: str) -> str:
    return bundle.read_small_file(path, SMALL_FILE_BYTES).decode("utf-8", "replace")


def _copy(source: str, dest: str) -> None:
    with open(source, "rb") as src, open(dest, "xb") as out:
        shutil.copyfileobj(src, out)
        out.flush()
        os.fsync(out.fileno())


def _remove_leftovers(folder: str) -> None:
    """Temporary files of killed runs: the caller holds the key's lock, so none is live."""
    for leftover in glob.glob(os.path.join(glob.escape(folder), f".*{TEMP_SUFFIX}*")):
        atomic.unlink_quietly(leftover)
