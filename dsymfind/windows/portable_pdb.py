"""Read the identity of a portable PDB (.NET): the PDB id in its `#Pdb` stream.

A portable PDB is ECMA-335 metadata: a root ("BSJB", versions, a version string, stream
headers; ECMA-335 II.24.2.1-2) whose `#Pdb` stream starts with the 20-byte PDB id, a GUID
and a stamp (Portable PDB v1.0 specification, "#Pdb stream"). The image names it with a
CodeView entry carrying the same GUID, and the stamp as the entry's TimeDateStamp; SSQP
files it as `<name>/<GUID>FFFFFFFF/<name>`. Only the root and its stream headers (a few
hundred bytes) and the id are read, each range checked against the file's size.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from dsymfind.windows.bounded_read import BoundedFile, fits
from dsymfind.windows.pe import CodeView, braced, portable_store_key

METADATA_SIGNATURE = b"BSJB"
# Signature, MajorVersion, MinorVersion, Reserved, Length (of the version string).
_ROOT = struct.Struct("<4sHHII")
_STREAM_COUNT = struct.Struct("<2xH")  # Flags, Streams
_STREAM_HEADER = struct.Struct("<II")  # Offset (from the root), Size
# ECMA-335 caps the version string at 255 bytes and a stream name at 32; five ECMA streams
# plus #Pdb and #JTD is all anyone writes, so more than this is not metadata.
MAX_VERSION_BYTES = 256
MAX_STREAM_NAME_BYTES = 32
MAX_STREAMS = 16
PDB_STREAM = b"#Pdb"
_PDB_ID = struct.Struct("<16sI")


class PortablePdbError(Exception):
    """Why the metadata holds no PDB id; pdb.py reports it as a PdbError."""


@dataclass(frozen=True)
class PortablePdbIdentity:
    path: str
    guid: uuid.UUID
    stamp: int

    @property
    def key(self) -> str:
        """The symbol-store folder name (SSQP's): the age's place holds FFFFFFFF."""
        return portable_store_key(self.guid)

    def mismatch(self, wanted: CodeView) -> str | None:
        """None when this PDB is the one `wanted` names; else precisely how it differs."""
        if wanted.portable_stamp is None:
            return f"a portable PDB, but the image names a Windows PDB (age {wanted.age})"
        problems = []
        if self.guid != wanted.guid:
            problems.append(f"GUID {braced(self.guid)}, not {braced(wanted.guid)}")
        if self.stamp != wanted.portable_stamp:
            problems.append(f"stamp {self.stamp:08X}, not {wanted.portable_stamp:08X}")
        return "; ".join(problems) or None


def read_identity(path: str, file: BoundedFile) -> PortablePdbIdentity:
    """The PDB id of the metadata in `file`; raises PortablePdbError."""
    offset, size = _pdb_stream(file)
    if size < _PDB_ID.size:
        raise PortablePdbError(f"the #Pdb stream of {size} bytes is too short for a PDB id")
    pdb_id = file.read(offset, _PDB_ID.size)
    if pdb_id is None:
        raise PortablePdbError("the #Pdb stream lies outside the file")
    guid, stamp = _PDB_ID.unpack(pdb_id)
    return PortablePdbIdentity(path, uuid.UUID(bytes_le=guid), stamp)


def _pdb_stream(file: BoundedFile) -> tuple[int, int]:
    """(file offset, size) of the #Pdb stream, from the metadata root's stream headers."""
    root = file.read(0, _ROOT.size)
    if root is None or root[:4] != METADATA_SIGNATURE:
        raise PortablePdbError("no metadata root (BSJB)")
    version_bytes = _ROOT.unpack(root)[4]
    if version_bytes > MAX_VERSION_BYTES or version_bytes % 4:
        raise PortablePdbError(f"a version string of {version_bytes} bytes is not metadata's")
    at = _ROOT.size + version_bytes
    count = file.read(at, _STREAM_COUNT.size)
    if count is None:
        raise PortablePdbError("the metadata root is cut short")
    (streams,) = _STREAM_COUNT.unpack(count)
    if streams > MAX_STREAMS:
        raise PortablePdbError(f"{streams} metadata streams, more than any writer makes")
    at += _STREAM_COUNT.size
    for _ in range(streams):
        offset, size, name, at = _stream_header(file, at)
        if name == PDB_STREAM:
            if not fits(offset, size, file.size):
                raise PortablePdbError("the #Pdb stream lies outside the file")
            return offset, size
    raise PortablePdbError("metadata without a #Pdb stream (an assembly, not a PDB?)")


def _stream_header(file: BoundedFile, at: int) -> tuple[int, int, bytes, int]:
    """(offset, size, name) of the stream header at `at`, and where the next one starts."""
    most = min(_STREAM_HEADER.size + MAX_STREAM_NAME_BYTES, max(file.size - at, 0))
    header = file.read(at, most)
    if header is None or len(header) < _STREAM_HEADER.size:
        raise PortablePdbError("the stream headers are cut short")
    offset, size = _STREAM_HEADER.unpack_from(header)
    name, nul, _ = header[_STREAM_HEADER.size :].partition(b"\0")
    if not nul and len(header) < _STREAM_HEADER.size + MAX_STREAM_NAME_BYTES:
        raise PortablePdbError("the stream headers are cut short")
    if not nul:
        raise PortablePdbError("a stream name is not NUL-terminated within 32 bytes")
    padded = -(-(len(name) + 1) // 4) * 4  # names are padded to a 4-byte boundary
    return offset, size, name, at + _STREAM_HEADER.size + padded
