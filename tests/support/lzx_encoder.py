"""A small LZX encoder and cabinet writer, for tests only: LZX `.pd_` files without Microsoft's tools.

Greedy matching over a hash chain, a caller-chosen plan of verbatim, aligned-offset and
uncompressed blocks (blocks run across 32 KiB frames and so across CFDATA blocks), the
repeated offsets R0..R2, pretree-coded code lengths as changes to the previous block's,
and the E8 call translation. Written from [MS-PATCH]'s LZX description and MS-CAB;
tests check that Debian's cabextract (libmspack) decodes what it writes.

`python tests/support/lzx_encoder.py [MB]` measures the decoder on a PDB-like cabinet.
"""

from __future__ import annotations

import heapq
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from dsymfind.windows import cab, lzx

VERBATIM, ALIGNED, UNCOMPRESSED = lzx.BLOCK_VERBATIM, lzx.BLOCK_ALIGNED, lzx.BLOCK_UNCOMPRESSED
FRAME = lzx.FRAME_SIZE
MIN_MATCH = 3  # what the hash finds; LZX allows 2
MAX_MATCH = lzx.MAX_MATCH
CHAIN_TRIES = 12
DEFAULT_PLAN = ((VERBATIM, 45_000), (ALIGNED, 70_001), (UNCOMPRESSED, 33_333), (VERBATIM, 90_000))
TRANSLATION_SIZE = 12_000_000

Token = int | tuple[int, int]  # a literal byte, or (length, offset)


class BitWriter:
    """Bits most significant first into 16-bit little-endian words, cut into frame chunks."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.count = 0
        self.chunks: list[bytes] = []

    def bits(self, value: int, count: int) -> None:
        assert 0 <= value < 1 << count or count == 0
        self.acc = self.acc << count | value
        self.count += count
        while self.count >= 16:
            self.count -= 16
            self.out += (self.acc >> self.count).to_bytes(2, "little")
            self.acc &= (1 << self.count) - 1

    def align(self) -> None:
        if self.count:
            self.bits(0, 16 - self.count)

    def raw(self, data: bytes) -> None:
        assert self.count == 0
        self.out += data

    def cut(self) -> None:
        self.chunks.append(bytes(self.out))
        self.out.clear()


def huffman_lengths(freqs: Sequence[int], limit: int) -> list[int]:
    """Code lengths of a complete code no longer than `limit`; at least two symbols get one."""
    freqs = list(freqs)
    used = [s for s, f in enumerate(freqs) if f]
    if len(used) < 2:
        for s in range(len(freqs)):
            if len(used) >= 2:
                break
            if s not in used:
                used.append(s)
                freqs[s] = 1
    while True:
        lengths = _lengths(freqs)
        if max(lengths) <= limit:
            return lengths
        freqs = [(f + 1) // 2 if f else 0 for f in freqs]


def _lengths(freqs: Sequence[int]) -> list[int]:
    heap = [(f, s, (s,)) for s, f in enumerate(freqs) if f]
    heapq.heapify(heap)
    lengths = [0] * len(freqs)
    tie = len(freqs)
    while len(heap) > 1:
        fa, _, a = heapq.heappop(heap)
        fb, _, b = heapq.heappop(heap)
        for s in a + b:
            lengths[s] += 1
        heapq.heappush(heap, (fa + fb, tie, a + b))
        tie += 1
    return lengths


def canonical_codes(lengths: Sequence[int]) -> list[int]:
    codes = [0] * len(lengths)
    code = 0
    for length, symbol in sorted((n, s) for s, n in enumerate(lengths) if n):
        codes[symbol] = code >> (32 - length)
        code += 1 << (32 - length)
    return codes


def translate_e8(data: bytes) -> bytes:
    """The encoder's side of the E8 call translation, frame by frame."""
    out = bytearray(data)
    for start in range(0, len(out), FRAME):
        end = min(start + FRAME, len(out))
        i, limit = start, end - lzx.E8_TAIL
        while i < limit:
            if out[i] == 0xE8:
                here = i
                value = int.from_bytes(out[i + 1 : i + 5], "little", signed=True)
                if -here <= value < TRANSLATION_SIZE:
                    value = (
                        value + here
                        if value < TRANSLATION_SIZE - here
                        else value - TRANSLATION_SIZE
                    )
                    out[i + 1 : i + 5] = (value & 0xFFFFFFFF).to_bytes(4, "little")
                i += 5
            else:
                i += 1
    return bytes(out)


