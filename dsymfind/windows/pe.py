"""Read the debug identity of a PE file (.exe, .dll): what names its PDB in a symbol store.

Four steps (docs/symbol-stores.md), each failure a status of its own: open read-only and bounded;
validate the DOS header, `e_lfanew`, the PE signature, the COFF header and the optional
header (PE32 and PE32+); map the debug directory's RVA to a file offset through the
section table (headers included) and walk its entries; pick CodeView and read the RSDS
record (GUID, age, PDB name). Only the header region, the debug directory and the
CodeView record are read, with os.pread; every range is checked by subtraction
(`length <= size - offset`), never by an `offset + length` that a crafted value could
push past the file. Any input either yields a PEIdentity or raises PEError.
"""

from __future__ import annotations

import enum
import os
import struct
import uuid
from dataclasses import dataclass
from typing import NoReturn

from dsymfind.errors import DsymfindError
from dsymfind.windows.bounded_read import BoundedFile, fits, open_regular

# The DOS header is 64 bytes; e_lfanew, the PE header's file offset, sits at 0x3C.
DOS_HEADER_SIZE = 64
E_LFANEW_OFFSET = 0x3C
DOS_SIGNATURE = b"MZ"
PE_SIGNATURE = b"PE\0\0"
COFF_HEADER_SIZE = 20
SECTION_HEADER_SIZE = 40
DEBUG_ENTRY_SIZE = 28
IMAGE_DIRECTORY_ENTRY_DEBUG = 6
IMAGE_DEBUG_TYPE_CODEVIEW = 2
PE32_MAGIC = 0x10B
PE32_PLUS_MAGIC = 0x20B
# Where each optional header keeps SizeOfImage, SizeOfHeaders, NumberOfRvaAndSizes and its
# data directories (PE/COFF specification, "Optional Header Windows-Specific Fields").
_OPTIONAL_FIELDS = {
    PE32_MAGIC: struct.Struct("<56xII28xI"),  # up to NumberOfRvaAndSizes at 92
    PE32_PLUS_MAGIC: struct.Struct("<56xII44xI"),  # up to NumberOfRvaAndSizes at 108
}
_DATA_DIRECTORIES_AT = {PE32_MAGIC: 96, PE32_PLUS_MAGIC: 112}
# The Windows loader refuses images with more sections than this (PE/COFF specification).
MAX_SECTIONS = 96
# Linkers write a handful of debug entries (CodeView, POGO, REPRO, VC features...);
# a directory larger than this is not one a linker made.
MAX_DEBUG_ENTRIES = 64
# A PDB path longer than this is not a path anyone can open; the name is cut there.
MAX_PDB_NAME_BYTES = 4096
RSDS_HEADER_SIZE = 24  # "RSDS", GUID (16), age (4)
# A portable (.NET) PDB's CodeView entry carries these versions (Portable PDB v1.0
# specification, "CodeView Debug Directory Entry"); its RSDS age is always 1 and the PDB's
# stamp is the entry's TimeDateStamp.
PORTABLE_MAJOR_VERSION = 0x0100
PORTABLE_MINOR_VERSION = 0x504D
# SSQP files a portable PDB under its GUID and this where a Windows PDB's age goes.
PORTABLE_AGE_FIELD = "FFFFFFFF"
NB10_HEADER_SIZE = 16  # "NB10", offset (4), signature (4), age (4)

_DOS_LFANEW = struct.Struct("<i")
_COFF = struct.Struct("<HHIIIHH")
_DATA_DIRECTORY = struct.Struct("<II")
_SECTION = struct.Struct("<8xIIII")  # VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData
_DEBUG_ENTRY = struct.Struct("<IIHHIIII")
_RSDS = struct.Struct("<4s16sI")
_NB10 = struct.Struct("<4sIII")

# Machine values (PE/COFF specification) by the names Microsoft's tools print.
MACHINE_NAMES = {
    0x014C: "x86",
    0x8664: "x64",
    0xAA64: "ARM64",
    0xA641: "ARM64EC",
    0xA64E: "ARM64X",
    0x01C0: "ARM",
    0x01C4: "ARMNT",
    0x0200: "IA64",
}


