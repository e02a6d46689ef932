"""The Mach-O reader under property-based fuzzing: MachOError or the truth, quickly and lightly.

Structured inputs (valid headers with one field lying: arch counts, offsets and sizes
near 2**32 and 2**64, ncmds/sizeofcmds, cmdsize 0 or past the end, truncation, fat64)
and byte-level mutations of the real fixtures. Every call goes through
fuzzing.targets.check_macho: only MachOError escapes, within 100 ms and 4 MiB.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from macholib import mach_o

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets
from fuzzing.properties import EDGE_QWORDS, EDGE_WORDS, mutated, property_settings
from test_macho import fat_raw, load_command, thin

CPU_X86_64 = 0x01000007
CPU_ARM64 = 0x0100000C
CPU_PPC = 18
MH_DSYM = 10
# Recognisable UUID bytes: no window of them reads as LC_UUID or as a small cmdsize, so a
# walker misled by a lie cannot mistake them for a command; any UUID read must be planted.
PLANTED = [bytes(range(0xA0 + 16 * i, 0xB0 + 16 * i)) for i in range(3)]
SEEDS = [path.read_bytes() for path in targets.macho_seeds()]


def uuid_text(raw: bytes) -> str:
    digits = raw.hex().upper()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def fat(
    slices: list[bytes], entries: list[tuple[int, int, int]], *, is64: bool, count: int | None
) -> bytes:
    """A universal file: `entries` (cputype, offset, size) in the table, `slices` at their offsets."""
    out = bytearray(
        fat_raw([(cputype, 0, offset, size) for cputype, offset, size in entries], is64=is64)
    )
    if count is not None:
        out[4:8] = struct.pack(">I", count)
    table_end = len(out)
    for blob, (_, offset, _) in zip(slices, entries, strict=True):
        # A lie into the header leaves the header; one past 1 MiB leaves the bytes out.
        if table_end <= offset < (1 << 20):
            out.extend(bytes(max(0, offset - len(out))))
            out[offset : offset + len(blob)] = blob
    return bytes(out)


def read_uuids(data: bytes) -> list[str | None] | None:
    slices = targets.check_macho(data)
    return None if slices is None else [s.uuid for s in slices]


# --- truthful files read back exactly -----------------------------------------------------

endians = st.sampled_from("<>")


@property_settings(200)
@given(
    uuid=st.sampled_from(PLANTED),
    before=st.integers(0, 4),
    after=st.integers(0, 4),
    endian=endians,
    is64=st.booleans(),
)
def test_truthful_thin_file_reads_its_uuid(
    uuid: bytes, before: int, after: int, endian: str, is64: bool
) -> None:
    filler = [load_command(0x26, bytes(8), endian)]  # LC_FUNCTION_STARTS-sized filler
    commands = filler * before + [load_command(mach_o.LC_UUID, uuid, endian)] + filler * after
    assert read_uuids(thin(commands, endian=endian, is64=is64, filetype=MH_DSYM)) == [
        uuid_text(uuid)
    ]


@property_settings(150)
@given(count=st.integers(1, 3), align=st.sampled_from([8, 4096, 16384]), is64=st.booleans())
def test_truthful_universal_reads_every_slice(count: int, align: int, is64: bool) -> None:
    cputypes = [CPU_ARM64, CPU_X86_64, CPU_PPC][:count]
    slices = [
        thin([load_command(mach_o.LC_UUID, PLANTED[i], "<")], cputype=cputypes[i])
        for i in range(count)
    ]
    header = 8 + count * (32 if is64 else 20)
    step = -(-max(map(len, slices)) // align) * align
    offsets = [-(-header // align) * align + i * step for i in range(count)]
    entries = [(c, o, len(s)) for c, o, s in zip(cputypes, offsets, slices, strict=True)]
    data = fat(slices, entries, is64=is64, count=None)
    assert read_uuids(data) == [uuid_text(PLANTED[i]) for i in range(count)]


# --- lying headers: MachOError or a planted UUID, never anything else -----------------------

counts = st.sampled_from([0, 1, 2, 31, 32, 33, 2**31, 2**32 - 1])
offsets_and_sizes = st.sampled_from(EDGE_WORDS + EDGE_QWORDS + [-8, -1, 1, 24, 28]) | st.integers(
    0, 1 << 16
)


@property_settings(300)
@given(
    count=st.none() | counts,
    is64=st.booleans(),
    lies=st.lists(st.tuples(st.integers(0, 1), st.booleans(), offsets_and_sizes), max_size=3),
    slack=st.integers(0, 64),
)
def test_universal_header_lies(
    count: int | None, is64: bool, lies: list[tuple[int, bool, int]], slack: int
) -> None:
    slices = [thin([load_command(mach_o.LC_UUID, PLANTED[i], "<")]) for i in range(2)]
    entries = [(CPU_ARM64, 4096, len(slices[0])), (CPU_X86_64, 8192, len(slices[1]))]
    for index, is_offset, value in lies:
        cputype, offset, size = entries[index]
        # Table fields are 32 bits in fat, 64 in fat64: keep the lie representable.
        value %= 1 << (64 if is64 else 32)
        entries[index] = (cputype, value, size) if is_offset else (cputype, offset, value)
    data = fat(slices, entries, is64=is64, count=count) + bytes(slack)
    found = read_uuids(data)
    assert found is None or set(found) <= {uuid_text(u) for u in PLANTED}
    if count is not None and count > 32:
        assert found is None, "a table of more than MAX_FAT_ARCHS entries is refused"


command_shape = st.tuples(
    st.sampled_from([mach_o.LC_UUID, mach_o.LC_SEGMENT_64, 0x26, 0]) | st.integers(0, 2**32 - 1),
    st.sampled_from([0, 8, 16, 24, 72]),  # payload bytes
    st.none() | st.sampled_from([0, 1, 7, 8, 23, 24, 2**31, 2**32 - 1]) | st.integers(0, 256),
)
lie = st.none() | st.sampled_from([0, 1, 2**31, 2**32 - 1]) | st.integers(-3, 3)


@property_settings(400)
@given(
    shapes=st.lists(command_shape, max_size=8),
    ncmds_lie=lie,
    sizeofcmds_lie=lie,
    endian=endians,
    is64=st.booleans(),
    cut=st.none() | st.integers(0, 400),
    wrap=st.booleans(),
)
def test_load_command_lies(
    shapes: list[tuple[int, int, int | None]],
    ncmds_lie: int | None,
    sizeofcmds_lie: int | None,
    endian: str,
    is64: bool,
    cut: int | None,
    wrap: bool,
) -> None:
    commands = [
        load_command(
            cmd, PLANTED[0] if cmd == mach_o.LC_UUID and n >= 16 else bytes(n), endian, size
        )
        for cmd, n, size in shapes
    ]
    total = sum(map(len, commands))
    ncmds = None if ncmds_lie is None else max(0, len(commands) + ncmds_lie) % 2**32
    sizeofcmds = None if sizeofcmds_lie is None else max(0, total + sizeofcmds_lie) % 2**32
    data = thin(commands, endian=endian, is64=is64, ncmds=ncmds, sizeofcmds=sizeofcmds)
    data = data[:cut] if cut is not None else data + bytes(16)
    if wrap:
        data = fat([data], [(CPU_ARM64, 4096, len(data))], is64=False, count=None)
    found = read_uuids(data)
    assert found is None or set(found) <= {uuid_text(PLANTED[0]), None}
    zero_size = any(size == 0 for _, _, size in shapes) and ncmds_lie is None
    if zero_size and sizeofcmds_lie is None and cut is None:
        assert found is None, "a load command of cmdsize 0 is refused"


@property_settings(60)
@given(size=st.integers(900_000, 1_040_000), seed=st.sampled_from(SEEDS), fat64=st.booleans())
def test_large_inputs_stay_bounded(size: int, seed: bytes, fat64: bool) -> None:
    """Just under 1 MB, slices near the end: the reader reads headers, never the padding."""
    at = size - len(seed) - (size % 8)
    data = fat([seed], [(CPU_ARM64, at, len(seed))], is64=fat64, count=None).ljust(size, b"\0")
    targets.check_macho(data)


# --- real fixtures, mutated ----------------------------------------------------------------


@property_settings(600)
@given(data=mutated(SEEDS))
def test_mutated_fixtures(data: bytes) -> None:
    targets.check_macho(data)


@property_settings(100)
@given(data=mutated(SEEDS))
def test_file_and_memory_readers_agree(
    data: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    targets.check_macho_file(data, tmp_path_factory.getbasetemp() / "mutated")
