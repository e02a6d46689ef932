"""The PDB reader against llvm-pdbutil on real PDBs, and on damaged ones."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fixtures import PE_FIXTURES
from test_pe import counted_reads

from dsymfind.windows import pdb, pe

IDENTITIES = json.loads((PE_FIXTURES / "identities.json").read_text())
PDBS = [name for name in IDENTITIES if name.endswith(".pdb")]
HELLO = PE_FIXTURES / "hello64.pdb"
SUPERBLOCK = struct.Struct("<32sIIIIII")


@pytest.mark.parametrize("name", PDBS)
def test_identity_agrees_with_llvm_pdbutil(name: str) -> None:
    identity = pdb.read_identity(str(PE_FIXTURES / name))
    assert str(identity.guid).upper() == IDENTITIES[name]["guid"]
    assert identity.age == IDENTITIES[name]["age"]
    assert identity.dbi_age == IDENTITIES[name]["age"]  # lld and yaml2pdb keep them equal
    assert identity.version == pdb.PDB_VERSION_VC70


@pytest.mark.parametrize("image", ["hello64.exe", "hello32.exe", "greet64.dll", "greet32.dll"])
def test_each_pe_matches_its_own_pdb(image: str) -> None:
    cv = pe.read_identity(str(PE_FIXTURES / image)).require_codeview()
    identity = pdb.read_identity(str(PE_FIXTURES / cv.pdb_name))
    assert identity.mismatch(cv) is None
    assert identity.key == cv.key


def test_mismatches_are_reported_precisely() -> None:
    cv = pe.read_identity(str(PE_FIXTURES / "hello64.exe")).require_codeview()
    age2 = pdb.read_identity(str(PE_FIXTURES / "age2" / "hello64.pdb"))
    assert age2.mismatch(cv) == "age 2, not 1"  # both of its ages
    other = pdb.read_identity(str(PE_FIXTURES / "guid2" / "hello64.pdb"))
    assert other.mismatch(cv) == (
        f"GUID {{0DDBA11C-AFE0-4BAD-BEEF-0123456789AB}}, not {{{str(cv.guid).upper()}}}"
    )
    wrong_pe = pe.read_identity(str(PE_FIXTURES / "greet64.dll")).require_codeview()
    assert "GUID" in (pdb.read_identity(str(HELLO)).mismatch(wrong_pe) or "")


PDBUTIL = next(
    filter(None, map(shutil.which, ["llvm-pdbutil-14", "/usr/lib/llvm-14/bin/llvm-pdbutil"])),
    None,
)
needs_pdbutil = pytest.mark.skipif(PDBUTIL is None, reason="llvm-pdbutil-14 is not installed")


def with_ages(folder: Path, *, info: int, dbi: int) -> Path:
    """hello64.pdb with these info-stream and DBI ages, through LLVM's YAML round trip."""
    assert PDBUTIL is not None
    yaml = subprocess.run(
        [PDBUTIL, "pdb2yaml", "-pdb-stream", "-dbi-stream", str(HELLO)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pdb_part, dbi_part = yaml.split("DbiStream:", 1)
    age = re.compile(r"^(\s+Age:\s+)\d+$", re.MULTILINE)
    pdb_part = age.sub(lambda found: f"{found[1]}{info}", pdb_part)
    dbi_part = age.sub(lambda found: f"{found[1]}{dbi}", dbi_part)
    yaml = f"{pdb_part}DbiStream:{dbi_part}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ages.yaml").write_text(yaml)
    out = folder / "hello64.pdb"
    subprocess.run(
        [PDBUTIL, "yaml2pdb", "-pdb", str(out), str(folder / "ages.yaml")],
        capture_output=True,
        check=True,
    )
    return out


@needs_pdbutil
def test_the_dbi_age_is_matched_as_dbghelp_does(tmp_path: Path) -> None:
    cv = pe.read_identity(str(PE_FIXTURES / "hello64.exe")).require_codeview()
    # pdbstr bumps the info stream's age only: still the image's PDB, under its key.
    indexed = pdb.read_identity(str(with_ages(tmp_path / "indexed", info=2, dbi=1)))
    assert (indexed.age, indexed.dbi_age) == (2, 1)
    assert indexed.mismatch(cv) is None
    assert indexed.key == cv.key
    # The reverse is a PDB DbgHelp calls mismatched, though its info age agrees.
    other = pdb.read_identity(str(with_ages(tmp_path / "other", info=1, dbi=2)))
    assert other.mismatch(cv) == "DBI age 2, not 1 (its info stream says age 1)"
    assert other.key == cv.key[:-1] + "2"


def _patch(fmt: str, offset: int, *values: object) -> Callable[[bytearray], None]:
    return lambda data: struct.pack_into(fmt, data, offset, *values)


def _superblock_field(index: int, value: int) -> Callable[[bytearray], None]:
    """Set BlockSize (0), FreeBlockMapBlock (1), NumBlocks (2), NumDirectoryBytes (3),
    Unknown (4) or BlockMapAddr (5)."""
    return _patch("<I", 32 + 4 * index, value)


def _directory_patch(offset: int, value: int) -> Callable[[bytearray], None]:
    """Patch a u32 inside the stream directory (found through the real block map)."""

    def patch(data: bytearray) -> None:
        _, block_size, _, _, _, _, block_map = SUPERBLOCK.unpack_from(data)
        (first,) = struct.unpack_from("<I", data, block_map * block_size)
        struct.pack_into("<I", data, first * block_size + offset, value)

    return patch


DAMAGE = {
    "no signature": _patch("<4s", 0, b"MZ\0\0"),
    "pdb 2.0": lambda data: data.__setitem__(slice(0, 44), pdb.PDB2_MAGIC),
    "block size": _superblock_field(0, 1000),
    "more blocks than the file": _superblock_field(2, 10_000),
    "empty directory": _superblock_field(3, 0),
    "directory too large": _superblock_field(3, 0xFFFFFFF0),
    "block map past the end": _superblock_field(5, 0xFFFFFF),
    "directory block past the end": lambda data: _directory_block(data, 0xFFFFFFFF),
    "stream count too large": _directory_patch(0, 0x7FFFFFFF),
    "only stream 0": _directory_patch(0, 1),
    "info stream too short": _directory_patch(8, 4),
    "stream sizes push the block lists away": _directory_patch(4, 0xFFFFFFFE),
}


def _directory_block(data: bytearray, value: int) -> None:
    _, block_size, _, _, _, _, block_map = SUPERBLOCK.unpack_from(data)
    struct.pack_into("<I", data, block_map * block_size, value)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_pdbs_raise_pdb_error(damage: str, tmp_path: Path) -> None:
    data = bytearray(HELLO.read_bytes())
    DAMAGE[damage](data)
    path = tmp_path / "damaged.pdb"
    path.write_bytes(bytes(data))
    with pytest.raises(pdb.PdbError) as raised:
        pdb.read_identity(str(path))
    assert str(raised.value).startswith(str(path))


@pytest.mark.parametrize("length", [0, 10, 40, 4096, 8192, 40000])
def test_truncated_pdbs_raise_pdb_error(length: int, tmp_path: Path) -> None:
    path = tmp_path / "cut.pdb"
    path.write_bytes(HELLO.read_bytes()[:length])
    with pytest.raises(pdb.PdbError):
        pdb.read_identity(str(path))


def test_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "x.pdb"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path, tmp_path / "missing.pdb"):
        with pytest.raises(pdb.PdbError):
            pdb.read_identity(str(path))


def test_random_damage_gives_an_identity_or_pdb_error_only(tmp_path: Path) -> None:
    original = HELLO.read_bytes()
    block_size = SUPERBLOCK.unpack_from(original)[1]
    # The superblock, the block map and the directory are what the reader trusts least.
    _, _, _, _, _, _, block_map = SUPERBLOCK.unpack_from(original)
    (directory,) = struct.unpack_from("<I", original, block_map * block_size)
    targets = [(0, 56), (block_map * block_size, 16), (directory * block_size, 200)]
    rng = random.Random(7)
    path = tmp_path / "mutant.pdb"
    outcomes = set()
    for _ in range(400):
        data = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            start, span = rng.choice(targets)
            at = start + rng.randrange(span)
            data[at : at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\0\0\0\0", rng.randbytes(4)])
        path.write_bytes(bytes(data))
        try:
            pdb.read_identity(str(path))
            outcomes.add("read")
        except pdb.PdbError:
            outcomes.add("error")
    assert outcomes == {"read", "error"}


def test_only_a_few_small_pieces_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    read = counted_reads(monkeypatch)
    pdb.read_identity(str(HELLO))
    assert sum(read) < 512 and len(read) < 16
