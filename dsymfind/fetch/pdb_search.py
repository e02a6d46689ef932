"""Find the PDB that matches a PE file: on disk, in symbol stores, or from symbol servers.

Search order (docs/symbol-stores.md, as DbgHelp searches): the PDB path the PE records and
the PE's own folder, then each symbol path element in turn: plain folders, `cache*` stores
and `srv*` chains, whose local stores are checked before their server is asked. A store is
laid out as DbgHelp's, `STORE/<name>/<GUID><AGE>/<name>` (two-tier, under the name's first
two characters, when `index2.txt` is at its root), and may hold `file.ptr` (a `PATH:` to the
real file) or the CAB-compressed `<name minus its last character>_` instead of the file.

The machinery is the dSYM path's: stores are reached through stores/ (HTTP, or a
folder named by a file: URL), server backoff is fetch/backoff.py's (`--ignore-negative-cache`
asks servers in backoff too; run on purpose, `pdb` keeps no negative cache, so a PDB
published since is found at once), one process at a time fetches a key under the
cache's kind of per-key lock (in the store's own lock folder), and every candidate is
verified (GUID and age, windows/pdb.py) in a temporary sibling before it takes its final
name (atomic.replace_verified). A server's file.ptr is followed only inside that server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import filelock

from dsymfind import atomic, paths, permissions, stores
from dsymfind.cache import locks
from dsymfind.errors import DsymfindError
from dsymfind.fetch import backoff
from dsymfind.log import get_logger
from dsymfind.paths import CachePaths, short_name
from dsymfind.stores import base, symstore, transfer
from dsymfind.stores.symbol_path import Cache, Chain, Element, Folder
from dsymfind.windows import cab, pdb
from dsymfind.windows.pe import CodeView

if TYPE_CHECKING:
    from dsymfind.settings import Settings

# Hidden in the store's root, where DbgHelp never looks; lock files are never deleted.
LOCK_FOLDER = ".dsymfind-locks"
NAME_MAX_BYTES = 255  # one path component on every file system we run on


class PdbNotFound(DsymfindError):
    """No matching PDB anywhere on the symbol path; the message says what was seen."""


@dataclass
class _Wanted:
    """One PDB being looked for, and the notable things seen on the way."""

    codeview: CodeView
    name: str
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.codeview.key


@dataclass(frozen=True)
class _ServerKey:
    """A key being fetched from one server: where it is there, and where it goes."""

    server: base.Reader
    folder: str
    downstream: str


# One pass over the symbol path: (element, what is wanted, cache* stores to its left).
_Step = Callable[[Element, "_Wanted", list[str]], str | None]


class _Rejected(Exception):
    """A candidate that is not the wanted PDB (or cannot be unpacked): never placed."""


class Search:
    """Finds PDBs along one symbol path; one HTTP client and index2 memory for all files."""

    def __init__(
        self, settings: Settings, elements: list[Element], *, ignore_negative_cache: bool = False
    ) -> None:
        self.settings = settings
        self.elements = elements
        self.cache = CachePaths(settings["cache_dir"])
        permissions.secure_cache(self.cache.root)
        self.log = get_logger(settings["log_file"])
        self.limits = base.Limits(
            total_timeout=settings["download_timeout"], max_bytes=settings["max_download_bytes"]
        )
        self.session = transfer.Session(self.limits)
        # Run on purpose, so no negative cache: a PDB published since is found at once.
        how = backoff.asking(on_purpose=True, ignore=ignore_negative_cache)
        self.backoff = backoff.Backoff(self.cache, settings, how)
        self._two_tier: dict[str, bool] = {}  # per server: probed once, remembered

    def __enter__(self) -> Search:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.session.__exit__(*exc_info)

    def find(self, pe_path: str, codeview: CodeView) -> str:
        """The path of the matching PDB; raises PdbNotFound with what was seen."""
        wanted = _Wanted(codeview, _store_name(pe_path, codeview))
        for candidate in _beside(pe_path, codeview, wanted.name):
            if self._matches(candidate, wanted, "found at"):
                return candidate
        # DbgHelp's order: plain folders, then stores; and no server is asked while a
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
        two_tier = symstore.is_two_tier(store)
        folder = os.path.join(
            store, symstore.key_folder(wanted.name, wanted.key, two_tier=two_tier)
        )
        path = os.path.join(folder, wanted.name)
        if self._matches(path, wanted, "found at"):
            return path
        pointer = os.path.join(folder, symstore.POINTER_FILE)
        if os.path.isfile(pointer):
            try:
                text = _read_small(pointer)
            except OSError as exc:
                wanted.problems.append(f"{pointer}: {exc.strerror or exc}")
                return None
            return self._pointed_locally(text, pointer, wanted)
        packed = os.path.join(folder, symstore.compressed_name(wanted.name))
        if os.path.isfile(packed):
            with contextlib.suppress(_Rejected):
                return self._place(downstream, wanted, lambda tmp: self._unpack(packed, tmp))
        return None

    def _pointed_locally(self, text: str, where: str, wanted: _Wanted) -> str | None:
        """What a local store's file.ptr names (a local or UNC path), when it is the PDB."""
        pointer = symstore.read_pointer(text)
        if pointer.target is None:
            wanted.problems.append(f"{where} {pointer.message}")
            return None
        if not os.path.isfile(pointer.target):
            wanted.problems.append(f"{where} points to {pointer.target}, which is not here")
            return None
        return (
            pointer.target if self._matches(pointer.target, wanted, f"{where} pointed to") else None
        )

    # --- symbol servers --------------------------------------------------------------------

    def _download(self, url: str, downstream: str, wanted: _Wanted) -> str | None:
        """From the server at `url` (any kind: HTTP, a file: URL), placed in downstream."""
        if self._backing_off(url, wanted):
            return None
        try:
            server = stores.open_reader(url, self.session)
            folder = symstore.key_folder(
                wanted.name, wanted.key, two_tier=self._server_two_tier(url, server)
            )
            found = self._download_variants(_ServerKey(server, folder, downstream), wanted)
        except base.TransferError as exc:
            wanted.problems.append(str(exc))
            if isinstance(exc, base.ReaderBug):
                self.log.error("bug in source %s:\n%s", base.redact(url), exc.details)
            if exc.retryable:
                self.backoff.note_failing(url)
            return None
        except _Rejected:
            return None  # the downstream store's lock: unwritable, or held too long (noted)
        except DsymfindError as exc:  # a symbol path naming a kind of store we cannot reach
            wanted.problems.append(str(exc))
            return None
        except OSError as exc:  # the cache's scratch folder, for index2.txt and file.ptr
            wanted.problems.append(f"{base.redact(url)}: cannot fetch ({exc.strerror or exc})")
            return None
        self.backoff.note_healthy(url)
        return found

    def _backing_off(self, url: str, wanted: _Wanted) -> bool:
        """Whether the server's backoff says not to ask (noted)."""
        waiting = self.backoff.waiting(url)
        if waiting is not None:
            wanted.problems.append(backoff.backoff_message("server", url, waiting))
            return True
        return False

    def _server_two_tier(self, url: str, server: base.Reader) -> bool:
        if url not in self._two_tier:
            self._two_tier[url] = self._exists(server, symstore.INDEX2_FILE)
        return self._two_tier[url]

    def _exists(self, server: base.Reader, key: str) -> bool:
        """Whether the server has `key` (its content is not wanted)."""
        try:
            self._get_small(server, key)
        except base.NotFound:
            return False
        except base.TooLarge:
            pass
        return True

    def _get_small(self, server: base.Reader, key: str) -> str:
        """A small text file from the server (index2.txt, file.ptr)."""
        with self.cache.new_staging("pdb-") as scratch:
            path = os.path.join(scratch, "small")
            self._get(server, key, path, symstore.SMALL_FILE_BYTES)
            return _read_small(path)

    def _download_variants(self, at: _ServerKey, wanted: _Wanted) -> str | None:
        """The file, else its CAB form, else its file.ptr: placed in downstream when found."""
        server, folder, downstream = at.server, at.folder, at.downstream
        packed = symstore.compressed_name(wanted.name)
        variants: list[Callable[[str], object]] = [
            lambda tmp: self._get(server, f"{folder}/{wanted.name}", tmp),
            lambda tmp: self._get_packed(server, f"{folder}/{packed}", tmp),
        ]
        final = os.path.join(
            symstore.local_folder(downstream, wanted.name, wanted.key), wanted.name
        )
        with self._key_lock(downstream, wanted):
            if self._matches(final, wanted, "found at"):
                return final  # another process fetched it while we waited for the lock
            for fetch in variants:
                try:
                    return self._place(downstream, wanted, fetch, locked=True)
                except base.NotFound:
                    continue
                except _Rejected:
                    return None
            return self._follow_remote_pointer(at, wanted)

    def _follow_remote_pointer(self, at: _ServerKey, wanted: _Wanted) -> str | None:
        """A server's file.ptr, followed only inside that server's own store.

        A remote store must not make us read local files (`PATH:/proc/self/environ`), copy
        them into a store, or have the automounter contact other hosts (`PATH:/net/...`,
        UNC paths): only a relative path, fetched from the same server, is followed.
        """
        server = at.server
        key = f"{at.folder}/{symstore.POINTER_FILE}"
        try:
            text = self._get_small(server, key)
        except base.NotFound:
            return None
        shown = server.where(key)
        pointer = symstore.read_pointer(text)
        target = pointer.target
        if target is None:
            wanted.problems.append(f"{shown} {pointer.message}")
            return None
        relative = target.replace("\\", "/")
        if relative.startswith("/") or "://" in relative or ":" in relative.split("/", 1)[0]:
            wanted.problems.append(f"{shown} points to {target}, outside that store: not followed")
            return None
        with contextlib.suppress(_Rejected, base.NotFound):
            return self._place(
                at.downstream, wanted, lambda tmp: self._get(server, relative, tmp), locked=True
            )
        return None

    def _get(
        self, server: base.Reader, key: str, dest: str, max_bytes: int | None = None
    ) -> base.Fetched:
        limits = self.limits
        if max_bytes is not None:
            limits = base.Limits(total_timeout=limits.total_timeout, max_bytes=max_bytes)
        got = server.get(key, dest, base.Terms(limits))
        self.log.info("pdb: fetched %s (%d bytes)", got.location, got.size)
        return got

    def _get_packed(self, server: base.Reader, key: str, tmp: str) -> None:
        # A temp sibling of its own, so a killed run's cabinet is cleared like any other.
        packed = paths.temp_sibling(os.path.join(os.path.dirname(tmp), "download.cab"))
        try:
            self._get(server, key, packed)
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
        the wanted one or cannot be written. base.NotFound passes through."""
        two_tier = symstore.is_two_tier(store)
        folder = os.path.join(
            store, symstore.key_folder(wanted.name, wanted.key, two_tier=two_tier)
        )
        final = os.path.join(folder, wanted.name)
        with contextlib.nullcontext() if locked else self._key_lock(store, wanted):
            if not locked and self._matches(final, wanted, "found at"):
                return final
            try:
                os.makedirs(folder, exist_ok=True)
                _remove_leftovers(folder)
                atomic.replace_verified(final, write, lambda tmp: _require(tmp, wanted.codeview))
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
        """One writer per key and store, across processes (the cache's own kind of lock)."""
        name = short_name(f"{wanted.name}/{wanted.key}") + ".lock"
        try:
            lock = locks.key_lock(
                os.path.join(store, LOCK_FOLDER, name), timeout=self.settings["download_timeout"]
            )
            lock.acquire()
        except filelock.Timeout as exc:  # a TimeoutError, so an OSError: caught first
            self._reject(f"{store}: another process held {wanted.name} too long", wanted)
            raise _Rejected(str(exc)) from exc
        except OSError as exc:
            self._reject(f"{store}: cannot write ({exc.strerror or exc})", wanted)
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


def _require(path: str, codeview: CodeView) -> None:
    problem = _problem(path, codeview)
    if problem is not None:
        raise _Rejected(f"the answer is not the PDB wanted: {problem}")


def _inside(path: str, store: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(store)]) == os.path.abspath(
        store
    )


def _read_small(path: str) -> str:
    return atomic.read_small_file(path, symstore.SMALL_FILE_BYTES).decode("utf-8", "replace")


def _copy(original: str, dest: str) -> None:
    with open(original, "rb") as src, open(dest, "xb") as out:
        shutil.copyfileobj(src, out)
        out.flush()
        os.fsync(out.fileno())


def _remove_leftovers(folder: str) -> None:
    """Temporary files of killed runs: the caller holds the key's lock, so none is live."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if paths.temp_writer(name) is not None:
            atomic.unlink_quietly(os.path.join(folder, name))
