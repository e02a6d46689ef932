"""Unpacking `.pd_` cabinets made by the real gcab, and refusing damaged or foreign ones."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from support.cabinets import unpack_damaged
from support.fixtures import PE_FIXTURES

from dsymfind.windows import cab

GCAB = shutil.which("gcab")
needs_gcab = pytest.mark.skipif(GCAB is None, reason="gcab is not installed (apt-get install gcab)")
FOLDER_AT = 36  # the first CFFOLDER follows the 36-byte CFHEADER (gcab writes no reserve)


def make_cab(folder: Path, member: Path, *, compress: bool) -> Path:
    """A cabinet of `member` made by gcab, as symstore's compressed form holds one file."""
    assert GCAB is not None
    out = folder / (member.name[:-1] + "_")
    flags = ["-c", "-n", "-z"] if compress else ["-c", "-n"]
    subprocess.run([GCAB, *flags, str(out), str(member)], check=True, capture_output=True)
    return out


def payload(tmp_path: Path) -> Path:
    """Several 32 KiB blocks, compressible and not: the dictionary chain gets used."""
    rng = random.Random(5)
    pdb = (PE_FIXTURES / "hello64.pdb").read_bytes()
    member = tmp_path / "big.pdb"
    member.write_bytes(pdb + rng.randbytes(100_000) + pdb + b"tail")
    return member


@needs_gcab
@pytest.mark.parametrize("compress", [True, False], ids=["mszip", "stored"])
def test_gcab_cabinets_unpack_to_the_same_bytes(compress: bool, tmp_path: Path) -> None:
    member = payload(tmp_path)
    packed = make_cab(tmp_path, member, compress=compress)
    out = tmp_path / "out.pdb"
    assert cab.extract_single(str(packed), str(out), max_bytes=1 << 30) == "big.pdb"
    assert out.read_bytes() == member.read_bytes()


@needs_gcab
def test_the_size_cap_holds_and_leaves_nothing(tmp_path: Path) -> None:
    packed = make_cab(tmp_path, payload(tmp_path), compress=True)
    out = tmp_path / "out.pdb"
    with pytest.raises(cab.CabError, match="limit"):
        cab.extract_single(str(packed), str(out), max_bytes=1000)
    assert not out.exists()


@needs_gcab
def test_the_bytes_before_the_file_count_against_the_cap(tmp_path: Path) -> None:
    member = payload(tmp_path)
    data = bytearray(make_cab(tmp_path, member, compress=True).read_bytes())
    (files_at,) = struct.unpack_from("<I", data, 16)  # CFHEADER.coffFiles
    skip = member.stat().st_size - 1
    struct.pack_into("<II", data, files_at, 1, skip)  # CFFILE: cbFile 1, at the very end
    packed = tmp_path / "late.pd_"
    packed.write_bytes(bytes(data))
    out = tmp_path / "out.pdb"
    with pytest.raises(cab.CabError, match=f"starts {skip} bytes into its folder"):
        cab.extract_single(str(packed), str(out), max_bytes=skip)  # skip + 1 is one too many
    assert not out.exists()
    cab.extract_single(str(packed), str(out), max_bytes=skip + 1)
    assert out.read_bytes() == b"l"  # the last byte of "tail"


def _damage(data: bytearray, how: str) -> None:
    if how == "signature":
        data[0:4] = b"MSCX"
    elif how == "lzx":
        struct.pack_into("<H", data, FOLDER_AT + 6, 0x1503)  # LZX, window 2^21
    elif how == "quantum":
        struct.pack_into("<H", data, FOLDER_AT + 6, 2)
    elif how == "two files":
        struct.pack_into("<H", data, 28, 2)  # cFiles
    elif how == "next cabinet":
        struct.pack_into("<H", data, 30, 2)
    elif how == "checksum":
        data[-100] ^= 0xFF  # inside the last data block
    elif how == "block count":
        (count,) = struct.unpack_from("<H", data, FOLDER_AT + 4)
        struct.pack_into("<H", data, FOLDER_AT + 4, count - 1)
    elif how == "folder index":
        files_at = struct.unpack_from("<I", data, 16)[0]
        struct.pack_into("<H", data, files_at + 8, 5)
    elif how == "data offset":
        struct.pack_into("<I", data, FOLDER_AT, 0xFFFFFFF0)


@needs_gcab
@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("signature", "not a cabinet"),
        ("lzx", "LZX data is damaged"),  # MSZIP bytes read as LZX
        ("quantum", "Quantum"),
        ("two files", "holds one file"),
        ("next cabinet", "spanning"),
        ("checksum", "checksum"),
        ("block count", "short of the file"),
        ("folder index", "folder 5"),
        ("data offset", "outside the cabinet"),
    ],
)
def test_damaged_or_foreign_cabinets_are_refused(how: str, message: str, tmp_path: Path) -> None:
    packed = make_cab(tmp_path, payload(tmp_path), compress=True)
    data = bytearray(packed.read_bytes())
    _damage(data, how)
    packed.write_bytes(bytes(data))
    out = tmp_path / "out.pdb"
    with pytest.raises(cab.CabError, match=message):
        cab.extract_single(str(packed), str(out), max_bytes=1 << 30)
    assert not out.exists()


@needs_gcab
def test_truncated_and_mutated_cabinets_raise_cab_error_only(tmp_path: Path) -> None:
    original = make_cab(tmp_path, PE_FIXTURES / "hello64.pdb", compress=True).read_bytes()
    rng = random.Random(11)

    def damage(data: bytearray, round_: int) -> None:
        if round_ % 3 == 0:
            del data[rng.randrange(len(data)) :]
        else:
            at = rng.randrange(min(len(data), 120))
            data[at : at + 2] = rng.randbytes(2)

    results = unpack_damaged(original, damage, rounds=300, folder=tmp_path, max_bytes=1 << 24)
    assert any(isinstance(r, cab.CabError) for r in results)


def test_checksum_follows_ms_cab() -> None:
    # Worked by hand from MS-CAB's CSUMCompute: words XORed, the tail high byte first.
    assert cab._checksum_step(b"\x01\x00\x00\x00\x02\x00\x00\x00", 0) == 3
    assert cab._checksum_step(b"\x01\x00\x00\x00\xaa\xbb\xcc", 0) == 1 ^ 0xAABBCC
    assert cab._checksum_step(b"\xaa\xbb", 0x10) == 0x10 ^ 0xAABB
