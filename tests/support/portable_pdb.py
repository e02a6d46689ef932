"""Portable (.NET) PDB fixtures, built from the specifications: no .NET SDK runs here.

`portable_pdb_bytes` lays out ECMA-335 metadata (II.24.2.1 root, II.24.2.2 stream headers)
holding the streams a portable PDB has (Portable PDB v1.0 specification): `#Pdb` (the
20-byte PDB id, an entry point and no referenced type-system tables), an empty `#~` table
stream, and minimal heaps. `portable_image` copies a real lld-link image and turns its
CodeView entry into the one a .NET compiler writes for that PDB: MajorVersion 0x0100,
MinorVersion 0x504D, TimeDateStamp the id's stamp, and the RSDS GUID the id's GUID (age 1).
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

from support.fixtures import PE_FIXTURES

VERSION_STRING = b"PDB v1.00"
PORTABLE_MAJOR, PORTABLE_MINOR = 0x0100, 0x504D
IMAGE_DEBUG_TYPE_CODEVIEW = 2
DEBUG_ENTRY = struct.Struct("<IIHHIIII")
BASE_IMAGE = PE_FIXTURES / "hello64.exe"


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 4)


def portable_pdb_bytes(guid: uuid.UUID, stamp: int) -> bytes:
    pdb_stream = guid.bytes_le + struct.pack("<IIQ", stamp, 0, 0)  # entry point 0, no tables
    # Reserved, MajorVersion 2, MinorVersion 0, HeapSizes, Reserved 1, Valid and Sorted: empty.
    tables = struct.pack("<IBBBBQQ", 0, 2, 0, 0, 1, 0, 0)
    streams = [
        (b"#Pdb", pdb_stream),
        (b"#~", tables),
        (b"#Strings", bytes(4)),
        (b"#US", bytes(4)),
        (b"#GUID", b""),
        (b"#Blob", bytes(4)),
    ]
    version = _padded(VERSION_STRING + b"\0")
    head_size = 16 + len(version) + 4 + sum(8 + len(_padded(name + b"\0")) for name, _ in streams)
    headers, bodies = b"", b""
    for name, body in streams:
        headers += struct.pack("<II", head_size + len(bodies), len(body)) + _padded(name + b"\0")
        bodies += _padded(body)
    root = b"BSJB" + struct.pack("<HHII", 1, 1, 0, len(version)) + version
    return root + struct.pack("<HH", 0, len(streams)) + headers + bodies


def portable_image(guid: uuid.UUID, stamp: int, *, base: Path = BASE_IMAGE) -> bytes:
    """`base` with its CodeView entry naming the portable PDB (guid, stamp)."""
    image = bytearray(base.read_bytes())
    rsds = image.index(b"RSDS")
    entry = _codeview_entry(image, rsds)
    _, _, _, _, kind, size, address, pointer = DEBUG_ENTRY.unpack_from(image, entry)
    DEBUG_ENTRY.pack_into(image, entry, 0, stamp, PORTABLE_MAJOR, PORTABLE_MINOR, kind, size,
                          address, pointer)  # fmt: skip
    image[rsds + 4 : rsds + 24] = guid.bytes_le + struct.pack("<I", 1)
    return bytes(image)


def _codeview_entry(image: bytearray, rsds: int) -> int:
    """The offset of the debug directory entry whose data is the RSDS record at `rsds`."""
    for at in range(0, len(image) - DEBUG_ENTRY.size, 4):
        fields = DEBUG_ENTRY.unpack_from(image, at)
        if fields[4] == IMAGE_DEBUG_TYPE_CODEVIEW and fields[7] == rsds:
            return at
    raise AssertionError(f"{BASE_IMAGE}: no CodeView entry points at its RSDS record")


def write_portable_pair(folder: Path, guid: uuid.UUID, stamp: int) -> tuple[Path, Path]:
    """hello64.exe naming a portable hello64.pdb, and that PDB, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    exe, pdb = folder / "hello64.exe", folder / "hello64.pdb"
    exe.write_bytes(portable_image(guid, stamp))
    pdb.write_bytes(portable_pdb_bytes(guid, stamp))
    return exe, pdb
