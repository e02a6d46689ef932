"""SymCache files: a dSYM slice's functions, inline ranges and lines in one table that
`symbolic` reads in place, in well under a millisecond (docs/cache-format.md).

`symcaches/<HEX>.v<N>`: one per slice, named by the slice's UUID and the SymCache
format version N of the installed `symbolic`. A file is a header holding the CRC-32
of the table, then the table, written whole to a temporary sibling and renamed.
A table is trusted only from a regular file of this user's, opened without following a
link or waiting on a FIFO or device, whose checksum matches, which symbolic reads and which
carries its name's UUID; anything else under the name is rebuilt and replaced. A UUID
names one build, so a table made from one copy of a dSYM serves every copy.
"""

from __future__ import annotations

import os
import stat
import zlib

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
    """The SymCache at `path` when it may be trusted (see read); None otherwise."""
    try:
        return read(path, uuid)
    except (Untrusted, FileNotFoundError):
        return None


class Untrusted(Exception):
    """Why what is under a table's name is not read as a table."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind  # "invalid" or "leftover", as `dsymfind check` counts them
        self.reason = reason


INVALID, LEFTOVER = "invalid", "leftover"
# A file's header: a mark naming this layout, then the CRC-32 of the table that follows
# (big-endian), then zeros. The check is for damage, not forgery (the cache is the user's
# alone): CRC-32 finds every flipped byte and every burst of up to 32 bits, and misses
# other damage once in 2^32, at a quarter of BLAKE2b's cost on a warm run
# (docs/cache-format.md). 64 bytes keep the table as aligned as its buffer: symbolic
# reads it in place and refuses a table that is not 8-byte aligned.
HEADER_MARK = b"dsymfind symc 1\n"
DIGEST_BYTES = 4
HEADER_BYTES = 64
# How symbolic's own table begins: a file of an earlier dsymfind, kept without a header.
BARE_TABLE_MAGIC = b"SYMC"
# Never follow a link, never wait for a FIFO's writer or a device: fstat says what opened.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NOT_FILES = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFSOCK: "a socket",
}


def read(path: str, uuid: str) -> SymCache:
    """The table kept at `path`, from the bytes its digest was checked on: Untrusted
    when it is not a regular file of ours, its digest or its format does not match, or it
    carries another UUID; FileNotFoundError when there is nothing there."""
    table = _verified(_file_bytes(path))
    try:
        cached = SymCache.from_bytes(table)
    except bindings.SymbolicError as exc:
        raise Untrusted(INVALID, f"not a table symbolic reads ({_first_line(exc)})") from None
    if cached.version != current_version():
        raise Untrusted(INVALID, f"holds a SymCache of format {cached.version}")
    if normalize_uuid(cached.debug_id) != uuid:
        raise Untrusted(INVALID, f"holds the SymCache of {cached.debug_id}, not of {uuid}")
    return cached


def _file_bytes(path: str) -> bytearray:
    """A regular file's bytes, read into memory of their own: symbolic then reads the very
    bytes whose digest was checked, whatever becomes of the file."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Untrusted(INVALID, _unopened(path, exc)) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise Untrusted(INVALID, _not_a_file(found.st_mode))
        if found.st_uid != os.getuid():
            raise Untrusted(INVALID, f"owned by uid {found.st_uid}, not by this user")
        return _read_exactly(fd, found.st_size)
    finally:
        os.close(fd)