class Matcher:
    """Greedy longest matches over a hash chain, within one region, inside the window."""

    def __init__(self, data: bytes, window_bits: int) -> None:
        self.data = data
        self.max_offset = (1 << window_bits) - 3
        self.heads: dict[bytes, int] = {}
        self.prev: dict[int, int] = {}
        self.inserted = 0

    def _insert_to(self, end: int) -> None:
        data = self.data
        for i in range(self.inserted, min(end, len(data) - 2)):
            key = data[i : i + 3]
            old = self.heads.get(key)
            if old is not None:
                self.prev[i] = old
            self.heads[key] = i
        self.inserted = max(self.inserted, end)

    def tokens(self, start: int, end: int) -> Iterator[Token]:
        data, i = self.data, start
        while i < end:
            self._insert_to(i)
            limit = min(MAX_MATCH, end - i, FRAME - i % FRAME)
            best, best_offset = 0, 0
            if limit >= MIN_MATCH:
                candidate = self.heads.get(data[i : i + 3])
                for _ in range(CHAIN_TRIES):
                    if candidate is None or i - candidate > self.max_offset:
                        break
                    length = _common(data, candidate, i, limit)
                    if length > best:
                        best, best_offset = length, i - candidate
                    candidate = self.prev.get(candidate)
            if best >= MIN_MATCH:
                yield (best, best_offset)
                i += best
            else:
                yield data[i]
                i += 1


def _common(data: bytes, a: int, b: int, limit: int) -> int:
    n = 0
    while n + 16 <= limit and data[a + n : a + n + 16] == data[b + n : b + n + 16]:
        n += 16
    while n < limit and data[a + n] == data[b + n]:
        n += 1
    return n


def _slot(formatted: int) -> int:
    slot = 0
    while slot + 1 < len(lzx.OFFSET_BASE) and lzx.OFFSET_BASE[slot + 1] <= formatted:
        slot += 1
    return slot


