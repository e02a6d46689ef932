"""Read the identity of Mach-O files: per-architecture UUID, CPU and file type.

Only the headers and load commands are read, with os.pread in small bounded
pieces, never the segments: a 200 MB dSYM costs one 4 KiB read. macholib's
structure definitions and constants describe the layout; its MachO() loader is
not used because it reads every section, trusts header sizes (MemoryError,
OverflowError on crafted files) and blocks in open() on a FIFO.

Every header value is checked against the size of the file before it is used,
so any input either yields slices or raises MachOError, quickly. So is every range
the load commands name (segments, sections, symbol and linkedit tables): a file cut
short keeps its header and UUID, and only those ranges tell that its contents are gone.
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
from typing import Any, NamedTuple

from macholib import mach_o

from dsymfind.errors import DsymfindError
from dsymfind.uuids import dashed, normalize_uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO

# The first read: holds the universal header and arch table, and for nearly every
# slice the whole load-command region (typically 1-10 KiB).
HEAD_READ_BYTES = 4096
# Apple ships at most a handful of slices (e.g. armv7/armv7s/arm64/arm64e); 32 is ample
# and keeps a crafted arch table (10^9 entries) from costing work or memory.
MAX_FAT_ARCHS = 32
# Real sizeofcmds values are a few KiB, tens of KiB for huge apps; beyond this is a lie.
MAX_LOAD_COMMANDS_BYTES = 256 * 1024
# Budget for all reads of one file, bounding I/O and parse time of crafted universals.
MAX_TOTAL_READ_BYTES = 512 * 1024

# cpusubtype's top byte carries capability bits (CPU_SUBTYPE_LIB64, arm64e's ptrauth
# ABI version) that differ between an executable and its dSYM: not part of the arch.
# This is ~CPU_SUBTYPE_MASK of <mach/machine.h> (macholib's get_cpu_subtype keeps bits
# 24-27 and so misnames arm64e with a ptrauth version).
SUBTYPE_ARCH_BITS = 0x00FFFFFF

# CPU types, as in <mach/machine.h>; macholib only has them as CPU_TYPE_NAMES keys.
CPU_ARCH_ABI64 = 0x01000000
CPU_ARCH_ABI64_32 = 0x02000000  # 64-bit CPU running a 32-bit pointer ABI (arm64_32)
CPU_TYPE_X86 = 7
CPU_TYPE_X86_64 = CPU_TYPE_X86 | CPU_ARCH_ABI64
CPU_TYPE_ARM = 12
CPU_TYPE_ARM64 = CPU_TYPE_ARM | CPU_ARCH_ABI64
CPU_TYPE_ARM64_32 = CPU_TYPE_ARM | CPU_ARCH_ABI64_32
CPU_TYPE_POWERPC = 18
CPU_TYPE_POWERPC64 = CPU_TYPE_POWERPC | CPU_ARCH_ABI64

MH_KEXT_BUNDLE = 0xB  # in <mach-o/loader.h> but not in macholib

# Apple's arch names (as lipo, lldb and llvm-dwarfdump print them) by
# (cputype, masked cpusubtype).
_ARCH_NAMES = {
    (CPU_TYPE_X86, 3): "i386",
    (CPU_TYPE_X86_64, 3): "x86_64",
    (CPU_TYPE_X86_64, 8): "x86_64h",
    (CPU_TYPE_ARM, 0): "arm",
    (CPU_TYPE_ARM, 5): "armv4t",
    (CPU_TYPE_ARM, 6): "armv6",
    (CPU_TYPE_ARM, 7): "armv5",
    (CPU_TYPE_ARM, 8): "xscale",
    (CPU_TYPE_ARM, 9): "armv7",
    (CPU_TYPE_ARM, 10): "armv7f",
    (CPU_TYPE_ARM, 11): "armv7s",
    (CPU_TYPE_ARM, 12): "armv7k",
    (CPU_TYPE_ARM, 13): "armv8",
    (CPU_TYPE_ARM, 14): "armv6m",
    (CPU_TYPE_ARM, 15): "armv7m",
    (CPU_TYPE_ARM, 16): "armv7em",
    (CPU_TYPE_ARM64, 0): "arm64",
    (CPU_TYPE_ARM64, 1): "arm64v8",
    (CPU_TYPE_ARM64, 2): "arm64e",
    (CPU_TYPE_ARM64_32, 1): "arm64_32",
    (CPU_TYPE_POWERPC, 0): "ppc",
    (CPU_TYPE_POWERPC, 10): "ppc7400",
    (CPU_TYPE_POWERPC, 100): "ppc970",
    (CPU_TYPE_POWERPC64, 0): "ppc64",
}

_FILETYPE_NAMES = {
    mach_o.MH_OBJECT: "MH_OBJECT",
    mach_o.MH_EXECUTE: "MH_EXECUTE",
    mach_o.MH_FVMLIB: "MH_FVMLIB",
    mach_o.MH_CORE: "MH_CORE",
    mach_o.MH_PRELOAD: "MH_PRELOAD",
    mach_o.MH_DYLIB: "MH_DYLIB",
    mach_o.MH_DYLINKER: "MH_DYLINKER",
    mach_o.MH_BUNDLE: "MH_BUNDLE",
    mach_o.MH_DYLIB_STUB: "MH_DYLIB_STUB",
    mach_o.MH_DSYM: "MH_DSYM",
    MH_KEXT_BUNDLE: "MH_KEXT_BUNDLE",
    mach_o.MH_FILESET: "MH_FILESET",
}

# struct layouts taken from macholib's definitions, in each byte order.
_MAGIC_LE = struct.Struct("<I")
_MAGIC_BE = struct.Struct(">I")
_FAT_HEADER = struct.Struct(">" + mach_o.fat_header._format_)  # universal headers are big-endian
_FAT_ARCH = struct.Struct(">" + mach_o.fat_arch._format_)
_FAT_ARCH_64 = struct.Struct(">" + mach_o.fat_arch64._format_)
_MACH_HEADER = {
    (endian, is64): struct.Struct(endian + header._format_)
    for endian in "<>"
    for is64, header in ((False, mach_o.mach_header), (True, mach_o.mach_header_64))
}
_LARGEST_HEADER = mach_o.mach_header_64._size_
_LOAD_COMMAND = {endian: struct.Struct(endian + mach_o.load_command._format_) for endian in "<>"}
_UUID_COMMAND_SIZE = mach_o.load_command._size_ + mach_o.uuid_command._size_  # 24

# The magic read as a little-endian integer -> (byte order of the file, 64-bit?).
_THIN_MAGICS = {
    mach_o.MH_MAGIC: ("<", False),
    mach_o.MH_MAGIC_64: ("<", True),
    mach_o.MH_CIGAM: (">", False),
    mach_o.MH_CIGAM_64: (">", True),
}

# The first four bytes of any thin or universal Mach-O file, as they lie on disk: a walker
# tells a candidate from the other files of a folder before parsing anything.
MAGIC_BYTES = frozenset(
    [_MAGIC_LE.pack(magic) for magic in _THIN_MAGICS]
    + [_MAGIC_BE.pack(magic) for magic in (mach_o.FAT_MAGIC, mach_o.FAT_MAGIC_64)]
)


class MachOError(DsymfindError):
    """The file is not a readable, well-formed Mach-O file; the message names it."""


class Slice(NamedTuple):
    """The identity of one architecture of a Mach-O file (the whole file when thin)."""

    uuid: str | None  # uppercase dashed, None when the slice has no LC_UUID
    arch: str
    cputype: int
    cpusubtype: int  # raw, capability bits included
    filetype: int
    filetype_name: str
    offset: int  # of the slice in the file, 0 when thin
    size: int


class _Malformed(Exception):
    """Internal: what is wrong, without the file name; read_slices* adds it."""


def arch_name(cputype: int, cpusubtype: int) -> str:
    """Apple's name for a CPU, ignoring capability bits; "cputype:<n>/<sub>" if unknown."""
    subtype = cpusubtype & SUBTYPE_ARCH_BITS
    return _ARCH_NAMES.get((cputype, subtype), f"cputype:{cputype}/{subtype}")