def _unopened(path: str, exc: OSError) -> str:
    """Why `path` did not open: what is there (a symlink, a socket), else the error."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return "a symlink, never followed"
    if mode and not stat.S_ISREG(mode):
        return _not_a_file(mode)
    return f"cannot be read ({exc.strerror or exc})"


def _not_a_file(mode: int) -> str:
    return f"{_NOT_FILES.get(stat.S_IFMT(mode), 'something')}, not a file"


def _read_exactly(fd: int, size: int) -> bytearray:
    """`size` bytes of `fd` (fewer read leave zeros, which the digest refuses), into a
    bytearray: its buffer comes from malloc, aligned as symbolic needs."""
    data = bytearray(size)
    with memoryview(data) as view:
        done = 0
        while done < size:
            count = os.readv(fd, [view[done:]])
            if not count:
                break
            done += count
    return data


def _verified(data: bytearray) -> memoryview:
    """The table in a file's bytes, when its header holds the table's digest."""
    if data.startswith(BARE_TABLE_MAGIC):
        raise Untrusted(LEFTOVER, "a SymCache without a digest (an earlier dsymfind's)")
    if not data.startswith(HEADER_MARK) or len(data) < HEADER_BYTES:
        raise Untrusted(INVALID, "no SymCache header: empty, cut short or not dsymfind's")
    table = memoryview(data)[HEADER_BYTES:]
    if data[:HEADER_BYTES] != header(table):
        raise Untrusted(INVALID, "damaged: its bytes do not match their digest")
    return table


def header(table: bytes | memoryview) -> bytes:
    """The header a file of `table` begins with (docs/cache-format.md)."""
    digest = zlib.crc32(table).to_bytes(DIGEST_BYTES, "big")
    return (HEADER_MARK + digest).ljust(HEADER_BYTES, b"\0")


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
    """Write the table for next time; a cache that cannot take it only costs a rebuild.
    Without an fsync: what a power loss may leave (an empty file, a cut or stale one)
    fails its digest and is rebuilt."""
    import contextlib

    table = built.data()
    with contextlib.suppress(OSError):
        try:
            _write(path, table)
        except IsADirectoryError:  # a folder in the table's place: a rename cannot replace it
            discard(path)
            _write(path, table)


def _write(path: str, table: bytes) -> None:
    atomic.write_bytes(path, header(table) + table, fsync=False, mode=0o600)


def discard(path: str) -> None:
    """Remove what is under a table's name: the file, link, FIFO or device itself (never
    what a link leads to), or a folder with what it holds."""
    try:
        is_folder = stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return
    if is_folder:
        import shutil

        shutil.rmtree(path, ignore_errors=True)
    else:
        atomic.unlink_quietly(path)


def _first_line(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0] or type(exc).__name__


class Judged(Record):
    path: str
    kind: str  # "invalid", "leftover" or "foreign", as `dsymfind check` counts them
    reason: str


def judge_all(layout: CacheLayout) -> list[Judged]:
    """What `dsymfind check` says of `symcaches/`, each table read as symbolicate reads it
    (its digest checked): one it would not trust is invalid, or a leftover when made by an
    earlier dsymfind; one of another format is a leftover (never read again); a name the
    cache does not make is foreign."""
    judged = []
    for path, parts in _tables(layout):
        if path.endswith(TEMP_SUFFIX):
            continue  # a writer's temporary file: check judges those with every other
        if parts is None:
            judged.append(Judged(path, "foreign", "not a SymCache file dsymfind made"))
        elif parts[1] != current_version():
            judged.append(Judged(path, LEFTOVER, f"a SymCache of format {parts[1]}"))
        else:
            problem = _untrusted(path, parts[0])
            if problem is not None:
                judged.append(Judged(path, problem.kind, problem.reason))
    return judged


def _untrusted(path: str, uuid: str) -> Untrusted | None:
    """Why the table at `path` is not trusted; None when it is, or is gone."""
    try:
        read(path, uuid)
    except Untrusted as problem:
        return problem
    except FileNotFoundError:
        pass
    return None


def remove_untrusted(path: str) -> bool:
    """check's repair of a name judge_all found: judged again (symbolicate may have
    rebuilt the table meanwhile), then removed; True when nothing untrusted is left."""
    parts = name_parts(os.path.basename(path))
    if parts is not None and parts[1] == current_version() and _untrusted(path, parts[0]) is None:
        return True
    discard(path)
    return not os.path.lexists(path)


def unused(layout: CacheLayout, *, now: float, max_age: float, everything: bool) -> list[str]:
    """What `dsymfind gc` removes: tables of another format, those unused (by access time)
    for longer than `max_age`, and with `everything` all of them. Each is rebuilt from its
    dSYM when next needed."""
    gone = []
    for path, parts in _tables(layout):
        if parts is None:
            continue
        try:
            found = os.lstat(path)  # what is there, never what a link leads to
        except OSError:
            continue
        last_used = max(found.st_atime, found.st_mtime)
        if everything or parts[1] != current_version() or now - last_used > max_age:
            gone.append(path)
    return gone


def _tables(layout: CacheLayout) -> list[tuple[str, tuple[str, int] | None]]:
    try:
        names = sorted(os.listdir(layout.symcaches))
    except OSError:
        return []
    return [(os.path.join(layout.symcaches, name), name_parts(name)) for name in names]