class Encoder:
    """One LZX stream: the state that carries over between blocks."""

    def __init__(self, window_bits: int, slots: int) -> None:
        self.window_bits = window_bits
        self.main_elements = 256 + 8 * slots
        self.main_lengths = [0] * self.main_elements
        self.length_lengths = [0] * lzx.LENGTH_ELEMENTS
        self.repeats = [1, 1, 1]
        self.writer = BitWriter()
        self.pos = 0

    def advance(self, count: int) -> None:
        """Count output bytes; at each frame's end, realign and cut a chunk."""
        self.pos += count
        if self.pos % FRAME == 0:
            self.writer.align()
            self.writer.cut()

    def header(self, block_type: int, size: int) -> None:
        self.writer.bits(block_type, 3)
        self.writer.bits(size >> 8, 16)
        self.writer.bits(size & 0xFF, 8)

    def uncompressed(self, data: bytes) -> None:
        w = self.writer
        self.header(UNCOMPRESSED, len(data))
        w.bits(0, 16 - w.count)  # 1..16 bits: a whole word when already aligned
        w.raw(struct.pack("<3I", *self.repeats))
        at = 0
        while at < len(data):
            take = min(len(data) - at, FRAME - self.pos % FRAME)
            w.raw(data[at : at + take])
            if at + take == len(data) and len(data) & 1:
                w.raw(b"\0")  # pad byte, before the frame's cut: it rides in this chunk
            at += take
            self.advance(take)

    def compressed(self, block_type: int, tokens: Sequence[Token]) -> None:
        symbols = list(self._symbols(tokens, aligned=block_type == ALIGNED))
        main_freq = [0] * self.main_elements
        length_freq = [0] * lzx.LENGTH_ELEMENTS
        aligned_freq = [0] * 8
        for main, length_sym, _, _, aligned in symbols:
            main_freq[main] += 1
            if length_sym >= 0:
                length_freq[length_sym] += 1
            if aligned >= 0:
                aligned_freq[aligned] += 1
        main_lengths = huffman_lengths(main_freq, 16)
        # A block without long matches leaves the length tree empty, as the format allows.
        length_lengths = huffman_lengths(length_freq, 16) if any(length_freq) else [0] * 249
        size = sum(1 if isinstance(t, int) else t[0] for t in tokens)
        self.header(block_type, size)
        if block_type == ALIGNED:
            aligned_lengths = huffman_lengths([f or 1 for f in aligned_freq], 7)
            for n in aligned_lengths:
                self.writer.bits(n, 3)
            aligned_codes = canonical_codes(aligned_lengths)
        self._tree(self.main_lengths, main_lengths, 0, 256)
        self._tree(self.main_lengths, main_lengths, 256, self.main_elements)
        self._tree(self.length_lengths, length_lengths, 0, lzx.LENGTH_ELEMENTS)
        self.main_lengths, self.length_lengths = main_lengths, length_lengths
        main_codes, length_codes = canonical_codes(main_lengths), canonical_codes(length_lengths)
        w = self.writer
        for token, (main, length_sym, extra, extra_bits, aligned) in zip(
            tokens, symbols, strict=True
        ):
            w.bits(main_codes[main], main_lengths[main])
            if length_sym >= 0:
                w.bits(length_codes[length_sym], length_lengths[length_sym])
            w.bits(extra, extra_bits)
            if aligned >= 0:
                w.bits(aligned_codes[aligned], aligned_lengths[aligned])
            self.advance(1 if isinstance(token, int) else token[0])

    def _symbols(
        self, tokens: Iterable[Token], *, aligned: bool
    ) -> Iterator[tuple[int, int, int, int, int]]:
        """(main symbol, length symbol or -1, extra bits, their count, aligned symbol or -1)."""
        r = self.repeats
        for token in tokens:
            if isinstance(token, int):
                yield token, -1, 0, 0, -1
                continue
            length, offset = token
            header = min(length - 2, 7)
            length_sym = length - 9 if header == 7 else -1
            extra, extra_bits, aligned_sym = 0, 0, -1
            if offset in r:
                slot = r.index(offset)
                r[0], r[slot] = r[slot], r[0]
            else:
                formatted = offset + 2
                slot = _slot(formatted)
                extra_bits = lzx.EXTRA_BITS[slot]
                extra = formatted - lzx.OFFSET_BASE[slot]
                if aligned and extra_bits >= 3:
                    extra, aligned_sym, extra_bits = extra >> 3, extra & 7, extra_bits - 3
                r[:] = [offset, r[0], r[1]]
            yield 256 + slot * 8 + header, length_sym, extra, extra_bits, aligned_sym

    def _tree(self, old: Sequence[int], new: Sequence[int], first: int, end: int) -> None:
        """The pretree and the changes from `old` to `new` over [first, end)."""
        items: list[tuple[int, int, int]] = []  # (pretree code, extra value, extra bits)
        at = first
        while at < end:
            run = 1
            while at + run < end and new[at + run] == new[at]:
                run += 1
            if new[at] == 0 and run >= 20:
                run = min(run, 51)
                items.append((18, run - 20, 5))
            elif new[at] == 0 and run >= 4:
                run = min(run, 19)
                items.append((17, run - 4, 4))
            elif run >= 4:
                run = min(run, 5)
                items.append((19, run - 4, 1))
                items.append(((old[at] - new[at]) % 17, 0, 0))
            else:
                run = 1
                items.append(((old[at] - new[at]) % 17, 0, 0))
            at += run
        freq = [0] * 20
        for code, _, _ in items:
            freq[code] += 1
        lengths = huffman_lengths(freq, 15)
        codes = canonical_codes(lengths)
        for n in lengths:
            self.writer.bits(n, 4)
        for code, extra, bits in items:
            self.writer.bits(codes[code], lengths[code])
            self.writer.bits(extra, bits)


def encode(
    data: bytes,
    window_bits: int = 16,
    plan: Sequence[tuple[int, int]] = DEFAULT_PLAN,
    *,
    e8: bool = True,
) -> list[bytes]:
    """LZX-compress `data`: one chunk per 32 KiB frame, as CFDATA blocks hold them."""
    encoder = Encoder(window_bits, lzx.POSITION_SLOTS[window_bits])
    source = translate_e8(data) if e8 else data
    encoder.writer.bits(1 if e8 else 0, 1)
    if e8:
        encoder.writer.bits(TRANSLATION_SIZE >> 16, 16)
        encoder.writer.bits(TRANSLATION_SIZE & 0xFFFF, 16)
    matcher = Matcher(source, window_bits)
    at, step = 0, 0
    while at < len(source):
        block_type, size = plan[step % len(plan)]
        end = min(len(source), at + size)
        if block_type == UNCOMPRESSED:
            encoder.uncompressed(source[at:end])
        else:
            encoder.compressed(block_type, list(matcher.tokens(at, end)))
        at, step = end, step + 1
    if encoder.pos % FRAME:
        encoder.writer.align()
        encoder.writer.cut()
    return encoder.writer.chunks


