"""Read the identity of a PDB 7.0 file: GUID and age, as a symbol store files it.

A PDB is an MSF container: a superblock, fixed-size blocks, and a stream directory
that lists each stream's size and blocks. The identity lives in stream 1 (the PDB
info stream: version, signature, age, GUID); stream 3 (DBI) carries its own age.
Only the superblock, the block map, the few directory entries needed and the first
bytes of streams 1 and 3 are read, with os.pread, so a 2 GB PDB costs a few small
reads. Every value from the file is checked against the file's size before use:
any input either yields a PdbIdentity or raises PdbError.

A PDB matches a PE when its GUID and its DBI age equal the PE's RSDS record
(docs/symbol-stores.md, "GUID and age"; which age is decided below, at
PdbIdentity.matching_age). Stores file it under the PE's own GUID and age (DbgHelp's
convention), which the match makes equal.
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from dsymfind.errors import DsymfindError
from dsymfind.windows import portable_pdb
from dsymfind.windows.bounded_read import BoundedFile, open_regular
from dsymfind.windows.pe import CodeView, braced, store_key
from dsymfind.windows.portable_pdb import PortablePdbIdentity

MSF7_MAGIC = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"
# What PDB 7.0, the refused 2.0 and a portable PDB start with: enough to tell a PDB from other
# files; read_identity names which it is.
_SIGNATURE_STARTS = (b"Microsoft C/C++ ", portable_pdb.METADATA_SIGNATURE)
SIGNATURE_BYTES = max(map(len, _SIGNATURE_STARTS))
PDB2_MAGIC = b"Microsoft C/C++ program database 2.00\r\n\x1aJG\0\0"
# BlockSize, FreeBlockMapBlock, NumBlocks, NumDirectoryBytes, Unknown, BlockMapAddr.
_SUPERBLOCK = struct.Struct(f"<{len(MSF7_MAGIC)}sIIIIII")
# Linkers write 4 KiB blocks; MSF allows 512 to 4096, and newer linkers go up to
# 32 KiB (/pdbpagesize) for PDBs over 4 GB.
BLOCK_SIZES = frozenset({512, 1024, 2048, 4096, 8192, 16384, 32768})
NIL_STREAM_SIZE = 0xFFFFFFFF  # a deleted stream: no blocks
PDB_INFO_STREAM = 1
DBI_STREAM = 3
# Version, Signature, Age, GUID: the start of the PDB info stream.
_INFO_HEADER = struct.Struct("<III16s")
# VersionSignature (-1 in every DBI stream since VC 4.1), VersionHeader, Age.
_DBI_HEADER = struct.Struct("<iII")
DBI_VERSION_SIGNATURE = -1
# PdbStreamVersion VC70: the first version with a GUID; every MSF 7.0 PDB has it or later.
PDB_VERSION_VC70 = 20000404
_U32 = struct.Struct("<I")


def looks_like_pdb(head: bytes) -> bool:
    """Whether a file's first SIGNATURE_BYTES say it is a PDB of some kind."""
    return head.startswith(_SIGNATURE_STARTS)


class PdbError(DsymfindError):
    """Not a readable PDB 7.0 file; the message names the file and what is wrong."""


