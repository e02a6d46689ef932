"""Unpack the one file of a Microsoft cabinet: the compressed `.pd_` form of a symbol store.

A symbol store may keep `crash.pd_` instead of `crash.pdb`: a CAB (MS-CAB format)
holding that one file. This reads CFHEADER, CFFOLDER, CFFILE and the CFDATA blocks
of stored (uncompressed), MSZIP and LZX cabinets: gcab and makecab's defaults write
the first two, symstore's compressed files are LZX. MSZIP is raw deflate per block of
at most 32 KiB, each block prefixed "CK", with the previous block's output as the
dictionary; LZX is one stream over the folder, a 32 KiB frame per block (lzx.py).
Quantum cabinets are refused by name.

The cabinet is data from the network: every offset and count is checked against
the file's size by subtraction, each block's checksum is verified when present,
memory stays at one block, and the output, with what is decoded before it, is capped.
Any input either yields the file or raises CabError (OSError only for real I/O
failures, such as a full disk).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable
from typing import BinaryIO, NoReturn

from dsymfind.errors import DsymfindError
from dsymfind.windows import lzx
from dsymfind.windows.bounded_read import BoundedFile, open_regular

SIGNATURE = b"MSCF"
_HEADER = struct.Struct("<4sIIIIIBBHHHHH")  # CFHEADER's fixed part (36 bytes)
_RESERVE = struct.Struct("<HBB")  # cbCFHeader, cbCFFolder, cbCFData
_FOLDER = struct.Struct("<IHH")  # coffCabStart, cCFData, typeCompress
_FILE = struct.Struct("<IIHHHH")  # cbFile, uoffFolderStart, iFolder, date, time, attribs
_DATA = struct.Struct("<IHH")  # csum, cbData, cbUncomp
FLAG_PREV_CABINET = 0x1
FLAG_NEXT_CABINET = 0x2
FLAG_RESERVE_PRESENT = 0x4
COMPRESSION_MASK = 0x000F
LZX_WINDOW_SHIFT, LZX_WINDOW_MASK = 8, 0x1F  # MS-CAB: an LZX folder's window bits
COMPRESSION_NONE, COMPRESSION_MSZIP, COMPRESSION_QUANTUM, COMPRESSION_LZX = 0, 1, 2, 3
MSZIP_SIGNATURE = b"CK"
# MS-CAB: a CFDATA block never expands to more than 32 KiB.
MAX_BLOCK_OUTPUT = 0x8000
# MS-CAB: names are at most 256 bytes, plus the NUL.
MAX_NAME_BYTES = 257
# A CFFOLDER's per-folder reserve is at most 255 bytes; a store's CAB has one folder,
# and a handful is generous while keeping a crafted count from costing reads.
MAX_FOLDERS = 16
_RAW_DEFLATE = -15  # zlib wbits: no zlib header, 32 KiB window


class CabError(DsymfindError):
    """Not a cabinet holding one file that can be unpacked here; the message says why."""


def extract_single(path: str, dest: str, *, max_bytes: int) -> str:
    """Write the cabinet's one file to `dest` (created, never replaced); return its name.

    On failure `dest` does not exist.
    """
    with open_regular(path) as src:
        reader = _Reader(path, src)
        name, size, blocks = reader.layout(max_bytes)
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            with open(fd, "wb") as out:
                reader.unpack(blocks, size, out)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            os.unlink(dest)
            raise
    return name


# One data block's packed bytes and its expected size -> its output.
_Expand = Callable[[bytes, int], bytes]


class _Blocks:
    """Where one folder's data starts, and how to expand its blocks in order."""

    def __init__(self, start: int, count: int, expand: _Expand, skip: int) -> None:
        self.start, self.count, self.expand, self.skip = start, count, expand, skip


