"""SymCaches: a dSYM slice's functions, inline ranges and lines in one table that
`symbolic` reads in place, in well under a millisecond (docs/cache-format.md).

Kept in the cache as cache/symcache_files.py spells and checks them; this module builds
them and says what symbolic makes of one. A table is trusted only from a file that module
would read, which symbolic reads as this format version and which carries its name's
UUID; anything else under the name is rebuilt and replaced. A UUID names one build, so a
table made from one copy of a dSYM serves every copy.
"""

from __future__ import annotations

import os

from dsymfind.cache import symcache_files
from dsymfind.cache.symcache_files import INVALID, Untrusted, discard
from dsymfind.errors import DsymfindError
from dsymfind.symbolicate import bindings
from dsymfind.uuids import normalize_uuid, uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Set
    from typing import TypeVar

    from dsymfind.paths import CachePaths

    T = TypeVar("T")
    R = TypeVar("R")

SymCache = bindings.SymCache


class UnusableDsym(DsymfindError):
    """The dSYM cannot symbolicate its UUID: no such slice, or DWARF symbolic cannot read."""


def current_version() -> int:
    return bindings.latest_version()


# At most this many tables are built at once: symbolic builds with the GIL released.
MAX_BUILDERS = 4


def load(cache: CachePaths | None, dwarf_path: str, uuid: str) -> SymCache:
    """The SymCache of `uuid`'s slice of the dSYM `dwarf_path`: from the cache, else built
    (and kept there when `cache` is given)."""
    loaded = load_all(cache, {uuid: dwarf_path})[uuid]
    if isinstance(loaded, UnusableDsym):
        raise loaded
    return loaded


def load_all(
    cache: CachePaths | None,
    dwarf_paths: dict[str, str],
    symbol_tables: Set[str] = frozenset(),
) -> dict[str, SymCache | UnusableDsym]:
    """For each UUID (mapped to its DWARF file, or for those in `symbol_tables` the image
    whose own symbol table stands in), its SymCache or why there is none: the kept tables
    opened (one built from the other kind of file is not), the others built several at a
    time, one thread per core."""
    loaded: dict[str, SymCache | UnusableDsym] = {}
    to_build = []
    for uuid, dwarf_path in dwarf_paths.items():
        own = uuid in symbol_tables
        cached = None if cache is None else open_checked(_file(cache, uuid), uuid, symbol_table=own)
        if cached is None:
            to_build.append((uuid, dwarf_path, own))
        else:
            loaded[uuid] = cached
    builders = min(len(to_build), os.cpu_count() or 1, MAX_BUILDERS)
    shares = [to_build[start::builders] for start in range(builders)]
    results = _in_threads(lambda share: [_built(cache, *each) for each in share], shares)
    loaded.update(dict(pair for result in results for pair in result))
    return loaded


def _file(cache: CachePaths, uuid: str) -> str:
    return cache.symcache_file(uuid_hex(uuid), current_version())


def _built(
    cache: CachePaths | None, uuid: str, dwarf_path: str, symbol_table: bool
) -> tuple[str, SymCache | UnusableDsym]:
    try:
        built = build(dwarf_path, uuid)
    except UnusableDsym as exc:
        return uuid, exc
    if cache is not None:
        _keep(_file(cache, uuid), built, symbol_table=symbol_table)
    return uuid, built


def _in_threads(work: Callable[[T], R], shares: list[T]) -> list[R]:
    """`work` of each share, the first in this thread and each other in one of its own;
    what one raises is raised here once all are done."""
    if len(shares) < 2:
        return [work(share) for share in shares]
    import threading

    results: dict[int, R] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results[index] = work(shares[index])
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            errors.append(exc)

    others = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(1, len(shares))]
    for thread in others:
        thread.start()
    run(0)
    for thread in others:
        thread.join()
    if errors:
        raise errors[0]
    return [results[index] for index in range(len(shares))]


def open_checked(path: str, uuid: str, *, symbol_table: bool = False) -> SymCache | None:
    """The SymCache at `path` when it may be trusted (see read) and was built from the
    kind of file wanted (a dSYM, or with `symbol_table` the image's own); None otherwise."""
    try:
        return read(path, uuid, symbol_table=symbol_table)
    except (Untrusted, FileNotFoundError):
        return None


class Tables:
    """symbolic's side of the cache's SymCache files (symcache_files.TableCheck)."""

    @property
    def version(self) -> int:
        return current_version()

    def check(self, table: memoryview, uuid: str) -> None:
        _opened(table, uuid)


TABLES = Tables()


def read(path: str, uuid: str, *, symbol_table: bool = False) -> SymCache:
    """The table kept at `path` (symcache_files.read_bytes), as symbolic reads it: Untrusted
    when it may not be used (built from the other kind of file than `symbol_table` says
    is wanted, among others), FileNotFoundError when nothing is there."""
    table, own = symcache_files.read_with_kind(path)
    if own != symbol_table:
        built_from = "an image's own symbol table" if own else "a dSYM"
        raise Untrusted(INVALID, f"built from {built_from}")
    return _opened(table, uuid)


def _opened(table: memoryview, uuid: str) -> SymCache:
    try:
        cached = SymCache.from_bytes(table)
    except bindings.SymbolicError as exc:
        raise Untrusted(INVALID, f"not a table symbolic reads ({_first_line(exc)})") from None
    if cached.version != current_version():
        raise Untrusted(INVALID, f"holds a SymCache of format {cached.version}")
    if normalize_uuid(cached.debug_id) != uuid:
        raise Untrusted(INVALID, f"holds the SymCache of {cached.debug_id}, not of {uuid}")
    return cached


def build(dwarf_path: str, uuid: str) -> SymCache:
    """A new SymCache of `uuid`'s slice; UnusableDsym when there is none or it is unreadable."""
    try:
        built = bindings.build_symcache(dwarf_path, lambda found: normalize_uuid(found) == uuid)
    except bindings.SymbolicError as exc:
        raise UnusableDsym(f"{dwarf_path}: unreadable DWARF ({_first_line(exc)})") from None
    if built is None:
        raise UnusableDsym(f"{dwarf_path} holds no slice with UUID {uuid}")
    return built


def _keep(path: str, built: SymCache, *, symbol_table: bool) -> None:
    """Write the table for next time; a cache that cannot take it only costs a rebuild.
    Without an fsync: what a power loss may leave (an empty file, a cut or stale one)
    fails its digest and is rebuilt."""
    import contextlib

    table = built.data()
    with contextlib.suppress(OSError):
        try:
            symcache_files.write(path, table, symbol_table=symbol_table)
        except IsADirectoryError:  # a folder in the table's place: a rename cannot replace it
            discard(path)
            symcache_files.write(path, table, symbol_table=symbol_table)


def _first_line(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0] or type(exc).__name__
