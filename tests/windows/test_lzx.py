"""LZX `.pd_` cabinets: cabextract (libmspack) vouches for the test encoder, dsymfind's
decoder must give the same bytes, and damaged streams give CabError only."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from support.cabinets import unpack_damaged
from support.fixtures import PE_FIXTURES
from support.lzx_encoder import (
    ALIGNED,
    DEFAULT_PLAN,
    FRAME,
    UNCOMPRESSED,
    VERBATIM,
    Encoder,
    translate_e8,
    write_cab,
)

from dsymfind.windows import cab, lzx

CABEXTRACT = shutil.which("cabextract")
needs_cabextract = pytest.mark.skipif(
    CABEXTRACT is None, reason="cabextract is not installed (apt-get install cabextract)"
)
FOLDER_AT = 36  # the encoder's CFFOLDER follows the 36-byte CFHEADER


def pdbs() -> bytes:
    names = ("hello64", "greet32", "hello32")
    return b"".join((PE_FIXTURES / f"{name}.pdb").read_bytes() for name in names)


def x86_like(size: int) -> bytes:
    """Code-like bytes: many E8 calls with near targets, some far, some at frame ends."""
    rng = random.Random(86)
    out = bytearray()
    while len(out) < size:
        if rng.random() < 0.3:
            target = rng.choice([rng.randrange(-4000, 4000), rng.randrange(-(2**31), 2**31)])
            out += b"\xe8" + (target & 0xFFFFFFFF).to_bytes(4, "little")
        else:
            out += rng.choice([b"\x55\x48\x89\xe5", b"\x48\x83\xec\x20", b"\xc3", b"\x90"])
    return bytes(out[:size])


def words(size: int) -> bytes:
    rng = random.Random(7)
    vocabulary = [f"sym_{rng.randrange(10**6)}::Type<{i}>".encode() for i in range(400)]
    return b" ".join(rng.choice(vocabulary) for _ in range(size // 10))[:size]


INPUTS = {
    "pdbs": (pdbs, 21),
    "random": (lambda: random.Random(1).randbytes(70_000), 15),
    "zeros": (lambda: bytes(100_000), 16),
    "text": (lambda: words(120_000), 18),
    "x86": (lambda: x86_like(110_000), 17),
    "pdbs-small-window": (pdbs, 15),
}


def cabinet(tmp_path: Path, data: bytes, window_bits: int, **options: object) -> Path:
    packed = tmp_path / "in.pd_"
    packed.write_bytes(write_cab("in.pdb", data, window_bits, **options))  # type: ignore[arg-type]
    return packed


def decode(packed: Path, tmp_path: Path, max_bytes: int = 1 << 30) -> bytes:
    out = tmp_path / "out.pdb"
    out.unlink(missing_ok=True)
    assert cab.extract_single(str(packed), str(out), max_bytes=max_bytes) == "in.pdb"
    return out.read_bytes()


@pytest.mark.parametrize("name", list(INPUTS))
def test_encoder_output_decodes_to_the_original(name: str, tmp_path: Path) -> None:
    make, window_bits = INPUTS[name]
    data = make()
    packed = cabinet(tmp_path, data, window_bits)
    if CABEXTRACT is not None:  # the independent decoder vouches for the encoder
        extracted = subprocess.run([CABEXTRACT, "-q", "-p", str(packed)], capture_output=True)
        assert extracted.returncode == 0, extracted.stderr
        assert extracted.stdout == data
    assert decode(packed, tmp_path) == data


def test_the_inputs_exercise_what_they_claim() -> None:
    x86 = x86_like(110_000)
    assert translate_e8(x86) != x86  # E8 translation really changes bytes
    assert len(pdbs()) > 3 * FRAME  # several frames, so several CFDATA blocks
    # Blocks straddle frames; all three kinds appear; an odd uncompressed size needs the pad.
    assert {kind for kind, _ in DEFAULT_PLAN} == {VERBATIM, ALIGNED, UNCOMPRESSED}
    assert all(size % FRAME for _, size in DEFAULT_PLAN)
    assert any(kind == UNCOMPRESSED and size % 2 for kind, size in DEFAULT_PLAN)


@needs_cabextract
@pytest.mark.parametrize(
    "plan",
    [((UNCOMPRESSED, 40_001), (ALIGNED, 30_000)), ((ALIGNED, 5_000), (VERBATIM, 200))],
    ids=["uncompressed-first", "small-blocks"],
)
def test_other_block_plans_and_no_e8(plan: tuple[tuple[int, int], ...], tmp_path: Path) -> None:
    data = pdbs()[:150_000]
    packed = cabinet(tmp_path, data, 16, plan=plan, e8=False)
    extracted = subprocess.run([CABEXTRACT, "-q", "-p", str(packed)], capture_output=True)
    assert extracted.stdout == data
    assert decode(packed, tmp_path) == data


def test_the_file_starts_past_the_folder_start_and_the_cap_holds(tmp_path: Path) -> None:
    data = words(80_000)
    raw = bytearray(write_cab("in.pdb", data, 16))
    files_at = struct.unpack_from("<I", raw, 16)[0]
    struct.pack_into("<II", raw, files_at, 30_000, 40_000)  # cbFile, uoffFolderStart
    packed = tmp_path / "in.pd_"
    packed.write_bytes(bytes(raw))
    assert decode(packed, tmp_path) == data[40_000:70_000]
    with pytest.raises(cab.CabError, match="limit"):
        decode(packed, tmp_path, max_bytes=29_999)


@pytest.mark.parametrize("window_bits", [14, 22])
def test_a_window_outside_the_cabinet_profile_is_refused(window_bits: int, tmp_path: Path) -> None:
    raw = bytearray(write_cab("in.pdb", b"abc" * 100, 15))
    struct.pack_into("<H", raw, FOLDER_AT + 6, cab.COMPRESSION_LZX | window_bits << 8)
    packed = tmp_path / "in.pd_"
    packed.write_bytes(bytes(raw))
    with pytest.raises(cab.CabError, match=f"2\\^{window_bits} bytes"):
        decode(packed, tmp_path)


def stream(build: object) -> bytes:
    """A one-frame stream: no E8 flag, then whatever `build(encoder)` writes, realigned."""
    encoder = Encoder(15, lzx.POSITION_SLOTS[15])
    encoder.writer.bits(0, 1)
    build(encoder)  # type: ignore[operator]
    encoder.writer.align()
    return b"".join(encoder.writer.chunks) + bytes(encoder.writer.out)


def pretree_header(lengths: list[int]) -> object:
    def build(encoder: Encoder) -> None:
        encoder.header(VERBATIM, 100)
        for n in lengths:
            encoder.writer.bits(n, 4)

    return build


def short_stored_block(encoder: Encoder) -> None:
    """An uncompressed block that claims 80 bytes and holds 50."""
    encoder.header(UNCOMPRESSED, 80)
    encoder.writer.bits(0, 16 - encoder.writer.count)
    encoder.writer.raw(struct.pack("<3I", 1, 1, 1) + b"x" * 50)


@pytest.mark.parametrize(
    ("build", "size", "message"),
    [
        (lambda e: e.header(5, 100), 100, "block type 5"),
        (lambda e: e.header(0, 100), 100, "block type 0"),
        (pretree_header([1] * 20), 100, "over-subscribed"),
        (pretree_header([1] + [0] * 19), 100, "incomplete"),
        (pretree_header([0] * 20), 100, "incomplete"),
        (lambda e: e.compressed(VERBATIM, [65, (5, 100)]), 6, "before the start"),
        (lambda e: e.compressed(VERBATIM, [66] * (FRAME - 1) + [(4, 1)]), FRAME, "past the end"),
        (lambda e: e.compressed(VERBATIM, [67, 68, (3, 2)]), 4, "past the end"),
        (short_stored_block, 80, "ends inside an uncompressed block"),
        (lambda e: e.compressed(VERBATIM, [69] * 10), 11, "ends inside a frame"),
    ],
)
def test_malformed_streams_are_refused_by_name(build: object, size: int, message: str) -> None:
    with pytest.raises(lzx.LzxError, match=message):
        lzx.Decoder(15).frame(stream(build), size)


def test_a_frame_must_not_run_past_its_data_block() -> None:
    data = stream(lambda e: e.compressed(VERBATIM, [70] * 4000))
    with pytest.raises(lzx.LzxError, match="ends inside a frame"):
        lzx.Decoder(15).frame(data[: len(data) // 2], 4000)


def test_only_the_last_frame_may_be_short() -> None:
    decoder = lzx.Decoder(15)
    assert decoder.frame(stream(lambda e: e.uncompressed(b"ab" * 50)), 100) == b"ab" * 50
    with pytest.raises(lzx.LzxError, match="follows a frame shorter"):
        decoder.frame(b"\0\0", 100)


def test_an_empty_length_tree_is_allowed() -> None:
    # Literals only: the encoder leaves the length tree all zero, which the format allows.
    data = stream(lambda e: e.compressed(VERBATIM, list(b"no long matches here")))
    decoder = lzx.Decoder(15)
    assert decoder.frame(data, 20) == b"no long matches here"
    assert decoder.length_table[0] == (lzx.EMPTY_TREE_LENGTH, 0)


def test_mutated_and_truncated_cabinets_raise_cab_error_only(tmp_path: Path) -> None:
    data = pdbs()[:120_000] + x86_like(30_000)
    original = write_cab("in.pdb", data, 16, checksums=False)
    data_at = struct.unpack_from("<I", original, FOLDER_AT)[0]
    rng = random.Random(23)

    def damage(damaged: bytearray, round_: int) -> None:
        if round_ % 4 == 0:
            del damaged[rng.randrange(data_at, len(damaged)) :]
        elif round_ % 4 == 1:  # a data block shortened: the stream loses its tail
            struct.pack_into("<H", damaged, data_at + 4, rng.randrange(1, 200))
        else:
            for _ in range(rng.randrange(1, 4)):
                damaged[rng.randrange(data_at, len(damaged))] ^= 1 << rng.randrange(8)

    results = unpack_damaged(original, damage, rounds=120, folder=tmp_path, max_bytes=len(data))
    sizes = {r for r in results if isinstance(r, int)}
    reasons = {str(r).split(": ", 2)[1] for r in results if isinstance(r, cab.CabError)}
    assert sizes == {len(data)}  # some unpacked, and each whole
    assert "LZX data is damaged" in reasons
