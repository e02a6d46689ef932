"""Where a build ran: the compile directory and main file of a dSYM's first compile units.

`dsymfind publish` records a build's source root (vcs/provenance.py) from the DWARF's
DW_AT_comp_dir and DW_AT_name. An Xcode build compiles every file of a target below one
folder, so the first units tell; reading them all would cost a read of the whole
`__debug_info` of a dSYM that may be hundreds of megabytes. For at most MAX_UNITS units
this reader takes the unit header, the abbreviation of its first entry, that entry's
attributes and the strings they name: a few small reads, all within MAX_READ_BYTES.
Every offset is checked against its section. Forms are those of DWARF 2 to 5 (the DWARF 5
standard, section 7.5.6), little-endian as every Mach-O architecture in use.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import NamedTuple

from dsymfind.apple import macho
from dsymfind.errors import DsymfindError

# Units read at most: Xcode gives every unit of a target the same compile directory.
MAX_UNITS = 4
# One read holds a unit's header and its first entry: clang's is under 100 bytes.
UNIT_READ_BYTES = 1024
# A unit's abbreviation is near the start of its table: the first entry's is code 1.
ABBREV_READ_BYTES = 1024
# PATH_MAX on Linux; macOS's is 1024. A longer string names no folder anyone built in.
STRING_READ_BYTES = 4096
# All reads of one file together.
MAX_READ_BYTES = 64 * 1024

DWARF_SEGMENT = "__DWARF"
INFO, ABBREV, STR = "__debug_info", "__debug_abbrev", "__debug_str"
LINE_STR = "__debug_line_str"
STR_OFFSETS = "__debug_str_offs"  # __debug_str_offsets, cut to Mach-O's 16 characters

_COMPILE_UNIT_TAGS = frozenset({0x11, 0x3C, 0x4A})  # compile, partial, skeleton units
_AT_NAME, _AT_COMP_DIR, _AT_STR_OFFSETS_BASE = 0x03, 0x1B, 0x72
_FORM_INDIRECT, _FORM_IMPLICIT_CONST = 0x16, 0x21
_FIXED_SIZE = {
    **{0x05: 2, 0x06: 4, 0x07: 8, 0x0B: 1, 0x0C: 1, 0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8},
    **{0x19: 0, 0x1C: 4, 0x1E: 16, 0x20: 8, 0x21: 0, 0x24: 8},
    **{0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4},
}
_STRING_INDEX_SIZE = {0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4}  # strx1-4
_LEB = frozenset({0x0D, 0x0F, 0x15, 0x1B, 0x22, 0x23, 0x1F01})
_STRING_INDEX_LEB = frozenset({0x1A, 0x1F02})  # strx, GNU_str_index
_OFFSET_SIZED = frozenset({0x0E, 0x17, 0x1D, 0x1F, 0x1F20, 0x1F21})
_STRP, _LINE_STRP = 0x0E, 0x1F
_BLOCK_LENGTH = {0x0A: 1, 0x03: 2, 0x04: 4}  # block1, block2, block4
_BLOCK_LEB = frozenset({0x09, 0x18})  # block, exprloc
_INLINE_STRING, _ADDR, _REF_ADDR = 0x08, 0x01, 0x10


class DwarfError(DsymfindError):
    """The DWARF's first units cannot be read; the message says why."""


class Unit(NamedTuple):
    """A compile unit's DW_AT_name and DW_AT_comp_dir, as the compiler wrote them."""

    name: str | None
    comp_dir: str | None