class _Reader:
    def __init__(self, path: str, src: BoundedFile) -> None:
        self.path = path
        self.file = src
        self.data_reserve = 0

    def _fail(self, detail: str) -> NoReturn:
        raise CabError(f"{self.path}: {detail}")

    def _read(self, offset: int, length: int, what: str) -> bytes:
        data = self.file.read(offset, length)
        if data is None:
            self._fail(f"{what} lies outside the cabinet (truncated?)")
        return data

    def layout(self, max_bytes: int) -> tuple[str, int, _Blocks]:
        """(the file's name, its size, where its folder's data is)."""
        header = self._read(0, _HEADER.size, "the header")
        signature, _, _, _, files_at, _, _, _, folders, files, flags, _, _ = _HEADER.unpack(header)
        if signature != SIGNATURE:
            self._fail("not a cabinet (no MSCF signature)")
        if flags & (FLAG_PREV_CABINET | FLAG_NEXT_CABINET):
            self._fail("a cabinet spanning several files is not supported")
        if files != 1:
            self._fail(f"a symbol store's cabinet holds one file, this one {files}")
        if not 0 < folders <= MAX_FOLDERS:
            self._fail(f"{folders} folders")
        folder_reserve, folders_at = 0, _HEADER.size
        if flags & FLAG_RESERVE_PRESENT:
            reserve = self._read(folders_at, _RESERVE.size, "the reserve sizes")
            header_reserve, folder_reserve, self.data_reserve = _RESERVE.unpack(reserve)
            folders_at += _RESERVE.size + header_reserve
        size, skip, index, name = self._file(files_at)
        if index >= folders:
            self._fail(f"the file is in folder {index}, of {folders}")
        if size > max_bytes:
            self._fail(f"the file is {size} bytes, over the {max_bytes}-byte limit")
        # Reaching the file means decoding the `skip` bytes before it: bounded by the same cap.
        if skip > max_bytes - size:
            self._fail(
                f"the file starts {skip} bytes into its folder: {skip + size} bytes to unpack, "
                f"over the {max_bytes}-byte limit"
            )
        folder_at = folders_at + index * (_FOLDER.size + folder_reserve)
        start, count, kind = _FOLDER.unpack(self._read(folder_at, _FOLDER.size, "the folder"))
        return name, size, _Blocks(start, count, self._expander(kind), skip)

    def _expander(self, kind: int) -> _Expand:
        compression = kind & COMPRESSION_MASK
        if compression == COMPRESSION_NONE:
            return lambda packed, _expected: packed
        if compression == COMPRESSION_MSZIP:
            return self._mszip()
        if compression == COMPRESSION_LZX:
            return self._lzx(kind >> LZX_WINDOW_SHIFT & LZX_WINDOW_MASK)
        self._fail(f"compression type {compression} (Quantum or unknown) not supported")

    def _file(self, offset: int) -> tuple[int, int, int, str]:
        """(size, offset in the folder's data, folder index, name) of the CFFILE entry."""
        fixed = self._read(offset, _FILE.size, "the file entry")
        size, skip, index, _, _, _ = _FILE.unpack(fixed)
        rest = self._read(
            offset + _FILE.size,
            min(MAX_NAME_BYTES, self.file.size - offset - _FILE.size),
            "the file name",
        )
        if b"\0" not in rest:
            self._fail("the file name is not terminated")
        name = rest.split(b"\0", 1)[0].decode("utf-8", "replace")
        return size, skip, index, name

    def unpack(self, blocks: _Blocks, size: int, out: BinaryIO) -> None:
        """Write bytes [skip, skip + size) of the folder's data to `out`."""
        offset, produced = blocks.start, 0
        wanted_end = blocks.skip + size
        for _ in range(blocks.count):
            if produced >= wanted_end:
                break
            offset, output = self._block(offset, blocks.expand)
            piece = output[max(0, blocks.skip - produced) : max(0, wanted_end - produced)]
            out.write(piece)
            produced += len(output)
        if produced < wanted_end:
            self._fail(f"the data ends {wanted_end - produced} bytes short of the file")

    def _block(self, offset: int, expand: _Expand) -> tuple[int, bytes]:
        """(offset of the next block, this block's output)."""
        header = self._read(offset, _DATA.size, "a data block header")
        checksum, packed_size, unpacked_size = _DATA.unpack(header)
        if unpacked_size > MAX_BLOCK_OUTPUT:
            self._fail(f"a data block claims {unpacked_size} bytes, over 32 KiB")
        data_at = offset + _DATA.size + self.data_reserve
        packed = self._read(data_at, packed_size, "a data block")
        if checksum and checksum != _checksum(packed, header[4:8]):
            self._fail(f"data block at offset {offset} fails its checksum")
        output = expand(packed, unpacked_size)
        if len(output) != unpacked_size:
            self._fail(f"a data block gave {len(output)} bytes, not {unpacked_size}")
        return data_at + packed_size, output

    def _mszip(self) -> _Expand:
        previous = b""

        def expand(packed: bytes, expected: int) -> bytes:
            nonlocal previous
            if not packed.startswith(MSZIP_SIGNATURE):
                self._fail("an MSZIP block lacks its CK signature")
            try:
                inflater = (
                    zlib.decompressobj(_RAW_DEFLATE, zdict=previous)
                    if previous
                    else zlib.decompressobj(_RAW_DEFLATE)
                )
                # max_length one past the expected size: a longer block shows as too long.
                previous = inflater.decompress(packed[len(MSZIP_SIGNATURE) :], expected + 1)
            except zlib.error as exc:
                self._fail(f"an MSZIP block is damaged ({exc})")
            return previous

        return expand

    def _lzx(self, window_bits: int) -> _Expand:
        try:
            decoder = lzx.Decoder(window_bits)
        except lzx.LzxError as exc:
            self._fail(f"LZX folder: {exc}")

        def expand(packed: bytes, expected: int) -> bytes:
            try:
                return decoder.frame(packed, expected)
            except lzx.LzxError as exc:
                self._fail(f"LZX data is damaged: {exc}")

        return expand


def _checksum(data: bytes, sizes: bytes) -> int:
    """MS-CAB's CFDATA checksum: over the data, then over cbData and cbUncomp."""
    return _checksum_step(sizes, _checksum_step(data, 0))


def _checksum_step(data: bytes, seed: int) -> int:
    """XOR of the little-endian 32-bit words, then the 0-3 trailing bytes, high byte first."""
    whole = len(data) - len(data) % 4
    tail = 0
    for byte in data[whole:]:
        tail = tail << 8 | byte
    return seed ^ _xor_words(data[:whole]) ^ tail


def _xor_words(data: bytes) -> int:
    """XOR of all little-endian 32-bit words, by folding one big integer in halves (fast)."""
    words = len(data) // 4
    value = int.from_bytes(data, "little")
    while words > 1:
        half = words // 2
        value = (value & ((1 << (32 * half)) - 1)) ^ (value >> (32 * half))
        words -= half
    return value