def write_cab(
    name: str,
    data: bytes,
    window_bits: int = 16,
    plan: Sequence[tuple[int, int]] = DEFAULT_PLAN,
    *,
    e8: bool = True,
    checksums: bool = True,
) -> bytes:
    """A cabinet of one file, LZX-compressed; without checksums damage reaches the decoder."""
    chunks = encode(data, window_bits, plan, e8=e8)
    sizes = [min(FRAME, len(data) - i) for i in range(0, len(data), FRAME)]
    assert len(chunks) == len(sizes)
    file_entry = struct.pack("<IIHHHH", len(data), 0, 0, 0x5A21, 0x6000, 0x20)
    file_entry += name.encode() + b"\0"
    data_at = 36 + 8 + len(file_entry)
    blocks = b""
    for chunk, size in zip(chunks, sizes, strict=True):
        sizes_field = struct.pack("<HH", len(chunk), size)
        checksum = cab._checksum(chunk, sizes_field) if checksums else 0
        blocks += struct.pack("<I", checksum) + sizes_field + chunk
    total = data_at + len(blocks)
    header = struct.pack(
        "<4sIIIIIBBHHHHH", b"MSCF", 0, total, 0, 36 + 8, 0, 3, 1, 1, 1, 0, 0x1234, 0
    )
    folder = struct.pack("<IHH", data_at, len(chunks), cab.COMPRESSION_LZX | window_bits << 8)
    return header + folder + file_entry + blocks


def pdb_like(size: int, seed: int = 30) -> bytes:
    """PDB-like bytes: the fixture PDBs' pages lightly mutated, symbol-name text, sparse pages."""
    rng = random.Random(seed)
    fixtures = Path(__file__).parent / "fixtures" / "pe"
    pages = b"".join(p.read_bytes() for p in sorted(fixtures.glob("*.pdb")))
    names = [f"?{rng.randrange(16**6):x}@Widget{i}@@QEAAXPEBD@Z".encode() for i in range(20_000)]
    out = bytearray()
    while len(out) < size:
        kind = rng.random()
        if kind < 0.5:
            at = rng.randrange(len(pages) - FRAME)
            piece = bytearray(pages[at : at + 2 * FRAME])
            for _ in range(len(piece) // 100):
                piece[rng.randrange(len(piece))] = rng.randrange(256)
        elif kind < 0.85:
            piece = bytearray(b"\0".join(rng.choice(names) for _ in range(3000)))
        else:
            piece = bytearray(2 * FRAME)
            for _ in range(200):
                at = rng.randrange(len(piece) - 8)
                piece[at : at + 8] = rng.randbytes(8)
        out += piece
    return bytes(out[:size])


def bench(megabytes: int) -> None:
    """Time dsymfind's LZX decoding of a PDB-like cabinet (and cabextract's, when present)."""
    data = pdb_like(megabytes * 1_000_000)
    with tempfile.TemporaryDirectory() as folder:
        packed, out = Path(folder) / "x.pd_", Path(folder) / "x.pdb"
        packed.write_bytes(write_cab("x.pdb", data, 21))
        started = time.perf_counter()
        cab.extract_single(str(packed), str(out), max_bytes=len(data))
        took = time.perf_counter() - started
        assert out.read_bytes() == data
        print(f"{len(data) / 1e6:.1f} MB, packed {packed.stat().st_size / 1e6:.1f} MB: ", end="")
        print(f"dsymfind {took:.2f} s = {len(data) / 1e6 / took:.1f} MB/s", end="")
        if shutil.which("cabextract"):
            started = time.perf_counter()
            subprocess.run(["cabextract", "-q", "-p", str(packed)], check=True, capture_output=True)
            print(f"; cabextract {time.perf_counter() - started:.2f} s", end="")
        print()


if __name__ == "__main__":
    bench(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