def first_units(path: str, uuid: str | None = None) -> list[Unit]:
    """The first compile units of the DWARF file at `path` (of its slice carrying `uuid`,
    else of its first slice). DwarfError when the file has none that can be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise DwarfError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DwarfError(f"{path}: not a regular file")
        slices = macho.read_slices_of_open(fd, path)
        chosen = macho.slice_for_uuid(slices, uuid) if uuid is not None else slices[0]
        if chosen is None:
            raise DwarfError(f"{path}: no slice carries {uuid}")
        sections = macho.segment_sections(fd, chosen, DWARF_SEGMENT)
        return _Units(_Sections(fd, sections, path)).read()
    except macho.MachOError as exc:
        raise DwarfError(f"{path}: {exc}") from None
    finally:
        os.close(fd)


class _Short(Exception):
    """A read ended inside a value: the bytes at hand do not hold it."""


@dataclass(slots=True)
class _Cursor:
    """Little-endian values from bytes; _Short past their end."""

    data: bytes
    pos: int = 0

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise _Short
        chunk, self.pos = self.data[self.pos : end], end
        return chunk

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def uleb(self) -> int:
        value = shift = 0
        while True:
            byte = self.uint(1)
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value
            if shift > 63:
                raise _Short  # no offset or count of ours needs more than 64 bits

    def cstring(self) -> bytes:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise _Short
        text, self.pos = self.data[self.pos : end], end + 1
        return text


class _Sections:
    """Bounded reads inside the `__DWARF` sections of one open file."""

    def __init__(self, fd: int, ranges: dict[str, tuple[int, int]], path: str) -> None:
        self.fd, self.ranges, self.path = fd, ranges, path
        self.left = MAX_READ_BYTES

    def size(self, section: str) -> int:
        return self.ranges.get(section, (0, 0))[1]

    def read(self, section: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes at `offset` in `section`, fewer at its end."""
        start, size = self.ranges.get(section, (0, 0))
        if not 0 <= offset < size:
            raise DwarfError(f"{self.path}: offset {offset} is outside {section} ({size} bytes)")
        length = min(length, size - offset)
        self.left -= length
        if self.left < 0:
            raise DwarfError(f"{self.path}: needs more than {MAX_READ_BYTES} bytes of reads")
        try:
            return os.pread(self.fd, length, start + offset)
        except OSError as exc:
            raise DwarfError(f"{self.path}: cannot read: {exc.strerror or exc}") from None

    def string(self, section: str, offset: int) -> str:
        data = self.read(section, offset, STRING_READ_BYTES)
        end = data.find(b"\0")
        if end < 0:
            raise DwarfError(f"{self.path}: no string ends at {section} offset {offset}")
        return os.fsdecode(data[:end])


class _Header(NamedTuple):
    end: int  # where the next unit starts in __debug_info
    offset_size: int  # 4 in 32-bit DWARF, 8 in 64-bit DWARF
    addr_size: int
    version: int
    abbrev_offset: int


class _Units:
    def __init__(self, sections: _Sections) -> None:
        self.sections = sections

    def read(self) -> list[Unit]:
        units: list[Unit] = []
        offset = 0
        while len(units) < MAX_UNITS and offset < self.sections.size(INFO):
            try:
                data = _Cursor(self.sections.read(INFO, offset, UNIT_READ_BYTES))
                header = _header(data, offset)
                unit = self._first_entry(data, header)
            except (_Short, DwarfError) as exc:
                if units:
                    break  # the first units tell already: what was read stands
                why = str(exc) or f"the unit at {INFO} offset {offset} is cut short"
                raise DwarfError(why) from None
            if unit is not None:
                units.append(unit)
            offset = header.end
        if not units:
            raise DwarfError(f"{self.sections.path}: no compile unit in {INFO}")
        return units

    def _first_entry(self, data: _Cursor, header: _Header) -> Unit | None:
        tag, specs = self._abbreviation(header.abbrev_offset, data.uleb())
        if tag not in _COMPILE_UNIT_TAGS:
            return None
        values: dict[int, tuple[int, int | bytes]] = {}
        for attribute, form, implicit in specs:
            form, value = _value(data, form, header, implicit)
            if attribute in (_AT_NAME, _AT_COMP_DIR, _AT_STR_OFFSETS_BASE):
                values[attribute] = (form, value)
        # Without the attribute, the table's first entry follows its header (DWARF 5, 7.26).
        base = values.get(_AT_STR_OFFSETS_BASE, (0, 2 * header.offset_size))[1]
        if not isinstance(base, int):
            raise DwarfError(f"{self.sections.path}: DW_AT_str_offsets_base is no offset")
        return Unit(
            self._string(values.get(_AT_NAME), header, base),
            self._string(values.get(_AT_COMP_DIR), header, base),
        )

    def _abbreviation(self, offset: int, code: int) -> tuple[int, list[tuple[int, int, int]]]:
        """The tag and (attribute, form, implicit constant) list of abbreviation `code`."""
        data = _Cursor(self.sections.read(ABBREV, offset, ABBREV_READ_BYTES))
        while True:
            found = data.uleb()
            if found == 0:
                raise DwarfError(f"{self.sections.path}: no abbreviation {code} in its table")
            tag = data.uleb()
            data.uint(1)  # has children
            specs = []
            while True:
                attribute, form = data.uleb(), data.uleb()
                if attribute == 0 and form == 0:
                    break
                implicit = data.uleb() if form == _FORM_IMPLICIT_CONST else 0
                specs.append((attribute, form, implicit))
            if found == code:
                return tag, specs

    def _string(
        self, value: tuple[int, int | bytes] | None, header: _Header, base: int
    ) -> str | None:
        if value is None:
            return None
        form, raw = value
        if isinstance(raw, bytes):
            return os.fsdecode(raw)
        if form == _STRP:
            return self.sections.string(STR, raw)
        if form == _LINE_STRP:
            return self.sections.string(LINE_STR, raw)
        if form in _STRING_INDEX_SIZE or form in _STRING_INDEX_LEB:
            size = header.offset_size
            entry = self.sections.read(STR_OFFSETS, base + raw * size, size)
            if len(entry) < size:
                raise DwarfError(f"{self.sections.path}: string index {raw} is past its table")
            return self.sections.string(STR, int.from_bytes(entry, "little"))
        return None  # a name of a form no compiler writes for one