@dataclass(frozen=True)
class PdbIdentity:
    path: str
    version: int
    signature: int
    guid: uuid.UUID
    age: int  # the PDB info stream's (source indexing may have bumped it)
    dbi_age: int | None  # None when the PDB has no DBI stream

    @property
    def matching_age(self) -> int:
        """The age the PE's RSDS record must equal: the DBI stream's, else the info stream's.

        A PDB has two ages, equal when the linker writes it. Source indexing (pdbstr.exe)
        rewrites the PDB and bumps only the info stream's age, so the DBI age is the one
        that stays equal to the image's. Evidence: LLVM commit cb9a7c22ee67 (D152189,
        "[LLDB][PDB] Fix age field in UUID in PDB file") shows WinDbg/DbgHelp calling a
        PDB "mismatched pdb" when only its DBI age is changed, and lldb switched to the
        DBI age; getsentry/symbolic's PdbObject::debug_id prefers the DBI age and falls
        back to the info stream's when there is no DBI stream; symchk reports
        "PdbDbiAge". So a PDB whose info age alone matches is refused, as DbgHelp does.
        """
        return self.age if self.dbi_age is None else self.dbi_age

    @property
    def key(self) -> str:
        """The symbol-store folder name of the image this PDB matches."""
        return store_key(self.guid, self.matching_age)

    def mismatch(self, wanted: CodeView) -> str | None:
        """None when this PDB is the one `wanted` names; else precisely how it differs."""
        if wanted.portable_stamp is not None:
            return "a Windows PDB, but the image names a portable PDB"
        problems = []
        if self.guid != wanted.guid:
            problems.append(f"GUID {braced(self.guid)}, not {braced(wanted.guid)}")
        if self.matching_age != wanted.age:
            problems.append(self._age_problem(wanted.age))
        return "; ".join(problems) or None

    def _age_problem(self, wanted: int) -> str:
        if self.dbi_age is None or self.dbi_age == self.age:
            return f"age {self.matching_age}, not {wanted}"
        return f"DBI age {self.dbi_age}, not {wanted} (its info stream says age {self.age})"


def identity_of_open(fd: int, path: str) -> PdbIdentity | PortablePdbIdentity:
    """read_identity through a descriptor the caller holds open; `path` names it in errors."""
    try:
        return _identity(path, BoundedFile(fd, os.fstat(fd).st_size))
    except OSError as exc:
        raise PdbError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def read_identity(path: str) -> PdbIdentity | PortablePdbIdentity:
    """The identity of the PDB (Windows or portable) at `path`; raises PdbError otherwise."""
    try:
        with open_regular(path) as file:
            return _identity(path, file)
    except OSError as exc:
        raise PdbError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def _identity(path: str, file: BoundedFile) -> PdbIdentity | PortablePdbIdentity:
    signature = portable_pdb.METADATA_SIGNATURE
    if file.read(0, len(signature)) == signature:
        return _portable_identity(path, file)
    return _Reader(path, file).identity()


def _portable_identity(path: str, file: BoundedFile) -> PortablePdbIdentity:
    try:
        return portable_pdb.read_identity(path, file)
    except portable_pdb.PortablePdbError as exc:
        raise PdbError(f"{path}: portable PDB: {exc}") from None