class Status(enum.Enum):
    """Why a PE file yields no PDB identity; each failure of the four steps has its own."""

    UNREADABLE = "unreadable"
    NOT_PE = "not_pe"
    TRUNCATED_HEADER = "truncated_header"
    BAD_HEADER = "bad_header"
    NO_DEBUG_DIRECTORY = "no_debug_directory"
    BAD_DEBUG_DIRECTORY = "bad_debug_directory"
    DEBUG_DIRECTORY_OUTSIDE_FILE = "debug_directory_outside_file"
    NO_CODEVIEW = "no_codeview"
    NB10 = "nb10"
    NOT_RSDS = "not_rsds"
    RSDS_OUT_OF_BOUNDS = "rsds_out_of_bounds"


class PEError(DsymfindError):
    """The file has no usable PE debug identity; `status` says which step failed."""

    def __init__(self, path: str, status: Status, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.status = status


@dataclass(frozen=True)
class CodeView:
    """An RSDS record: the identity of the PDB that describes the image."""

    guid: uuid.UUID  # as Windows prints it: the first three fields little-endian on disk
    age: int
    pdb_path: str  # as recorded: often a build machine's path, or just a file name
    # For a portable PDB, the stamp of its PDB id (the entry's TimeDateStamp); else None.
    portable_stamp: int | None = None

    @property
    def pdb_name(self) -> str:
        """The file name part of the recorded path, whichever separator the build used."""
        return self.pdb_path.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        if self.portable_stamp is not None:
            return portable_store_key(self.guid)
        return store_key(self.guid, self.age)


def store_key(guid: uuid.UUID, age: int) -> str:
    """A PDB's symbol-store folder name: GUID in uppercase hex without dashes, age in hex."""
    return f"{guid.hex.upper()}{age:X}"


def braced(guid: uuid.UUID) -> str:
    """A GUID as Windows tools print it: {6B1E2C5A-0D3F-...}."""
    return "{" + str(guid).upper() + "}"


def portable_store_key(guid: uuid.UUID) -> str:
    """A portable PDB's symbol-store folder name: the GUID, then FFFFFFFF (no age)."""
    return f"{guid.hex.upper()}{PORTABLE_AGE_FIELD}"


@dataclass(frozen=True)
class PEIdentity:
    path: str
    machine: int
    timestamp: int
    size_of_image: int
    pe32_plus: bool
    # The CodeView record, or why there is none (debug_status is None exactly when found).
    codeview: CodeView | None
    debug_status: Status | None
    debug_detail: str

    @property
    def machine_name(self) -> str:
        return MACHINE_NAMES.get(self.machine, f"0x{self.machine:04X}")

    @property
    def format_name(self) -> str:
        return "PE32+" if self.pe32_plus else "PE32"

    @property
    def pe_key(self) -> str:
        """The image's own store key: TimeDateStamp (8 hex digits) + SizeOfImage (hex)."""
        return f"{self.timestamp:08X}{self.size_of_image:X}"

    def require_codeview(self) -> CodeView:
        """The RSDS record, or the PEError that says why the image has none."""
        if self.codeview is None:
            assert self.debug_status is not None
            raise PEError(self.path, self.debug_status, self.debug_detail)
        return self.codeview


def identity_of_open(fd: int, path: str) -> PEIdentity:
    """read_identity through a descriptor the caller holds open; `path` names it in errors."""
    try:
        return _Reader(path, BoundedFile(fd, os.fstat(fd).st_size)).identity()
    except OSError as exc:
        raise PEError(path, Status.UNREADABLE, f"cannot read ({exc.strerror or exc})") from exc


def read_identity(path: str) -> PEIdentity:
    """The identity of the PE file at `path`; raises PEError when the headers are unusable.

    A valid image without a usable CodeView record is still an identity (its own store
    key is known); `codeview` is then None and `debug_status` says why.
    """
    try:
        with open_regular(path) as file:
            return _Reader(path, file).identity()
    except OSError as exc:
        raise PEError(path, Status.UNREADABLE, f"cannot read ({exc.strerror or exc})") from exc


@dataclass(frozen=True)
class _Section:
    virtual_address: int
    raw_size: int
    raw_pointer: int


class _Reader:
    def __init__(self, path: str, file: BoundedFile) -> None:
        self.path = path
        self.file = file

    def _fail(self, status: Status, detail: str) -> NoReturn:
        raise PEError(self.path, status, detail)

    def _read(self, offset: int, length: int, status: Status, what: str) -> bytes:
        data = self.file.read(offset, length)
        if data is None:
            self._fail(status, f"{what} lies outside the file")
        return data

    def identity(self) -> PEIdentity:
        lfanew = self._dos_header()
        machine, sections_count, timestamp, optional_size = self._coff_header(lfanew)
        optional_at = lfanew + len(PE_SIGNATURE) + COFF_HEADER_SIZE
        optional = self._read(
            optional_at, optional_size, Status.TRUNCATED_HEADER, "the optional header"
        )
        magic, size_of_image, size_of_headers, directory = self._optional_header(optional)
        sections = self._sections(optional_at + optional_size, sections_count)
        found: CodeView | _NoCodeView
        try:
            found = self._codeview(directory, sections, size_of_headers)
        except _NoCodeView as why:
            found = why
        return PEIdentity(
            path=self.path,
            machine=machine,
            timestamp=timestamp,
            size_of_image=size_of_image,
            pe32_plus=magic == PE32_PLUS_MAGIC,
            codeview=found if isinstance(found, CodeView) else None,
            debug_status=None if isinstance(found, CodeView) else found.status,
            debug_detail="" if isinstance(found, CodeView) else found.detail,
        )

    def _dos_header(self) -> int:
        head = self._read(
            0, min(len(DOS_SIGNATURE), self.file.size), Status.NOT_PE, "the DOS header"
        )
        if head != DOS_SIGNATURE:
            self._fail(Status.NOT_PE, "not a PE file (no MZ signature)")
        dos = self._read(0, DOS_HEADER_SIZE, Status.TRUNCATED_HEADER, "the DOS header")
        (lfanew,) = _DOS_LFANEW.unpack_from(dos, E_LFANEW_OFFSET)
        if lfanew < 0:
            self._fail(Status.NOT_PE, f"not a PE file (e_lfanew {lfanew} is negative)")
        return int(lfanew)

    def _coff_header(self, lfanew: int) -> tuple[int, int, int, int]:
        length = len(PE_SIGNATURE) + COFF_HEADER_SIZE
        header = self._read(lfanew, length, Status.TRUNCATED_HEADER, "the PE header")
        if header[:4] != PE_SIGNATURE:
            self._fail(Status.NOT_PE, "not a PE file (no PE signature at e_lfanew)")
        machine, count, timestamp, _, _, optional_size, _ = _COFF.unpack_from(header, 4)
        if count > MAX_SECTIONS:
            self._fail(Status.BAD_HEADER, f"{count} sections, more than Windows loads")
        return machine, count, timestamp, optional_size

    def _optional_header(self, optional: bytes) -> tuple[int, int, int, tuple[int, int] | None]:
        """(magic, SizeOfImage, SizeOfHeaders, debug directory (RVA, size) or None)."""
        if len(optional) < 2:
            self._fail(Status.BAD_HEADER, "the optional header is missing")
        (magic,) = struct.unpack_from("<H", optional)
        fields = _OPTIONAL_FIELDS.get(magic)
        if fields is None:
            self._fail(Status.BAD_HEADER, f"unknown optional header magic 0x{magic:X}")
        if len(optional) < fields.size:
            self._fail(Status.BAD_HEADER, f"optional header of {len(optional)} bytes is too small")
        size_of_image, size_of_headers, directories = fields.unpack_from(optional)
        directories_at = _DATA_DIRECTORIES_AT[magic]
        if directories > (len(optional) - directories_at) // _DATA_DIRECTORY.size:
            self._fail(Status.BAD_HEADER, f"{directories} data directories overflow the header")
        if directories <= IMAGE_DIRECTORY_ENTRY_DEBUG:
            return magic, size_of_image, size_of_headers, None
        at = directories_at + IMAGE_DIRECTORY_ENTRY_DEBUG * _DATA_DIRECTORY.size
        rva, size = _DATA_DIRECTORY.unpack_from(optional, at)
        debug = (rva, size) if rva and size else None
        return magic, size_of_image, size_of_headers, debug

    def _sections(self, offset: int, count: int) -> list[_Section]:
        table = self._read(
            offset, count * SECTION_HEADER_SIZE, Status.TRUNCATED_HEADER, "the section table"
        )
        sections = []
        for at in range(0, len(table), SECTION_HEADER_SIZE):
            _, address, raw_size, raw_pointer = _SECTION.unpack_from(table, at)
            sections.append(_Section(address, raw_size, raw_pointer))
        return sections

    def _codeview(
        self, directory: tuple[int, int] | None, sections: list[_Section], size_of_headers: int
    ) -> CodeView:
        if directory is None:
            raise _NoCodeView(Status.NO_DEBUG_DIRECTORY, "no debug directory")
        rva, size = directory
        if size % DEBUG_ENTRY_SIZE:
            raise _NoCodeView(
                Status.BAD_DEBUG_DIRECTORY,
                f"debug directory of {size} bytes is not a whole number of entries",
            )
        if size // DEBUG_ENTRY_SIZE > MAX_DEBUG_ENTRIES:
            raise _NoCodeView(
                Status.BAD_DEBUG_DIRECTORY, f"debug directory of {size} bytes is implausibly large"
            )
        offset = self._file_offset(rva, size, sections, size_of_headers)
        if offset is None or not fits(offset, size, self.file.size):
            raise _NoCodeView(
                Status.DEBUG_DIRECTORY_OUTSIDE_FILE,
                f"debug directory (RVA 0x{rva:X}, {size} bytes) lies outside the file",
            )
        entries = self._read(offset, size, Status.DEBUG_DIRECTORY_OUTSIDE_FILE, "the directory")
        for at in range(0, size, DEBUG_ENTRY_SIZE):
            _, stamp, major, minor, kind, data_size, _, pointer = _DEBUG_ENTRY.unpack_from(
                entries, at
            )
            if kind == IMAGE_DEBUG_TYPE_CODEVIEW:
                portable = (major, minor) == (PORTABLE_MAJOR_VERSION, PORTABLE_MINOR_VERSION)
                return self._rsds(pointer, data_size, stamp if portable else None)
        raise _NoCodeView(Status.NO_CODEVIEW, "no CodeView entry in the debug directory")

    @staticmethod
    def _file_offset(
        rva: int, length: int, sections: list[_Section], size_of_headers: int
    ) -> int | None:
        """The file offset of [rva, rva + length), when one section's raw data holds it all."""
        if fits(rva, length, size_of_headers):
            return rva  # the headers region maps one to one
        for section in sections:
            if rva < section.virtual_address:
                continue
            delta = rva - section.virtual_address
            if fits(delta, length, section.raw_size):
                return section.raw_pointer + delta
        return None

    def _rsds(self, pointer: int, data_size: int, portable_stamp: int | None) -> CodeView:
        if data_size < len(b"RSDS") or not fits(pointer, data_size, self.file.size):
            raise _NoCodeView(
                Status.RSDS_OUT_OF_BOUNDS,
                f"CodeView record (offset 0x{pointer:X}, {data_size} bytes) lies outside the file",
            )
        wanted = min(data_size, RSDS_HEADER_SIZE + MAX_PDB_NAME_BYTES)
        record = self._read(pointer, wanted, Status.RSDS_OUT_OF_BOUNDS, "the CodeView record")
        signature = record[:4]
        if signature == b"NB10" and len(record) >= NB10_HEADER_SIZE:
            _, _, nb10_signature, age = _NB10.unpack_from(record)
            raise _NoCodeView(
                Status.NB10,
                f"PDB 2.0 (NB10) debug record, signature {nb10_signature:08X} age {age}: "
                "only RSDS (PDB 7.0) is supported",
            )
        if signature != b"RSDS":
            raise _NoCodeView(Status.NOT_RSDS, f"CodeView record signature {signature!r}, not RSDS")
        if len(record) < RSDS_HEADER_SIZE:
            raise _NoCodeView(
                Status.RSDS_OUT_OF_BOUNDS,
                f"RSDS record of {data_size} bytes is shorter than {RSDS_HEADER_SIZE}",
            )
        _, guid, age = _RSDS.unpack_from(record)
        name = record[RSDS_HEADER_SIZE:].split(b"\0", 1)[0]  # NUL-terminated, or the entry's end
        return CodeView(
            uuid.UUID(bytes_le=guid), age, name.decode("utf-8", "replace"), portable_stamp
        )


class _NoCodeView(Exception):
    """A valid image whose debug data names no PDB 7.0; kept in PEIdentity, not raised."""

    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