def _header(data: _Cursor, offset: int) -> _Header:
    """A unit header (DWARF 2 to 5), its cursor left on the first entry."""
    length, offset_size = data.uint(4), 4
    if length == 0xFFFFFFFF:
        length, offset_size = data.uint(8), 8
    elif length >= 0xFFFFFFF0:
        raise DwarfError(f"unit at {INFO} offset {offset} has a reserved length {length:#x}")
    end = offset + data.pos + length
    version = data.uint(2)
    if version >= 5:
        unit_type, addr_size = data.uint(1), data.uint(1)
        abbrev_offset = data.uint(offset_size)
        # Skeleton and split units carry a DWO id, type units a signature and an offset.
        data.take({4: 8, 5: 8, 2: 8 + offset_size, 6: 8 + offset_size}.get(unit_type, 0))
    elif version >= 2:
        abbrev_offset, addr_size = data.uint(offset_size), data.uint(1)
    else:
        raise DwarfError(f"unit at {INFO} offset {offset} has DWARF version {version}")
    if version > 5:
        raise DwarfError(f"unit at {INFO} offset {offset} has DWARF version {version}")
    return _Header(end, offset_size, addr_size, version, abbrev_offset)


# DW_FORM_indirect names the form in the data; a real producer uses it once, if ever.
_MAX_INDIRECTIONS = 4


def _value(data: _Cursor, form: int, header: _Header, implicit: int) -> tuple[int, int | bytes]:
    """The form (an indirect one resolved) and the value of one attribute: an integer
    (offsets, indexes, constants), the bytes of an inline string, else 0 once skipped."""
    for _ in range(_MAX_INDIRECTIONS):
        if form != _FORM_INDIRECT:
            break
        form = data.uleb()
    else:
        raise DwarfError(f"an attribute's form is indirect more than {_MAX_INDIRECTIONS} times")
    if form == _FORM_IMPLICIT_CONST:
        return form, implicit
    if form == _INLINE_STRING:
        return form, data.cstring()
    if form in _FIXED_SIZE:
        return form, data.uint(_FIXED_SIZE[form])
    if form in _STRING_INDEX_SIZE:
        return form, data.uint(_STRING_INDEX_SIZE[form])
    if form in _LEB or form in _STRING_INDEX_LEB:
        return form, data.uleb()  # an sdata's sign is of no interest here
    if form in _OFFSET_SIZED:
        return form, data.uint(header.offset_size)
    if form == _ADDR:
        return form, data.uint(header.addr_size)
    if form == _REF_ADDR:  # DWARF 2 sized it as an address
        return form, data.uint(header.addr_size if header.version == 2 else header.offset_size)
    if form in _BLOCK_LENGTH:
        data.take(data.uint(_BLOCK_LENGTH[form]))
        return form, 0
    if form in _BLOCK_LEB:
        data.take(data.uleb())
        return form, 0
    raise DwarfError(f"unknown attribute form {form:#x}")