class _Reader:
    def __init__(self, path: str, file: BoundedFile) -> None:
        self.path = path
        self.file = file
        self.size = file.size
        # From the superblock, once _load_directory has checked them.
        self.block_size = 0
        self.blocks = 0
        self.directory: list[int] = []
        self.directory_bytes = 0
        self.streams = 0

    def _fail(self, detail: str) -> NoReturn:
        raise PdbError(f"{self.path}: {detail}")

    def _pread(self, offset: int, length: int, what: str) -> bytes:
        data = self.file.read(offset, length)
        if data is None:
            self._fail(f"{what} lies outside the file (truncated?)")
        return data

    def identity(self) -> PdbIdentity:
        self._load_directory()
        sizes = self._stream_sizes()
        info = self._stream_start(sizes, PDB_INFO_STREAM, _INFO_HEADER.size)
        if info is None:
            self._fail("no PDB info stream")
        version, signature, age, guid = _INFO_HEADER.unpack(info)
        if version < PDB_VERSION_VC70:
            self._fail(f"PDB info stream version {version} predates GUIDs (VC70)")
        dbi = self._stream_start(sizes, DBI_STREAM, _DBI_HEADER.size)
        return PdbIdentity(
            self.path, version, signature, uuid.UUID(bytes_le=guid), age, self._dbi_age(dbi)
        )

    def _load_directory(self) -> None:
        head = self._pread(0, min(len(PDB2_MAGIC), self.size), "the superblock")
        if head == PDB2_MAGIC:
            self._fail("a PDB 2.0 (JG) file: only PDB 7.0 (MSF 7.00) is supported")
        if not head.startswith(MSF7_MAGIC):
            self._fail("not a PDB 7.0 file (no MSF 7.00 signature)")
        superblock = self._pread(0, _SUPERBLOCK.size, "the superblock")
        _, block_size, _, blocks, directory_bytes, _, block_map = _SUPERBLOCK.unpack(superblock)
        if block_size not in BLOCK_SIZES:
            self._fail(f"block size {block_size} is not one MSF uses")
        if blocks > self.size // block_size:
            self._fail(f"{blocks} blocks declared, the file holds {self.size // block_size}")
        self.block_size, self.blocks = block_size, blocks
        if directory_bytes < 4:
            self._fail("the stream directory is empty")
        count = -(-directory_bytes // block_size)
        if count * _U32.size > block_size:
            self._fail(f"a stream directory of {directory_bytes} bytes is too large")
        raw = self._pread(self._block_offset(block_map), count * _U32.size, "the block map")
        self.directory = [self._checked_block(b) for (b,) in _U32.iter_unpack(raw)]
        self.directory_bytes = directory_bytes
        (streams,) = _U32.unpack(self._directory_read(0, 4))
        if streams > (directory_bytes - 4) // 4:
            self._fail(f"the stream directory claims {streams} streams, more than it holds")
        self.streams = streams

    def _block_offset(self, block: int) -> int:
        return self._checked_block(block) * self.block_size

    def _checked_block(self, block: int) -> int:
        if block >= self.blocks:
            self._fail(f"block {block} is past the last block ({self.blocks - 1})")
        return block

    def _read(self, blocks: Sequence[int], size: int, offset: int, length: int, what: str) -> bytes:
        """`length` bytes at `offset` of a stream made of `blocks` and `size` bytes long."""
        if not 0 <= offset <= size or length > size - offset:
            self._fail(f"{what} is shorter than its contents claim")
        out = bytearray()
        while length:
            index, within = divmod(offset, self.block_size)
            if index >= len(blocks):
                self._fail(f"{what} has fewer blocks than its size needs")
            take = min(length, self.block_size - within)
            out += self._pread(self._block_offset(blocks[index]) + within, take, what)
            offset, length = offset + take, length - take
        return bytes(out)

    def _directory_read(self, offset: int, length: int) -> bytes:
        return self._read(self.directory, self.directory_bytes, offset, length, "the directory")

    def _stream_sizes(self) -> list[int]:
        """The sizes of streams 0..DBI_STREAM (those that exist); nil streams are empty."""
        raw = self._directory_read(4, 4 * min(self.streams, DBI_STREAM + 1))
        return [0 if s == NIL_STREAM_SIZE else s for (s,) in _U32.iter_unpack(raw)]

    def _stream_start(self, sizes: list[int], stream: int, length: int) -> bytes | None:
        """The first `length` bytes of a stream; None when it is missing or shorter."""
        if stream >= len(sizes) or sizes[stream] < length:
            return None
        # Block lists follow all the sizes, in stream order.
        preceding = sum(-(-s // self.block_size) for s in sizes[:stream])
        at = 4 + 4 * self.streams + 4 * preceding
        raw = self._directory_read(at, 4 * -(-length // self.block_size))
        blocks = [b for (b,) in _U32.iter_unpack(raw)]
        return self._read(blocks, sizes[stream], 0, length, f"stream {stream}")

    def _dbi_age(self, header: bytes | None) -> int | None:
        if header is None:
            return None
        signature, _, age = _DBI_HEADER.unpack(header)
        if signature != DBI_VERSION_SIGNATURE:
            self._fail("the DBI stream header is damaged")
        return int(age)
