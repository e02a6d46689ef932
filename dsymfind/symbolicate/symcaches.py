"""SymCache files: a dSYM slice's functions, inline ranges and lines in one table that
`symbolic` opens by mapping it, in well under a millisecond (docs/cache-format.md).

`symcaches/<HEX>.v<N>`: one per slice, named by the slice's UUID and the SymCache
format version N of the installed `symbolic`. Written whole to a temporary sibling and
renamed, so a crash leaves no half-written table under a final name; a file that does
not open, or carries another UUID, is rebuilt. A UUID names one build, so a table made
from one copy of a dSYM serves every copy.
"""

from __future__ import annotations

import os

from dsymfind import atomic
from dsymfind.cache_layout import SYMCACHE_VERSION_MARK, TEMP_SUFFIX
from dsymfind.errors import DsymfindError
from dsymfind.symbolicate import bindings
from dsymfind.tuples import Record
from dsymfind.uuids import normalize_uuid, uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from dsymfind.cache_layout import CacheLayout

    T = TypeVar("T")
    R = TypeVar("R")

SymCache = bindings.SymCache


class UnusableDsym(DsymfindError):
    """The dSYM cannot symbolicate its UUID: no such slice, or DWARF symbolic cannot read."""


def current_version() -> int:
    return bindings.latest_version()


def name_parts(name: str) -> tuple[str, int] | None:
    """(UUID, format version) of a SymCache file's name; None for any other name."""
    stem, mark, version = name.rpartition(SYMCACHE_VERSION_MARK)
    uuid = normalize_uuid(stem) if mark and len(stem) == 32 else None
    if uuid is None or uuid_hex(uuid) != stem or not version.isdigit():
        return None
    return uuid, int(version)


# At most this many tables are built at once: symbolic builds with the GIL released.
MAX_BUILDERS = 4


def load(layout: CacheLayout | None, dwarf_path: str, uuid: str) -> SymCache:
    """The SymCache of `uuid`'s slice of `dwarf_path`: from the cache, else built (and
    kept there when `layout` is given)."""
    loaded = load_all(layout, {uuid: dwarf_path})[uuid]
    if isinstance(loaded, UnusableDsym):
        raise loaded
    return loaded


def load_all(
    layout: CacheLayout | None, dwarf_paths: dict[str, str]
) -> dict[str, SymCache | UnusableDsym]:
    """For each UUID (mapped to its DWARF file), its SymCache or why there is none: the
    kept tables opened, the others built several at a time, one thread per core."""
    loaded: dict[str, SymCache | UnusableDsym] = {}
    to_build = []
    for uuid, dwarf_path in dwarf_paths.items():
        cached = None if layout is None else open_checked(_file(layout, uuid), uuid)
        if cached is None:
            to_build.append((uuid, dwarf_path))
        else:
            loaded[uuid] = cached
    builders = min(len(to_build), os.cpu_count() or 1, MAX_BUILDERS)
    shares = [to_build[start::builders] for start in range(builders)]
    results = _in_threads(lambda share: [_built(layout, *each) for each in share], shares)
    loaded.update(dict(pair for result in results for pair in result))
    return loaded


def _file(layout: CacheLayout, uuid: str) -> str:
    return layout.symcache_file(uuid_hex(uuid), current_version())


def _built(
    layout: CacheLayout | None, uuid: str, dwarf_path: str
) -> tuple[str, SymCache | UnusableDsym]:
    try:
        built = build(dwarf_path, uuid)
    except UnusableDsym as exc:
        return uuid, exc
    if layout is not None:
        _keep(_file(layout, uuid), built)
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


def open_checked(path: str, uuid: str) -> SymCache | None:
    """The SymCache at `path` when it opens, is of the current format and carries `uuid`."""
    try:
        cached = SymCache.open(path)
    except bindings.SymbolicError:
        return None
    if cached.version != current_version() or normalize_uuid(cached.debug_id) != uuid:
        return None
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


def _keep(path: str, built: SymCache) -> None:
    """Write the table for next time; a cache that cannot take it only costs a rebuild."""
    import contextlib

    with contextlib.suppress(OSError):
        atomic.write_bytes(path, built.data(), fsync=False, mode=0o600)


def _first_line(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0] or type(exc).__name__


class Judged(Record):
    path: str
    kind: str  # "invalid", "leftover" or "foreign", as `dsymfind check` counts them
    reason: str


def judge_all(layout: CacheLayout) -> list[Judged]:
    """What `dsymfind check` says of `symcaches/`: a table that does not open or carries
    another UUID is invalid; one of another format is a leftover (never read again);
    a name the cache does not make is foreign."""
    judged = []
    for path, parts in _tables(layout):
        if path.endswith(TEMP_SUFFIX):
            continue  # a writer's temporary file: check judges those with every other
        if parts is None:
            judged.append(Judged(path, "foreign", "not a SymCache file dsymfind made"))
        elif parts[1] != current_version():
            judged.append(Judged(path, "leftover", f"a SymCache of format {parts[1]}"))
        elif open_checked(path, parts[0]) is None:
            judged.append(Judged(path, "invalid", f"not a readable SymCache of {parts[0]}"))
    return judged


def unused(layout: CacheLayout, *, now: float, max_age: float, everything: bool) -> list[str]:
    """What `dsymfind gc` removes: tables of another format, those unused (by access time)
    for longer than `max_age`, and with `everything` all of them. Each is rebuilt from its
    dSYM when next needed."""
    gone = []
    for path, parts in _tables(layout):
        if parts is None:
            continue
        try:
            last_used = max(os.stat(path).st_atime, os.stat(path).st_mtime)
        except OSError:
            continue
        if everything or parts[1] != current_version() or now - last_used > max_age:
            gone.append(path)
    return gone


def _tables(layout: CacheLayout) -> list[tuple[str, tuple[str, int] | None]]:
    try:
        names = sorted(os.listdir(layout.symcaches))
    except OSError:
        return []
    return [(os.path.join(layout.symcaches, name), name_parts(name)) for name in names]
