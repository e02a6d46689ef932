"""The PE and PDB readers under property-based fuzzing: their own error, quickly and lightly.

Byte-level mutations of the real PE images, the hand-broken ones and the real PDBs,
plus PE headers with one field lying. Every call goes through fuzzing.targets: only
pe.PEError / pdb.PdbError escape, within 100 ms and 4 MiB, and what is read is
well-formed.
"""

from __future__ import annotations

import shutil
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets
from fuzzing.properties import EDGE_WORDS, mutated, property_settings

PE_SEEDS = [path.read_bytes() for path in targets.pe_seeds()]
PDB_SEEDS = [path.read_bytes() for path in targets.pdb_seeds()]
HELLO64 = (targets.PE_FIXTURES / "hello64.exe").read_bytes()
LFANEW = struct.unpack_from("<i", HELLO64, 0x3C)[0]
# Offsets of the fields a crafted image lies about, from the PE signature (PE32+).
PE_FIELDS = {
    "sections": 6,
    "optional_size": 20,
    "size_of_headers": 24 + 60,
    "directories": 24 + 108,
    "debug_rva": 24 + 112 + 6 * 8,
    "debug_size": 24 + 112 + 6 * 8 + 4,
}


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    folder = targets.make_workdir()
    yield folder
    shutil.rmtree(folder)


@property_settings(250)
@given(data=mutated(PE_SEEDS, focus=1024))
def test_mutated_images(workdir: Path, data: bytes) -> None:
    targets.check_pe(data, workdir / "image.exe")


@property_settings(300)
@given(
    lies=st.lists(
        st.tuples(
            st.sampled_from(sorted(PE_FIELDS)),
            st.sampled_from(EDGE_WORDS) | st.integers(0, 2**32 - 1),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_lying_pe_headers(workdir: Path, lies: list[tuple[str, int]]) -> None:
    data = bytearray(HELLO64)
    for field, value in lies:
        at = LFANEW + PE_FIELDS[field]
        width = 2 if field in ("sections", "optional_size") else 4
        data[at : at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    targets.check_pe(bytes(data), workdir / "image.exe")


@property_settings(150)
@given(data=mutated(PDB_SEEDS, focus=8192))
def test_mutated_pdbs(workdir: Path, data: bytes) -> None:
    targets.check_pdb(data, workdir / "symbols.pdb")


@property_settings(100)
@given(
    field=st.integers(0, 5),
    value=st.sampled_from(EDGE_WORDS) | st.integers(0, 2**32 - 1),
    seed=st.sampled_from(PDB_SEEDS),
)
def test_lying_msf_superblock(workdir: Path, field: int, value: int, seed: bytes) -> None:
    """BlockSize, FreeBlockMapBlock, NumBlocks, NumDirectoryBytes, Unknown, BlockMapAddr."""
    data = bytearray(seed)
    at = 32 + 4 * field
    data[at : at + 4] = struct.pack("<I", value)
    targets.check_pdb(bytes(data), workdir / "symbols.pdb")
