"""SymCache files in the cache: their names, their format, and when one may be trusted.

`symcaches/<HEX>.v<N>`: one per dSYM slice, named by the slice's UUID and the SymCache
format version N of the installed `symbolic`. A file is a header holding the CRC-32 of the
table, then the table, written whole to a temporary sibling and renamed
(docs/cache-format.md). What is under a name is read only when it is a regular file of
this user's, opened without following a link or waiting on a FIFO or device, whose
checksum matches. What symbolic makes of the table (its format version, the UUID it
carries) is asked of a `TableCheck`: symbolicate/symcaches.py is the one that reads them,
and `dsymfind check` and `gc` are given it.
"""

from __future__ import annotations

import os
import stat
import zlib
from typing import TYPE_CHECKING, NamedTuple, Protocol

from dsymfind import atomic
from dsymfind.paths import SYMCACHE_VERSION_MARK, TEMP_SUFFIX
from dsymfind.uuids import normalize_uuid, uuid_hex

if TYPE_CHECKING:
    from dsymfind.paths import CachePaths


def name_parts(name: str) -> tuple[str, int] | None:
    """(UUID, format version) of a SymCache file's name; None for any other name."""
    stem, mark, version = name.rpartition(SYMCACHE_VERSION_MARK)
    uuid = normalize_uuid(stem) if mark and len(stem) == 32 else None
    if uuid is None or uuid_hex(uuid) != stem or not version.isdigit():
        return None
    return uuid, int(version)


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


def _verified(data: bytearray) -> tuple[memoryview, bool]:
    """The table in a file's bytes, when its header holds the table's digest, and whether
    it was built from an image's own symbol table (not a dSYM)."""
    if data.startswith(BARE_TABLE_MAGIC):
        raise Untrusted(LEFTOVER, "a SymCache without a digest (an earlier dsymfind's)")
    if not data.startswith(HEADER_MARK) or len(data) < HEADER_BYTES:
        raise Untrusted(INVALID, "no SymCache header: empty, cut short or not dsymfind's")
    table = memoryview(data)[HEADER_BYTES:]
    symbol_table = data[len(HEADER_MARK) + DIGEST_BYTES] == SYMBOL_TABLE_MARK[0]
    if data[:HEADER_BYTES] != header(table, symbol_table=symbol_table):
        raise Untrusted(INVALID, "damaged: its bytes do not match their digest")
    return table, symbol_table


# After the digest: the table was built from an image's own symbol table. A dSYM of the
# same UUID found later (an executable fetched before its build's dSYM was published)
# has its table built anew instead of reusing one without files and lines.
SYMBOL_TABLE_MARK = b"T"


def header(table: bytes | memoryview, *, symbol_table: bool = False) -> bytes:
    """The header a file of `table` begins with (docs/cache-format.md)."""
    digest = zlib.crc32(table).to_bytes(DIGEST_BYTES, "big")
    kind = SYMBOL_TABLE_MARK if symbol_table else b""
    return (HEADER_MARK + digest + kind).ljust(HEADER_BYTES, b"\0")


class TableCheck(Protocol):
    """What only the reader of SymCache tables knows (symbolicate/symcaches.py)."""

    @property
    def version(self) -> int:
        """The format the installed symbolic writes: tables of another are leftovers."""
        ...

    def check(self, table: memoryview, uuid: str) -> None:
        """Untrusted when symbolic does not read `table` as `uuid`'s of `version`."""
        ...


def write(path: str, table: bytes, *, symbol_table: bool = False) -> None:
    """A table kept whole under `path`, its header first (see read)."""
    kept = header(table, symbol_table=symbol_table) + table
    atomic.write_bytes(path, kept, fsync=False, mode=0o600)


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


class Judged(NamedTuple):
    path: str
    kind: str  # "invalid", "leftover" or "foreign", as `dsymfind check` counts them
    reason: str


def read_bytes(path: str) -> memoryview:
    """The table kept at `path`, in memory of its own, its checksum checked: Untrusted
    when it is not a regular file of ours or its checksum does not match;
    FileNotFoundError when nothing is there."""
    return _verified(_file_bytes(path))[0]


def read_with_kind(path: str) -> tuple[memoryview, bool]:
    """read_bytes, and whether the table was built from an image's own symbol table."""
    return _verified(_file_bytes(path))


def judge_all(cache: CachePaths, tables: TableCheck) -> list[Judged]:
    """What `dsymfind check` says of `symcaches/`, each table read as symbolicate reads it
    (its checksum checked): one it would not trust is invalid, or a leftover when made by
    an earlier dsymfind; one of another format is a leftover (never read again); a name the
    cache does not make is foreign."""
    judged = []
    for path, parts in _tables(cache):
        if path.endswith(TEMP_SUFFIX):
            continue  # a writer's temporary file: check judges those with every other
        if parts is None:
            judged.append(Judged(path, "foreign", "not a SymCache file dsymfind made"))
        elif parts[1] != tables.version:
            judged.append(Judged(path, LEFTOVER, f"a SymCache of format {parts[1]}"))
        else:
            problem = _untrusted(path, parts[0], tables)
            if problem is not None:
                judged.append(Judged(path, problem.kind, problem.reason))
    return judged


def _untrusted(path: str, uuid: str, tables: TableCheck) -> Untrusted | None:
    """Why the table at `path` is not trusted; None when it is, or is gone."""
    try:
        tables.check(read_bytes(path), uuid)
    except Untrusted as problem:
        return problem
    except FileNotFoundError:
        pass
    return None


def remove_untrusted(path: str, tables: TableCheck) -> bool:
    """check's repair of a name judge_all found: judged again (symbolicate may have
    rebuilt the table meanwhile), then removed; True when nothing untrusted is left."""
    parts = name_parts(os.path.basename(path))
    current = parts is not None and parts[1] == tables.version
    if current and parts is not None and _untrusted(path, parts[0], tables) is None:
        return True
    discard(path)
    return not os.path.lexists(path)


def unused(
    cache: CachePaths, version: int, *, now: float, max_age: float, everything: bool
) -> list[str]:
    """What `dsymfind gc` removes: tables of another format than `version`, those unused
    (by access time) for longer than `max_age`, and with `everything` all of them. Each is
    rebuilt from its dSYM when next needed."""
    gone = []
    for path, parts in _tables(cache):
        if parts is None:
            continue
        try:
            found = os.lstat(path)  # what is there, never what a link leads to
        except OSError:
            continue
        last_used = max(found.st_atime, found.st_mtime)
        if everything or parts[1] != version or now - last_used > max_age:
            gone.append(path)
    return gone


def _tables(cache: CachePaths) -> list[tuple[str, tuple[str, int] | None]]:
    try:
        names = sorted(os.listdir(cache.symcaches))
    except OSError:
        return []
    return [(os.path.join(cache.symcaches, name), name_parts(name)) for name in names]