def filetype_name(filetype: int) -> str:
    """The MH_* constant's name for a Mach-O file type."""
    return _FILETYPE_NAMES.get(filetype, f"MH_UNKNOWN({filetype})")


# --- bounded input ---------------------------------------------------------------


class _Reader:
    """Random access to a file or buffer that refuses to read past its end or budget."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.bytes_read = 0
        self._head = b""

    def _fetch(self, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def read_head(self) -> bytes:
        """The file's first HEAD_READ_BYTES, kept so that a thin slice is not re-read."""
        self._head = self.read(0, min(HEAD_READ_BYTES, self.size), "the file header")
        return self._head

    def peek(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes at `offset` from the first read, without any I/O."""
        return self._head[offset : offset + length]

    def read(self, offset: int, length: int, what: str) -> bytes:
        """Exactly `length` bytes at `offset`, else _Malformed naming `what`."""
        end = offset + length
        if end > self.size:
            raise _Malformed(
                f"{what} ends at byte {end}, past the end of the file ({self.size} bytes)"
            )
        cached = self._head[offset:end]
        start = offset + len(cached)
        if start == end:
            return cached
        self.bytes_read += end - start
        if self.bytes_read > MAX_TOTAL_READ_BYTES:
            raise _Malformed(f"headers exceed the {MAX_TOTAL_READ_BYTES}-byte read limit")
        data = self._fetch(start, end - start)
        if len(data) != end - start:
            raise _Malformed(f"file ended early while reading {what} (truncated or changing)")
        return cached + data


class _FileReader(_Reader):
    def __init__(self, fd: int, size: int) -> None:
        super().__init__(size)
        self._fd = fd

    def _fetch(self, offset: int, length: int) -> bytes:
        # pread may return short counts; loop until done or end of file.
        pieces = []
        while length > 0:
            piece = os.pread(self._fd, length, offset)
            if not piece:
                break
            pieces.append(piece)
            offset += len(piece)
            length -= len(piece)
        return b"".join(pieces)


class _BytesReader(_Reader):
    def __init__(self, data: bytes, size: int) -> None:
        super().__init__(size)
        self._data = memoryview(data)  # no copy of a large download

    def _fetch(self, offset: int, length: int) -> bytes:
        # Shorter than asked when `data` is only a prefix of the file: reported as truncation.
        return bytes(self._data[offset : offset + length])


class _StreamReader(_Reader):
    """A seekable stream, such as a zip member read in place (zipfile decompresses up to
    the offset asked: never more than the member's own bytes)."""

    def __init__(self, stream: IO[bytes], size: int) -> None:
        super().__init__(size)
        self._stream = stream

    def _fetch(self, offset: int, length: int) -> bytes:
        self._stream.seek(offset)
        return self._stream.read(length)


# --- parsing ---------------------------------------------------------------------


def _parse(reader: _Reader) -> list[Slice]:
    if reader.size == 0:
        raise _Malformed("empty file, not a Mach-O file")
    if reader.size < _MAGIC_LE.size:
        raise _Malformed(f"not a Mach-O file (only {reader.size} bytes)")
    head = reader.read_head()
    (magic,) = _MAGIC_BE.unpack_from(head)
    if magic in (mach_o.FAT_MAGIC, mach_o.FAT_MAGIC_64):
        return _parse_fat(reader, head, is64=magic == mach_o.FAT_MAGIC_64)
    if magic in (mach_o.FAT_CIGAM, mach_o.FAT_CIGAM_64):
        raise _Malformed("little-endian universal header, which no Apple tool writes")
    return [_parse_thin(reader, 0, reader.size)]


def _parse_fat(reader: _Reader, head: bytes, is64: bool) -> list[Slice]:
    if len(head) < _FAT_HEADER.size:
        raise _Malformed(f"truncated universal header ({len(head)} bytes)")
    _, count = _FAT_HEADER.unpack_from(head)
    if count == 0:
        raise _Malformed("universal header lists no architectures")
    if count > MAX_FAT_ARCHS:
        # FAT_MAGIC is also the magic of Java class files, whose version reads as a count.
        java = "" if is64 else " (or this is a Java class file)"
        raise _Malformed(
            f"universal header lists {count} architectures, more than the {MAX_FAT_ARCHS} "
            f"any real file has{java}"
        )
    entry = _FAT_ARCH_64 if is64 else _FAT_ARCH
    table_end = _FAT_HEADER.size + count * entry.size
    table = reader.read(_FAT_HEADER.size, count * entry.size, "the universal arch table")
    arches = [entry.unpack_from(table, i * entry.size)[:4] for i in range(count)]
    _check_fat_layout(arches, table_end, reader.size)
    return [_parse_fat_slice(reader, index, *arch) for index, arch in enumerate(arches)]


def _slice_label(index: int, cputype: int, cpusubtype: int) -> str:
    return f"slice {index} ({arch_name(cputype, cpusubtype)})"


def _check_fat_layout(
    arches: list[tuple[int, int, int, int]], table_end: int, file_size: int
) -> None:
    """Each slice lies after the arch table, inside the file, and apart from the others."""
    spans = []
    for index, (cputype, cpusubtype, offset, size) in enumerate(arches):
        label = _slice_label(index, cputype, cpusubtype)
        if offset < table_end:
            raise _Malformed(f"{label} at offset {offset} overlaps the universal header")
        if size < mach_o.mach_header._size_:
            raise _Malformed(f"{label} is {size} bytes, too small for a Mach-O header")
        if offset + size > file_size:
            raise _Malformed(
                f"{label} at offset {offset} with size {size} extends past the end "
                f"of the file ({file_size} bytes)"
            )
        spans.append((offset, offset + size, label))
    spans.sort()
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise _Malformed(f"{first} and {second} overlap")


def _parse_fat_slice(
    reader: _Reader, index: int, cputype: int, cpusubtype: int, offset: int, size: int
) -> Slice:
    label = _slice_label(index, cputype, cpusubtype)
    try:
        found = _parse_thin(reader, offset, size)
    except _Malformed as exc:
        raise _Malformed(f"{label} at offset {offset}: {exc}") from None
    if found.cputype != cputype:
        # A universal header that disagrees with its slice is corrupt: trusting
        # either could pair a binary with the wrong dSYM.
        raise _Malformed(f"{label}: the slice's own Mach-O header says {found.arch}")
    return found


def _parse_thin(reader: _Reader, base: int, size: int) -> Slice:
    """The Mach-O header at `base` and the load commands after it, inside `size` bytes."""
    wanted = min(HEAD_READ_BYTES, size)
    # A slice whose header lies in the first read (thin files, a dSYM's first slice
    # at offset 64) is parsed from it; its load commands are completed as needed.
    chunk = reader.peek(base, wanted)
    if len(chunk) < min(wanted, _LARGEST_HEADER):
        chunk = reader.read(base, wanted, "the Mach-O header")
    if len(chunk) < _MAGIC_LE.size:
        raise _Malformed(f"not a Mach-O file (only {len(chunk)} bytes)")
    (magic,) = _MAGIC_LE.unpack_from(chunk)
    kind = _THIN_MAGICS.get(magic)
    if kind is None:
        raise _Malformed(f"not a Mach-O file (starts with {chunk[:4].hex(' ')})")
    endian = kind[0]
    header = _MACH_HEADER[kind]
    if len(chunk) < header.size:
        raise _Malformed(f"truncated Mach-O header ({len(chunk)} of {header.size} bytes)")
    _, cputype, cpusubtype, filetype, ncmds, sizeofcmds = header.unpack_from(chunk)[:6]
    commands = _load_commands(reader, base, size, chunk, header.size, sizeofcmds)
    walked = _walk_commands(commands, ncmds, _LOAD_COMMAND[endian])
    uuid = _find_uuid(commands, walked)
    extent = _extent(size, "file" if size == reader.size else "slice", filetype, kind)
    _check_extent(commands, walked, extent)
    return Slice(
        uuid=uuid,
        arch=arch_name(cputype, cpusubtype),
        cputype=cputype,
        cpusubtype=cpusubtype,
        filetype=filetype,
        filetype_name=filetype_name(filetype),
        offset=base,
        size=size,
    )


def _load_commands(
    reader: _Reader, base: int, size: int, chunk: bytes, header_size: int, sizeofcmds: int
) -> bytes:
    """The sizeofcmds bytes after the header: from `chunk` when there, else read the rest."""
    if sizeofcmds > MAX_LOAD_COMMANDS_BYTES:
        raise _Malformed(
            f"sizeofcmds is {sizeofcmds} bytes, more than the {MAX_LOAD_COMMANDS_BYTES} "
            "a real file needs"
        )
    end = header_size + sizeofcmds
    if end > size:
        raise _Malformed(
            f"load commands end at byte {end}, past the end of the Mach-O ({size} bytes)"
        )
    if end <= len(chunk):
        return chunk[header_size:end]
    rest = reader.read(base + len(chunk), end - len(chunk), "the load commands")
    return chunk[header_size:] + rest


# (index, cmd, position in the load-command bytes, cmdsize) of each load command.
_Walked = list[tuple[int, int, int, int]]


def _walk_commands(commands: bytes, ncmds: int, load_command: struct.Struct) -> _Walked:
    """All ncmds load commands, each cmdsize checked to lie inside sizeofcmds."""
    if ncmds > len(commands) // load_command.size:
        raise _Malformed(f"ncmds is {ncmds}, more than fit in sizeofcmds ({len(commands)} bytes)")
    walked = []
    position = 0
    for index in range(ncmds):
        if position + load_command.size > len(commands):
            raise _Malformed(
                f"ncmds is {ncmds}, but sizeofcmds ({len(commands)} bytes) ends "
                f"after {index} load commands"
            )
        cmd, cmdsize = load_command.unpack_from(commands, position)
        if cmdsize < load_command.size or cmdsize > len(commands) - position:
            raise _Malformed(
                f"load command {index} (cmd {cmd:#x}) has cmdsize {cmdsize}, which does not "
                f"fit between offset {position} and sizeofcmds ({len(commands)})"
            )
        walked.append((index, cmd, position, cmdsize))
        position += cmdsize
    return walked


def _find_uuid(commands: bytes, walked: _Walked) -> str | None:
    """The LC_UUID's value; a second LC_UUID makes the file ambiguous."""
    uuid = None
    for index, cmd, position, cmdsize in walked:
        if cmd == mach_o.LC_UUID:
            if uuid is not None:
                raise _Malformed(f"load command {index} is a second LC_UUID")
            uuid = _uuid_of(commands, position, cmdsize, index)
    return uuid


def _uuid_of(commands: bytes, position: int, cmdsize: int, index: int) -> str:
    if cmdsize < _UUID_COMMAND_SIZE:
        raise _Malformed(
            f"load command {index} (LC_UUID) has cmdsize {cmdsize}, less than {_UUID_COMMAND_SIZE}"
        )
    start = position + mach_o.load_command._size_
    return dashed(commands[start : start + mach_o.uuid_command._size_].hex().upper())


# --- structure: every file range the load commands name lies inside the slice -----
#
# A file cut short (a download that stopped, a copy interrupted) keeps its header and
# UUID; only the ranges its load commands name show that the bytes behind them are gone.
# The checks are a subset of those of LLVM's Mach-O parser (llvm-dwarfdump then says
# "truncated or malformed object"), so no file LLVM's tools accept is refused: empty
# ranges are not checked (nothing is read there), nor commands LLVM does not check.

# Section types whose contents take no bytes in the file.
_ZEROFILL_TYPES = frozenset(
    {mach_o.S_ZEROFILL, mach_o.S_GB_ZEROFILL, mach_o.S_THREAD_LOCAL_ZEROFILL}
)
_RELOCATION_SIZE = 8  # struct relocation_info
LC_SEGMENT_SPLIT_INFO = 0x1E  # in <mach-o/loader.h> but not in macholib

_SEGMENT_COMMANDS = {
    mach_o.LC_SEGMENT: ("LC_SEGMENT", mach_o.segment_command, mach_o.section),
    mach_o.LC_SEGMENT_64: ("LC_SEGMENT_64", mach_o.segment_command_64, mach_o.section_64),
}

# A file range one command names: (what, offset field, count field, bytes per counted
# element in 32-bit files, in 64-bit files), fields counted after cmd and cmdsize.
_Range = tuple[str, int, int, int, int]
_LINKEDIT_DATA: tuple[_Range, ...] = (("data", 0, 1, 1, 1),)
_DYLD_INFO: tuple[_Range, ...] = (
    ("rebase info", 0, 1, 1, 1),
    ("bind info", 2, 3, 1, 1),
    ("weak bind info", 4, 5, 1, 1),
    ("lazy bind info", 6, 7, 1, 1),
    ("export info", 8, 9, 1, 1),
)
_TABLES: dict[int, tuple[str, type[mach_o.Structure], tuple[_Range, ...]]] = {
    mach_o.LC_SYMTAB: (
        "LC_SYMTAB",
        mach_o.symtab_command,
        (
            ("symbol table", 0, 1, mach_o.nlist._size_, mach_o.nlist_64._size_),
            ("string table", 2, 3, 1, 1),
        ),
    ),
    mach_o.LC_DYSYMTAB: (
        "LC_DYSYMTAB",
        mach_o.dysymtab_command,
        (
            ("table of contents", 6, 7, 8, 8),
            ("module table", 8, 9, 52, 56),  # struct dylib_module, dylib_module_64
            ("external reference table", 10, 11, 4, 4),
            ("indirect symbol table", 12, 13, 4, 4),
            ("external relocations", 14, 15, _RELOCATION_SIZE, _RELOCATION_SIZE),
            ("local relocations", 16, 17, _RELOCATION_SIZE, _RELOCATION_SIZE),
        ),
    ),
    mach_o.LC_DYLD_INFO: ("LC_DYLD_INFO", mach_o.dyld_info_command, _DYLD_INFO),
    mach_o.LC_DYLD_INFO_ONLY: ("LC_DYLD_INFO_ONLY", mach_o.dyld_info_command, _DYLD_INFO),
    **{
        cmd: (name, mach_o.linkedit_data_command, _LINKEDIT_DATA)
        for cmd, name in (
            (mach_o.LC_CODE_SIGNATURE, "LC_CODE_SIGNATURE"),
            (LC_SEGMENT_SPLIT_INFO, "LC_SEGMENT_SPLIT_INFO"),
            (mach_o.LC_FUNCTION_STARTS, "LC_FUNCTION_STARTS"),
            (mach_o.LC_DATA_IN_CODE, "LC_DATA_IN_CODE"),
            (mach_o.LC_DYLIB_CODE_SIGN_DRS, "LC_DYLIB_CODE_SIGN_DRS"),
            (mach_o.LC_LINKER_OPTIMIZATION_HINT, "LC_LINKER_OPTIMIZATION_HINT"),
        )
    },
}
_STRUCTS = {
    (endian, structure): struct.Struct(endian + structure._format_)
    for endian in "<>"
    for structure in (
        *(s for _, segment, section in _SEGMENT_COMMANDS.values() for s in (segment, section)),
        *(structure for _, structure, _ in _TABLES.values()),
    )
}


def _only(structure: type[mach_o.Structure], endian: str, wanted: tuple[str, ...]) -> struct.Struct:
    """`structure`'s layout unpacking only the `wanted` fields, the others skipped as padding:
    a section's or segment's names become bytes objects only when a message needs them."""
    codes, count = [], ""
    for char in structure._format_:
        if char.isdigit():
            count += char
        else:
            codes.append(count + char)
            count = ""
    names = [field[0] for field in structure._fields_]
    assert set(wanted) <= set(names)
    layout = "".join(
        c if n in wanted else f"{struct.calcsize('<' + c)}x"
        for n, c in zip(names, codes, strict=True)
    )
    return struct.Struct(endian + layout)


# The fields the checks read, in this order.
_SEGMENT_CHECKED = ("fileoff", "filesize", "nsects")
_SECTION_CHECKED = ("size", "offset", "reloff", "nreloc", "flags")

# Per byte order and segment command: its name, the full segment and section layouts
# (for messages), and the lean ones the checks unpack.
_SEGMENT_LAYOUTS = {
    endian: {
        cmd: (
            name,
            _STRUCTS[endian, segment],
            _STRUCTS[endian, section],
            _only(segment, endian, _SEGMENT_CHECKED),
            _only(section, endian, _SECTION_CHECKED),
        )
        for cmd, (name, segment, section) in _SEGMENT_COMMANDS.items()
    }
    for endian in "<>"
}


class _Extent(NamedTuple):
    """One slice's size and form, against which the ranges its load commands name are checked."""

    size: int
    noun: str  # "file" when thin, else "slice"
    filetype: int
    endian: str
    is64: bool
    # Whether a section that is not zerofill has its contents in this file.
    contents_here: bool

    def holds(self, offset: int, length: int) -> bool:
        return not length or offset + length <= self.size

    def refusal(self, offset: int, length: int, what: str) -> _Malformed:
        # Named only once refused: formatting every section's name would triple the cost.
        return _Malformed(
            f"truncated or malformed: {what} ends at byte {offset + length}, "
            f"past the {self.noun}'s {self.size} bytes"
        )


def _extent(size: int, noun: str, filetype: int, kind: tuple[str, bool]) -> _Extent:
    endian, is64 = kind
    return _Extent(size, noun, filetype, endian, is64, _holds_section_contents(filetype))


def _check_extent(commands: bytes, walked: _Walked, extent: _Extent) -> None:
    """Every segment, section and table the load commands name lies inside the slice."""
    segments = _SEGMENT_LAYOUTS[extent.endian]
    for command in walked:
        layouts = segments.get(command[1])
        if layouts is not None:
            _check_segment(commands, command, extent, layouts)
        elif command[1] in _TABLES:
            _check_tables(commands, command, extent)


def _fields(
    commands: bytes, command: tuple[int, int, int, int], name: str, layout: struct.Struct
) -> tuple[Any, ...]:
    """A load command's fields after cmd and cmdsize, once cmdsize is known to hold them."""
    _require_cmdsize(command, name, layout)
    return layout.unpack_from(commands, command[2] + mach_o.load_command._size_)


def _require_cmdsize(command: tuple[int, int, int, int], name: str, layout: struct.Struct) -> int:
    """The bytes a load command needs for `layout` after cmd and cmdsize; refused when its
    cmdsize is smaller."""
    index, _, _, cmdsize = command
    needed: int = mach_o.load_command._size_ + layout.size
    if cmdsize < needed:
        raise _Malformed(f"load command {index} ({name}) has cmdsize {cmdsize}, less than {needed}")
    return needed


def _check_tables(commands: bytes, command: tuple[int, int, int, int], extent: _Extent) -> None:
    name, structure, ranges = _TABLES[command[1]]
    fields = _fields(commands, command, name, _STRUCTS[extent.endian, structure])
    for what, offset_field, count_field, size32, size64 in ranges:
        offset = fields[offset_field]
        length = fields[count_field] * (size64 if extent.is64 else size32)
        if not extent.holds(offset, length):
            raise extent.refusal(offset, length, f"{name}'s {what} (load command {command[0]})")


def _check_segment(
    commands: bytes,
    command: tuple[int, int, int, int],
    extent: _Extent,
    layouts: tuple[str, struct.Struct, struct.Struct, struct.Struct, struct.Struct],
) -> None:
    index, _, position, cmdsize = command
    name, layout, sections, checked, sections_checked = layouts
    needed = _require_cmdsize(command, name, layout)
    fileoff, filesize, nsects = checked.unpack_from(commands, position + mach_o.load_command._size_)
    # A segment at offset 0 (an image's __TEXT) maps the header and load commands: every
    # linked image has segments and tables behind it (__LINKEDIT comes last), where a cut
    # shows, so it is not checked, and a bare header with its load commands still reads.
    if fileoff != 0 and not extent.holds(fileoff, filesize):
        segname = layout.unpack_from(commands, position + mach_o.load_command._size_)[0]
        what = f"segment {_name(segname)} (load command {index})"
        raise extent.refusal(fileoff, filesize, what)
    if not nsects:
        return
    first = position + needed
    if nsects > (position + cmdsize - first) // sections.size:
        raise _Malformed(
            f"load command {index} ({name}) has {nsects} sections, more than fit in "
            f"its cmdsize ({cmdsize})"
        )
    table = commands[first : first + nsects * sections.size]
    refused = _refused_section(sections_checked.iter_unpack(table), extent)
    if refused is not None:
        number, offset, length, what = refused
        sectname, owner = sections.unpack_from(table, number * sections.size)[:2]
        label = _section_label(sectname, owner, index)
        raise extent.refusal(offset, length, what.format(label))


def _refused_section(
    sections: Iterator[tuple[int, int, int, int, int]], extent: _Extent
) -> tuple[int, int, int, str] | None:
    """The first section whose contents (where it has some in this file) or relocations
    do not lie inside the slice: its number, the range, and what it is ({} for the
    section's name); None when all do. One loop over the unpacked table, the limits in
    locals: a dSYM has dozens of sections, and `dsymfind index` reads thousands of dSYMs."""
    limit = extent.size
    contents_here = extent.contents_here
    for number, (size, offset, reloff, nreloc, flags) in enumerate(sections):
        if (
            contents_here
            and size
            and offset + size > limit
            and (flags & mach_o.SECTION_TYPE) not in _ZEROFILL_TYPES
        ):
            return number, offset, size, "{}"
        if nreloc and reloff + nreloc * _RELOCATION_SIZE > limit:
            return number, reloff, nreloc * _RELOCATION_SIZE, "the relocations of {}"
    return None


def _section_label(sectname: bytes, segname: bytes, index: int) -> str:
    return f"section {_name(segname)},{_name(sectname)} (load command {index})"


def _holds_section_contents(filetype: int) -> bool:
    """Whether the offset and size of a section that is not zerofill (those have none,
    _refused_section) name bytes of a file of `filetype`, as LLVM judges it.

    A dSYM keeps its executable's sections for their
    addresses: dsymutil gives those it did not copy offset 0 and their full size, also
    in a __TEXT that has a filesize for the __eh_frame it did copy. The DWARF sections
    lie in the __DWARF segment, which is checked. Stub dylibs' sections are empty too.
    """
    return filetype not in (mach_o.MH_DSYM, mach_o.MH_DYLIB_STUB)


def _name(raw: bytes) -> str:
    """A segment or section name for a message: printable, and on one line."""
    text = raw.split(b"\0", 1)[0].decode("latin-1")
    return text if text and text.isascii() and text.isprintable() else repr(text)


# --- public entry points ---------------------------------------------------------


def _describe_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((text for test, text in kinds if test(mode)), "not a regular file")


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise _Malformed(f"{_describe_kind(mode)}, not a Mach-O file")


def _read_file(path: str, *, listed: bool = False) -> tuple[list[Slice], os.stat_result]:
    """The slices, with the stat of the file they were read from (fstat of the open file).

    `listed`: the caller has just listed `path` as a regular file (its directory entry's
    type), and that listing stands for the stat before the open."""
    # stat first so that devices and FIFOs are never even opened (opening some
    # devices has side effects); the fstat after open is what counts against races.
    if not listed:
        _require_regular(os.stat(path).st_mode)
    # O_NONBLOCK: should a FIFO be swapped in after the stat, open() must not block.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if listed:
        # The listing said a regular file, not a symlink: one swapped in since (to a
        # device, say) is refused by open() itself instead of being followed.
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        _require_regular(info.st_mode)
        return _parse(_FileReader(fd, info.st_size)), info
    finally:
        os.close(fd)


def read_slices(path: str | os.PathLike[str]) -> list[Slice]:
    """The slices of the Mach-O file at `path`: one if thin, else in arch-table order.

    Raises MachOError, naming the path, for anything that is not a well-formed
    Mach-O or universal file, or cannot be read.
    """
    return read_slices_with_stat(path)[0]


def read_slices_with_stat(
    path: str | os.PathLike[str], *, listed: bool = False
) -> tuple[list[Slice], os.stat_result]:
    """read_slices, with the stat of the file read (fstat of the descriptor the slices were
    read through: it describes the very bytes they come from).

    `listed`: the caller has just listed `path` as a regular file (os.scandir's entry type
    says so, without following a symlink), and that listing stands for the stat before the
    open. `dsymfind index` reads thousands of files so.
    """
    name = os.fspath(path)
    if "\0" in name:  # os.stat would raise ValueError, not OSError
        raise MachOError(f"{name!r}: a path cannot contain a NUL byte")
    try:
        return _read_file(name, listed=listed)
    except _Malformed as exc:
        raise MachOError(f"{os.fsdecode(path)}: {exc}") from None
    except OSError as exc:
        raise MachOError(f"{os.fsdecode(path)}: cannot read: {exc.strerror or exc}") from None


def read_slices_of_open(fd: int, name: str) -> list[Slice]:
    """read_slices through a descriptor the caller holds open (and goes on reading from);
    `name` names the file in errors."""
    try:
        info = os.fstat(fd)
        _require_regular(info.st_mode)
        return _parse(_FileReader(fd, info.st_size))
    except _Malformed as exc:
        raise MachOError(f"{name}: {exc}") from None
    except OSError as exc:
        raise MachOError(f"{name}: cannot read: {exc.strerror or exc}") from None


def read_slices_from_bytes(data: bytes, *, file_size: int | None = None) -> list[Slice]:
    """The slices of a Mach-O file held in memory, with read_slices' checks and limits.

    `data` is the whole file, or a prefix of it when `file_size` gives the whole
    file's size: slice bounds are then checked against `file_size`, and headers
    that lie beyond the prefix raise MachOError as truncated.
    """
    size = len(data) if file_size is None else file_size
    if size < len(data):
        raise MachOError(f"<memory>: file_size {size} is smaller than the {len(data)} bytes given")
    try:
        return _parse(_BytesReader(data, size))
    except _Malformed as exc:
        raise MachOError(f"<memory>: {exc}") from None


def read_slices_of_stream(stream: IO[bytes], size: int, name: str) -> list[Slice]:
    """read_slices of a seekable stream of `size` bytes (a zip member); `name` names it in
    errors."""
    try:
        return _parse(_StreamReader(stream, size))
    except _Malformed as exc:
        raise MachOError(f"{name}: {exc}") from None
    except OSError as exc:
        raise MachOError(f"{name}: cannot read: {exc.strerror or exc}") from None


def stream_segment_sections(
    stream: IO[bytes], size: int, piece: Slice, segment: str
) -> dict[str, tuple[int, int]]:
    """segment_sections of a seekable stream of `size` bytes."""
    try:
        return _segment_sections(_StreamReader(stream, size), piece, segment.encode())
    except _Malformed as exc:
        raise MachOError(f"{piece.arch} slice: {exc}") from None
    except OSError as exc:
        raise MachOError(f"cannot read: {exc.strerror or exc}") from None


def segment_sections(fd: int, piece: Slice, segment: str) -> dict[str, tuple[int, int]]:
    """The sections of one segment of a slice of the file open at `fd`: each name with its
    (file offset, size), the slice's own offset included. apple/dwarf.py finds `__DWARF`'s
    so. The header and load commands are read again within read_slices' bounds, and each
    section must lie inside the slice; MachOError otherwise.
    """
    try:
        reader = _FileReader(fd, os.fstat(fd).st_size)
        return _segment_sections(reader, piece, segment.encode())
    except _Malformed as exc:
        raise MachOError(f"{piece.arch} slice: {exc}") from None
    except OSError as exc:
        raise MachOError(f"cannot read: {exc.strerror or exc}") from None


def _segment_sections(reader: _Reader, piece: Slice, segname: bytes) -> dict[str, tuple[int, int]]:
    chunk = reader.read(piece.offset, min(HEAD_READ_BYTES, piece.size), "the Mach-O header")
    kind = _THIN_MAGICS.get(_MAGIC_LE.unpack_from(chunk)[0]) if len(chunk) >= 4 else None
    if kind is None or len(chunk) < _MACH_HEADER[kind].size:
        raise _Malformed("not a Mach-O slice")
    header = _MACH_HEADER[kind]
    ncmds, sizeofcmds = header.unpack_from(chunk)[4:6]
    commands = _load_commands(reader, piece.offset, piece.size, chunk, header.size, sizeofcmds)
    found: dict[str, tuple[int, int]] = {}
    for command in _walk_commands(commands, ncmds, _LOAD_COMMAND[kind[0]]):
        if command[1] in _SEGMENT_COMMANDS:
            found.update(_sections_named(commands, command, kind, segname, piece))
    return found


def _sections_named(
    commands: bytes,
    command: tuple[int, int, int, int],
    kind: tuple[str, bool],
    segname: bytes,
    piece: Slice,
) -> dict[str, tuple[int, int]]:
    """The sections of one segment command that name `segname` as theirs (an object file
    keeps every section in one unnamed segment, each section naming its own)."""
    index, cmd, position, cmdsize = command
    name, segment, section = _SEGMENT_COMMANDS[cmd]
    layout = _STRUCTS[kind[0], segment]
    nsects = _fields(commands, command, name, layout)[7]
    sections = _STRUCTS[kind[0], section]
    first = position + mach_o.load_command._size_ + layout.size
    if nsects > (position + cmdsize - first) // sections.size:
        raise _Malformed(f"load command {index} ({name}) has more sections than fit in it")
    found = {}
    for number in range(nsects):
        fields = sections.unpack_from(commands, first + number * sections.size)
        sectname, owner, _, size, offset = fields[:5]
        if owner.split(b"\0", 1)[0] != segname:
            continue
        if offset + size > piece.size:
            raise _Malformed(f"{_section_label(sectname, segname, index)} ends past the slice")
        found[_name(sectname)] = (piece.offset + offset, size)
    return found


def slice_for_uuid(slices: list[Slice], uuid: str) -> Slice | None:
    """The slice whose UUID is `uuid` (any case, dashes optional), or None."""
    wanted = normalize_uuid(uuid)
    if wanted is None:
        return None
    return next((candidate for candidate in slices if candidate.uuid == wanted), None)


def segment_vmaddr(path: str, piece: Slice, segment: str) -> int | None:
    """The address a slice's segment named `segment` is linked at (`__TEXT`'s is where
    a report's image offsets are measured from); None when it has no such segment."""
    wanted = segment.encode()
    try:
        with open(path, "rb") as stream:
            reader = _FileReader(stream.fileno(), os.fstat(stream.fileno()).st_size)
            chunk = reader.read(piece.offset, min(HEAD_READ_BYTES, piece.size), "the header")
            kind = _THIN_MAGICS.get(_MAGIC_LE.unpack_from(chunk)[0]) if len(chunk) >= 4 else None
            if kind is None or len(chunk) < _MACH_HEADER[kind].size:
                raise _Malformed("not a Mach-O slice")
            header = _MACH_HEADER[kind]
            ncmds, sizeofcmds = header.unpack_from(chunk)[4:6]
            commands = _load_commands(
                reader, piece.offset, piece.size, chunk, header.size, sizeofcmds
            )
            for command in _walk_commands(commands, ncmds, _LOAD_COMMAND[kind[0]]):
                if command[1] in _SEGMENT_COMMANDS:
                    name, layout = (
                        _SEGMENT_COMMANDS[command[1]][0],
                        _STRUCTS[kind[0], _SEGMENT_COMMANDS[command[1]][1]],
                    )
                    segname, vmaddr = _fields(commands, command, name, layout)[:2]
                    if segname.split(b"\0", 1)[0] == wanted:
                        return int(vmaddr)
    except _Malformed as exc:
        raise MachOError(f"{path}: {piece.arch} slice: {exc}") from None
    except OSError as exc:
        raise MachOError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return None
