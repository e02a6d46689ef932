"""Turn a symbol server's answer into files: a bare Mach-O, a gzip of one, or a zip of dSYMs.

The answer is data from the network, so unpacking it must be total: any input
either yields files under `dest` or raises ArchiveError (OSError only for real
I/O failures such as a full disk). Nothing is ever written outside `dest`,
nothing is followed or replaced there, memory stays flat (CHUNK_BYTES at a
time) and the bytes written are capped whatever an archive claims.

`dest` belongs to the caller and should be empty. After an ArchiveError it may
hold complete files from the archive, never a half-written one; the caller
discards it. The caller also verifies every Mach-O before publishing anything.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import os
import re
import stat
import struct
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from macholib import mach_o

from dsymfind.apple import bundle, macho
from dsymfind.errors import DsymfindError

if TYPE_CHECKING:
    import zipfile

# App Store Connect's dSYMs.zip for a large app holds a few hundred bundles of a
# handful of entries each; far more is an archive built to exhaust inodes or time.
MAX_ENTRIES = 10_000
# Unit of every read and write: memory per entry stays bounded whatever sizes are claimed.
CHUNK_BYTES = 1 << 20
# Enough for every magic sniffed here, including the universal header's arch count.
SNIFF_BYTES = 16
# NAME_MAX on APFS and Linux: a longer zip name would only fail later as an OSError.
MAX_NAME_BYTES = 255
# macOS PATH_MAX: lldb could not open a deeper file, and it bounds our folder walks.
MAX_PATH_BYTES = 1024
# How deep a .dSYM folder may sit in a zip and still be an answer: `Foo.dSYM` is 0,
# App Store Connect's `dSYMs/Foo.dSYM` 1, an archive's `X.xcarchive/dSYMs/Foo.dSYM` 2.
MAX_BUNDLE_DEPTH = 3
# Modes of what we create, never the archive's own: no setuid or executable payloads.
FILE_MODE = 0o644
DIR_MODE = 0o755
# Name of a decompressed gzip/zlib answer whose download name does not end in ".gz".
FALLBACK_NAME = "payload"
# What ditto, zip(1) and App Store Connect write; the bzip2 and lzma decoders would
# add their own error types (bz2 raises OSError on bad data) for no real answer.
ZIP_METHODS = frozenset({0, 8})  # zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
# Finder's "Compress" stores AppleDouble resource forks here; no bundle needs them.
APPLEDOUBLE_FOLDER = "__macosx"
# lldb imports these when `target.load-script-from-symbol-file` is on: network code.
# Compared folded, as APFS compares names (case- and normalisation-insensitive).
SCRIPTS_FOLDER = ("contents", "resources", "python")

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")  # entry, empty archive, spanned
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_THIN_MAGICS = frozenset({mach_o.MH_MAGIC, mach_o.MH_CIGAM, mach_o.MH_MAGIC_64, mach_o.MH_CIGAM_64})
_FAT_MAGICS = frozenset({mach_o.FAT_MAGIC, mach_o.FAT_MAGIC_64})
_MACHO_KINDS = ("macho", "fat")
_WORD = struct.Struct(">I")

_ENCRYPTED_FLAGS = 0x1 | 0x40  # traditional PKWARE encryption, strong encryption
_DRIVE = re.compile(r"[A-Za-z]:")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc, exactly
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


# What zipfile raises on a damaged or hostile archive (RuntimeError: a password is needed);
# zipfile is loaded by the first zip archive (most answers are a bare Mach-O or a gzip).
@functools.cache
def _zip_errors() -> tuple[type[Exception], ...]:
    import zipfile

    return (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        EOFError,
        NotImplementedError,
        RuntimeError,
        ValueError,
        struct.error,
        OverflowError,
    )


_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


class ArchiveError(DsymfindError):
    """The answer is not a Mach-O file or an archive we can safely unpack; says why."""


@dataclass(frozen=True)
class Unpacked:
    """What unpack produced.

    kind "macho": paths is [the Mach-O file] (the download itself, or its decompression);
    kind "bundles": the X.dSYM folders under dest; kind "file": [the zip's one Mach-O file].
    skipped_scripts: zip entry names under a bundle's Contents/Resources/Python, not extracted.
    """

    kind: str
    paths: list[str]
    skipped_scripts: list[str] = field(default_factory=list)


@dataclass
class _Budget:
    """A cap on bytes written, counted on what decompression yields, not on what headers say."""

    limit: int
    used: int = 0

    def spend(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise ArchiveError(f"the answer unpacks to more than {self.limit} bytes, the limit")


@dataclass(frozen=True)
class _Entry:
    """A zip entry whose name passed the checks, split into path components."""

    info: zipfile.ZipInfo
    parts: tuple[str, ...]
    keys: tuple[str, ...]  # the parts as a case- and normalisation-insensitive FS compares them
    is_dir: bool

    @property
    def name(self) -> str:
        return self.info.orig_filename


def sniff(path: str) -> str:
    """The format of a file from its first bytes.

    One of "macho", "fat", "gzip", "zip", "zstd", "zlib", "unknown".
    """
    return _sniff_head(bundle.read_small_file(path, SNIFF_BYTES))


def _sniff_head(head: bytes) -> str:
    if head.startswith(_ZIP_MAGICS):
        return "zip"
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head.startswith(_ZSTD_MAGIC):
        return "zstd"
    if len(head) >= 4 and _WORD.unpack_from(head)[0] in _THIN_MAGICS:
        return "macho"
    if len(head) >= 8 and _WORD.unpack_from(head)[0] in _FAT_MAGICS:
        # Java class files share CAFEBABE; their major version (45 and up) sits where a
        # universal header keeps its arch count, which is never above macho's bound.
        return "fat" if 0 < _WORD.unpack_from(head, 4)[0] <= macho.MAX_FAT_ARCHS else "unknown"
    return "zlib" if _is_zlib_header(head) else "unknown"


def _is_zlib_header(head: bytes) -> bool:
    """RFC 1950: deflate method, window up to 32 KiB, header checksum a multiple of 31."""
    if len(head) < 2:
        return False
    cmf, flg = head[0], head[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0


def unpack(
    path: str,
    dest: str,
    *,
    max_unpacked_bytes: int,
    max_entries: int = MAX_ENTRIES,
    allow_scripts: bool = False,
) -> Unpacked:
    """Turn the downloaded answer at `path` into files under `dest` and say what they are.

    `dest` is made when there is something to unpack: a Mach-O answer stays where it is,
    with no folder made and removed around it on every download."""
    kind = sniff(path)
    budget = _Budget(max_unpacked_bytes)
    if kind in _MACHO_KINDS:
        return Unpacked("macho", [path])
    os.makedirs(dest, exist_ok=True)
    if kind in ("gzip", "zlib"):
        return _unpack_stream(path, dest, kind, budget)
    if kind == "zip":
        return _unpack_zip(path, dest, budget, max_entries, allow_scripts)
    if kind == "zstd":
        raise ArchiveError(
            "zstd-compressed answers are not supported; configure the server to send gzip or zip"
        )
    raise ArchiveError("the answer is neither a Mach-O file nor a gzip or zip archive")


# --- gzip and zlib -------------------------------------------------------------------------


def _unpack_stream(path: str, dest: str, kind: str, budget: _Budget) -> Unpacked:
    name = _inflated_name(path)
    with open(path, "rb") as src, _open_folder(dest) as dest_fd:
        chunks = _gzip_chunks(src) if kind == "gzip" else _zlib_chunks(src)
        _write_new(dest_fd, name, chunks, budget)
    out = os.path.join(dest, name)
    if sniff(out) not in _MACHO_KINDS:
        raise ArchiveError(f"the {kind} stream does not hold a Mach-O file")
    return Unpacked("macho", [out])


def _inflated_name(path: str) -> str:
    base = os.path.basename(path)
    stem = base[: -len(".gz")] if base.endswith(".gz") else ""
    return stem if stem not in ("", ".", "..") else FALLBACK_NAME


def _gzip_chunks(src: BinaryIO) -> Iterator[bytes]:
    # GzipFile handles multi-member streams and checks each member's CRC and length;
    # a truncated stream raises EOFError. read(n) never inflates more than n bytes.
    with gzip.GzipFile(fileobj=src, mode="rb") as stream:
        yield from _read_chunks(stream.read, _GZIP_ERRORS, "the gzip stream")


def _zlib_chunks(src: BinaryIO) -> Iterator[bytes]:
    inflater = zlib.decompressobj()
    while not inflater.eof:
        data = inflater.unconsumed_tail or src.read(CHUNK_BYTES)
        try:
            out = inflater.decompress(data, CHUNK_BYTES)
        except zlib.error as exc:
            raise ArchiveError(f"the zlib stream is damaged: {exc}") from exc
        if out:
            yield out
        elif not data:
            raise ArchiveError("the zlib stream is truncated")


# --- zip -----------------------------------------------------------------------------------


def _unpack_zip(
    path: str, dest: str, budget: _Budget, max_entries: int, allow_scripts: bool
) -> Unpacked:
    with open(path, "rb") as src, _open_zip(src) as archive:
        size = os.fstat(src.fileno()).st_size
        entries = _checked_entries(archive.infolist(), size, dest, max_entries, budget.limit)
        # Folders are made as files need them: an empty one answers nothing.
        files = [e for e in entries if not e.is_dir and e.keys[0] != APPLEDOUBLE_FOLDER]
        scripts = [e for e in files if not allow_scripts and _is_script(e.keys)]
        kept = [e for e in files if allow_scripts or not _is_script(e.keys)]
        with _open_folder(dest) as dest_fd:
            for entry in kept:
                _extract(archive, entry, dest_fd, budget)
    return _zip_result(kept, dest, [e.name for e in scripts])


def _open_zip(src: BinaryIO) -> zipfile.ZipFile:
    import zipfile

    try:
        return zipfile.ZipFile(src)
    except _zip_errors() as exc:
        raise ArchiveError(f"the zip archive is unreadable: {exc}") from exc


def _checked_entries(
    infos: list[zipfile.ZipInfo], archive_size: int, dest: str, max_entries: int, limit: int
) -> list[_Entry]:
    """Every entry, checked before anything is extracted."""
    if len(infos) > max_entries:
        raise ArchiveError(
            f"the zip holds {len(infos)} entries, more than the {max_entries} allowed"
        )
    declared = sum(info.file_size for info in infos)
    if declared > limit:
        raise ArchiveError(
            f"the zip declares {declared} bytes of files, more than the {limit} limit"
        )
    real_dest = os.path.realpath(dest)
    entries = [_entry(info, archive_size, real_dest) for info in infos]
    _check_layout(entries)
    return entries


def _entry(info: zipfile.ZipInfo, archive_size: int, real_dest: str) -> _Entry:
    name = info.orig_filename  # zipfile's `filename` is cut at a NUL; check what was sent
    problem = _name_problem(name) or _data_problem(info, archive_size)
    if problem is not None:
        raise ArchiveError(f"zip entry {_quoted(name)} {problem}")
    raw = name.split("/")
    parts = tuple(p for p in raw if p not in ("", "."))
    target = os.path.realpath(os.path.join(real_dest, *parts))
    # The name checks keep the path inside; this catches a symlink already sitting in dest.
    if os.path.commonpath([real_dest, target]) != real_dest:
        raise ArchiveError(f"zip entry {_quoted(name)} points outside the unpack folder")
    return _Entry(info, parts, tuple(_fold(p) for p in parts), is_dir=raw[-1] in ("", "."))


def entry_problem(info: zipfile.ZipInfo, archive_size: int) -> str | None:
    """Why a zip entry may not be read or placed under a folder, if it may not: the checks
    unpack makes, for a reader that reads members in place (apple/products.py)."""
    return _name_problem(info.orig_filename) or _data_problem(info, archive_size)


def _name_problem(name: str) -> str | None:
    """Why a zip entry name could land outside the folder or fail to be created, if it could."""
    parts = name.split("/")
    if "\0" in name:
        return "has a NUL byte in its name"
    if _has_control_character(name):
        return "has a control character in its name"
    if "\\" in name:
        return "has a backslash in its name, a folder separator to Windows tools"
    if name.startswith("/"):
        return "has an absolute path"
    if _DRIVE.match(name):
        return "starts with a drive letter"
    if ".." in parts:
        return "climbs out of its folder with '..'"
    if all(p in ("", ".") for p in parts):
        return "has an empty name"
    if len(name.encode()) > MAX_PATH_BYTES or any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        return "has a name too long for the file system"
    return None


def _has_control_character(name: str) -> bool:
    """C0, DEL or C1: no Apple tool names a file so, and XML 1.0 cannot carry most of them,
    so neither the per-UUID plists nor the helper's answer could name the file; a newline
    would also split the xnu macros' line-wise read of the answer, and a log line."""
    return _CONTROL.search(name) is not None


def _data_problem(info: zipfile.ZipInfo, archive_size: int) -> str | None:
    """Why an entry's data cannot be read safely, if it cannot."""
    if info.header_offset < 0 or info.header_offset + info.compress_size > archive_size:
        # zipfile would seek there and raise OSError(EINVAL) or OverflowError.
        return "lies outside the archive"
    if info.flag_bits & _ENCRYPTED_FLAGS:
        return "is encrypted"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "is a symbolic link"
    if info.compress_type not in ZIP_METHODS:
        return f"uses compression method {info.compress_type}, not stored or deflate"
    return None


def _check_layout(entries: list[_Entry]) -> None:
    """No two entries may name one file, and no file may also be a folder, on APFS or elsewhere."""
    seen: set[tuple[str, ...]] = set()
    folders: set[tuple[str, ...]] = set()
    for entry in entries:
        if entry.keys in seen:
            raise ArchiveError(f"the zip holds {_quoted(entry.name)} twice")
        seen.add(entry.keys)
        folders.update(entry.keys[:i] for i in range(1, len(entry.keys)))
    for entry in entries:
        if not entry.is_dir and entry.keys in folders:
            raise ArchiveError(f"zip entry {_quoted(entry.name)} is both a file and a folder")


def _fold(part: str) -> str:
    # Canonical caseless matching (Unicode standard, section 3.13): names APFS treats as one.
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", part).casefold())


def _is_script(keys: tuple[str, ...]) -> bool:
    """Whether the entry is, or is under, some bundle's Contents/Resources/Python."""
    size = len(SCRIPTS_FOLDER)
    return any(
        key.endswith(".dsym") and keys[i + 1 : i + 1 + size] == SCRIPTS_FOLDER
        for i, key in enumerate(keys)
    )


def _extract(archive: zipfile.ZipFile, entry: _Entry, dest_fd: int, budget: _Budget) -> None:
    what = f"zip entry {_quoted(entry.name)}"
    with _make_folders(dest_fd, entry.parts[:-1]) as folder_fd:
        try:
            stream = archive.open(entry.info)
        except _zip_errors() as exc:
            raise ArchiveError(f"{what} is unreadable: {exc}") from exc
        with stream:
            chunks = _read_chunks(stream.read, _zip_errors(), what)
            _write_new(folder_fd, entry.parts[-1], chunks, budget)


def _zip_result(kept: list[_Entry], dest: str, scripts: list[str]) -> Unpacked:
    bundles = _bundle_paths(kept, dest)
    if bundles:
        return Unpacked("bundles", bundles, scripts)
    if len(kept) != 1:
        raise ArchiveError("the zip holds no dSYM bundle")
    only = os.path.join(dest, *kept[0].parts)
    if sniff(only) not in _MACHO_KINDS:
        raise ArchiveError(f"the zip's only file {_quoted(kept[0].name)} is not a Mach-O file")
    return Unpacked("file", [only], scripts)


def _bundle_paths(kept: list[_Entry], dest: str) -> list[str]:
    """The outermost .dSYM folder of each extracted file, when not too deep."""
    found: dict[tuple[str, ...], str] = {}
    for entry in kept:
        index = _bundle_index(entry.keys)
        if index is not None:
            found.setdefault(entry.keys[: index + 1], os.path.join(dest, *entry.parts[: index + 1]))
    return sorted(found.values())


def _bundle_index(keys: tuple[str, ...]) -> int | None:
    for index, key in enumerate(keys[:-1]):  # the last part is the file itself
        if key.endswith(".dsym"):
            return index if index <= MAX_BUNDLE_DEPTH else None
    return None


# --- writing -------------------------------------------------------------------------------


def _read_chunks(
    read: Callable[[int], bytes], errors: tuple[type[Exception], ...], what: str
) -> Iterator[bytes]:
    """Chunks from a decompressing reader; its format errors become ArchiveError.

    Only the read is guarded, so an OSError from writing (a full disk) stays an OSError
    even where the reader's own errors subclass OSError (gzip.BadGzipFile).
    """
    while True:
        try:
            chunk = read(CHUNK_BYTES)
        except errors as exc:
            raise ArchiveError(f"{what} is damaged or truncated: {exc}") from exc
        if not chunk:
            return
        yield chunk


def _write_new(folder_fd: int, name: str, chunks: Iterable[bytes], budget: _Budget) -> None:
    """Create `name` in the folder, never replacing or following anything; no half file stays."""
    fd = os.open(name, _CREATE_FLAGS, FILE_MODE, dir_fd=folder_fd)
    try:
        with open(fd, "wb") as out:
            for chunk in chunks:
                budget.spend(len(chunk))
                out.write(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder_fd)
        raise


@contextlib.contextmanager
def _open_folder(path: str) -> Iterator[int]:
    # dest itself may be reached through a symlink (/tmp -> /private/tmp on macOS).
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _make_folders(root_fd: int, parts: tuple[str, ...]) -> Iterator[int]:
    """The folder at `parts` under root, made as needed, walked by descriptor without following
    any symlink, so nothing swapped in during extraction can redirect a write."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, DIR_MODE, dir_fd=fd)
            fd, parent = os.open(part, _DIR_FLAGS, dir_fd=fd), fd
            os.close(parent)
        yield fd
    finally:
        os.close(fd)


def _quoted(name: str) -> str:
    """A name from an archive, shown on one line and at a readable length."""
    return repr(name if len(name) <= 80 else name[:80] + "...")
