"""The Mach-O reader against LLVM: `llvm-dwarfdump --uuid` on every fixture and thousands of mutants.

Rules, per file: where LLVM reads a UUID, we read the same (arch, UUID) pairs or raise
a precise MachOError; where we read a UUID, LLVM never read a different one.

llvm-dwarfdump exits at the first file it cannot parse, so files are checked in
batches that resume after the failing file. A thin mutant whose CPU type LLVM knows is
handed to LLVM wrapped as the one slice of a universal file: LLVM skips a slice it
cannot parse without exiting, so thousands of thin files cost one process. (Unknown
CPU types make LLVM drop the slice, so those mutants go bare.)

Known, justified disagreements (each asserted below):
- A universal file with one broken slice: LLVM drops that slice silently and reads the
  others; we refuse the whole file with the slice's error. A universal header that
  disagrees with its slices is corrupt, and pairing the rest could pick the wrong dSYM.
- LLVM validates every load command (segment bounds, sections, symbol tables) and so
  reads no UUID from files whose LC_UUID we read; we are header-only by design and the
  UUID bytes are in the file all the same. Such a slice may be dropped from a universal
  by LLVM while we list it: our pairs are then a superset, never a different pairing.
- LLVM names an unknown CPU type "" where we say "cputype:N/M": only UUIDs are compared.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dsymfind.apple import macho

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets

DWARFDUMP = shutil.which("llvm-dwarfdump-19") or shutil.which(
    "llvm-dwarfdump", path="/usr/lib/llvm-14/bin"
)
pytestmark = pytest.mark.skipif(
    DWARFDUMP is None, reason="neither llvm-dwarfdump-19 nor LLVM 14's llvm-dwarfdump is installed"
)
UUID_LINE = re.compile(r"^UUID: (\S+) \((\S*)\) (.+)$")
ERROR_LINE = re.compile(r"^error: (.+?): ")
FAT_MAGICS = (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf")
THIN_MAGICS = {b"\xcf\xfa\xed\xfe": "<", b"\xce\xfa\xed\xfe": "<", b"\xfe\xed\xfa\xcf": ">",
               b"\xfe\xed\xfa\xce": ">"}  # fmt: skip
THIN_MUTANTS, FAT_MUTANTS = 2400, 400
WORDS = [0, 1, 2, 8, 24, 27, 28, 32, 33, 0x19, 0x1B, 0x1000, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF]
# Our refusals of universal files that LLVM partly reads: one slice is broken.
BROKEN_SLICE = re.compile(r"^<memory>: slice \d+ \(")

Pairs = list[tuple[str, str]]


def mutate(rng: random.Random, seed: bytes) -> bytes:
    """One to three edits: header words, universal table words, load command words, truncation."""
    data = bytearray(seed)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["header", "fat", "command", "truncate", "byte"])
        value = rng.choice([*WORDS, rng.getrandbits(32), len(data)])
        if kind == "header":
            at = rng.choice([4, 8, 12, 16, 20])
            if data[:4] in FAT_MAGICS:  # the first slice's header
                at += struct.unpack_from(">I", data, 16 if data[3] == 0xBE else 24)[0]
            data[at : at + 4] = struct.pack("<I", value)
        elif kind == "fat" and data[:4] in FAT_MAGICS:
            at = rng.choice([4, 8, 12, 16, 20, 28, 32, 36, 40, 48])
            data[at : at + 4] = struct.pack(">I", value)
        elif kind == "command":
            at = rng.randrange(32, max(33, min(len(data), 4096))) & ~3
            data[at : at + 4] = struct.pack("<I", value)
        elif kind == "truncate":
            del data[rng.randrange(0, len(data)) :]
        elif data:
            data[rng.randrange(0, min(len(data), 4096))] = rng.randrange(256)
        if len(data) < 8:
            break
    return bytes(data)


def wrapped(data: bytes) -> bytes | None:
    """`data` as the one slice of a universal file, when its CPU type is one LLVM knows."""
    endian = THIN_MAGICS.get(data[:4])
    if endian is None or len(data) < 12:
        return None
    cputype, cpusubtype = struct.unpack_from(endian + "II", data, 4)
    if macho.arch_name(cputype, cpusubtype).startswith("cputype:"):
        return None
    header = struct.pack(">7I", 0xCAFEBABE, 1, cputype, cpusubtype, 4096, len(data), 12)
    return header.ljust(4096, b"\0") + data


def llvm_pairs(paths: list[Path]) -> dict[Path, Pairs]:
    """(arch, UUID) pairs LLVM reads per file (none when it cannot parse it), in few processes."""
    assert DWARFDUMP is not None
    found: dict[Path, Pairs] = {path: [] for path in paths}
    rest = [str(path) for path in paths]
    while rest:
        done = subprocess.run(
            [DWARFDUMP, "--uuid", *rest], capture_output=True, text=True, check=False
        )
        for match in map(UUID_LINE.match, done.stdout.splitlines()):
            if match:
                found[Path(match[3])].append((match[2], match[1]))
        if done.returncode == 0:
            break
        failed = ERROR_LINE.match(done.stderr.strip().splitlines()[-1])
        assert failed is not None, done.stderr
        rest = rest[rest.index(failed[1]) + 1 :]
    return found


def our_pairs(data: bytes) -> Pairs | str:
    try:
        return [(s.arch, s.uuid) for s in macho.read_slices_from_bytes(data) if s.uuid is not None]
    except macho.MachOError as exc:
        return str(exc)


def judge(ours: Pairs | str, theirs: Pairs, universal: bool) -> str:
    """Which agreement or known disagreement this is; fails on any other."""
    if isinstance(ours, str):
        if not theirs:
            return "both read nothing"
        assert universal and BROKEN_SLICE.match(ours), (ours, theirs)
        return "we refuse a universal with a broken slice that LLVM drops"
    if not theirs:
        return "LLVM reads nothing (stricter validation)" if ours else "both read nothing"
    if len(ours) == len(theirs) and all(
        uuid == llvm_uuid and llvm_arch in (arch, "")
        for (arch, uuid), (llvm_arch, llvm_uuid) in zip(ours, theirs, strict=True)
    ):
        return "same pairs"
    assert universal and set(theirs) <= set(ours), (ours, theirs)
    return "LLVM drops a slice we read"


def test_fixtures_agree_exactly() -> None:
    seeds = targets.macho_seeds()
    theirs = llvm_pairs(seeds)
    for path in seeds:
        assert our_pairs(path.read_bytes()) == theirs[path], path


@pytest.mark.long
def test_mutants(tmp_path: Path) -> None:
    rng = random.Random(20240607)  # fixed: the same mutants in every run
    seeds = [path.read_bytes() for path in targets.macho_seeds()]
    thin = [s for s in seeds if s[:4] not in FAT_MAGICS]
    fat = [s for s in seeds if s[:4] in FAT_MAGICS]
    mutants = [mutate(rng, rng.choice(thin)) for _ in range(THIN_MUTANTS)]
    mutants += [mutate(rng, rng.choice(fat)) for _ in range(FAT_MUTANTS)]
    as_slice: list[Path] = []
    bare: list[Path] = []
    for index, data in enumerate(mutants):
        wrapper = wrapped(data)
        path = tmp_path / f"m{index:05d}"
        path.write_bytes(wrapper or data)
        (as_slice if wrapper else bare).append(path)
    theirs = {**llvm_pairs(as_slice), **llvm_pairs(bare)}
    verdicts = Counter(
        judge(our_pairs(data), theirs[tmp_path / f"m{index:05d}"], data[:4] in FAT_MAGICS)
        for index, data in enumerate(mutants)
    )
    print(dict(verdicts))  # shown with -s: how the mutants split
    assert verdicts["same pairs"] > THIN_MUTANTS // 10, "the mutants still exercise agreement"
