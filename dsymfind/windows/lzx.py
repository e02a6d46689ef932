"""LZX decompression as Microsoft cabinets use it (CFFOLDER compression type 3).

The format is Microsoft's "LZX Data Compression Format" as [MS-PATCH] (LZX DELTA)
describes it, restricted to the cabinet profile: windows of 2^15..2^21 bytes, no
reference data, no DELTA extensions. The decoder is fed one CFDATA block at a time;
each holds one frame, 32 KiB of output (the last may be shorter). LZX blocks (verbatim,
aligned-offset, uncompressed) run across frames, and the Huffman code lengths and the
repeated offsets R0, R1, R2 carry over from block to block.

The input comes from the network. Every Huffman code is checked for being complete
(the length tree alone may be empty), every match for staying inside its block, its
frame and the data decoded so far, and every read for staying inside the data block.
Any input either decodes or raises LzxError; work is bounded by the input and output
sizes.

Pure Python, so the inner loop is kept tight: one list lookup decodes a Huffman symbol
(a 2^16-entry table of (symbol, length)), and the bit position indexes a precomputed
list of the 32-bit values starting at every 16-bit word, so a read needs no refill.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence

WINDOW_BITS_MIN, WINDOW_BITS_MAX = 15, 21  # the cabinet profile of LZX
FRAME_SIZE = 0x8000  # output of one CFDATA block: the unit of E8 translation and realignment
BLOCK_VERBATIM, BLOCK_ALIGNED, BLOCK_UNCOMPRESSED = 1, 2, 3
BLOCK_HEADER_BITS = 3 + 24  # block type, block size
NUM_CHARS = 256
MIN_MATCH = 2
MAX_MATCH = 257
EMPTY_TREE_LENGTH = 1 << 24  # what an empty length tree decodes to: far past MAX_MATCH
NUM_PRIMARY_LENGTHS = 7  # a length header of 7 means "the length tree says the rest"
LENGTH_ELEMENTS = 249
PRETREE_ELEMENTS = 20
ALIGNED_ELEMENTS = 8
ALIGNED_BITS = 7  # longest aligned-offset code: 3-bit length fields
MAIN_BITS = 16  # longest main-tree or length-tree code
PRETREE_BITS = 15  # longest pretree code: 4-bit length fields
POSITION_SLOTS = {15: 30, 16: 32, 17: 34, 18: 36, 19: 38, 20: 42, 21: 50}
EXTRA_BITS = [min(max(slot // 2 - 1, 0), 17) for slot in range(50)]
# Formatted offset = base + extra bits; the real offset is two less (0..2 are R0..R2).
OFFSET_BASE = [0]
for _extra in EXTRA_BITS[:-1]:
    OFFSET_BASE.append(OFFSET_BASE[-1] + (1 << _extra))
OFFSET_LESS_TWO = [base - 2 for base in OFFSET_BASE]
MASKS = [(1 << n) - 1 for n in range(33)]
# [MS-PATCH]: E8 translation covers the first 1 GiB of output and stops 10 bytes short
# of each frame's end (an E8 there could not hold a whole 4-byte operand).
E8_MAX_FRAMES = 32768
E8_TAIL = 10
# Zero bytes appended to the input so a Huffman peek near its end stays in range;
# whatever is consumed from them is refused afterwards.
INPUT_PADDING = 8
# An odd-sized uncompressed block's pad byte may end one data block and be consumed at
# the next block header; more left over means the data blocks are not one frame each.
MAX_CARRY_BYTES = 2

_Table = list[tuple[int, int]]


class LzxError(ValueError):
    """The LZX stream is malformed; the message says how."""


class Decoder:
    """The state of one LZX stream (one cabinet folder), decoded frame by frame."""

    def __init__(self, window_bits: int) -> None:
        if not WINDOW_BITS_MIN <= window_bits <= WINDOW_BITS_MAX:
            raise LzxError(
                f"window of 2^{window_bits} bytes, outside 2^{WINDOW_BITS_MIN}..2^{WINDOW_BITS_MAX}"
            )
        self.window_size = 1 << window_bits
        self.window = bytearray(self.window_size)
        slots = POSITION_SLOTS[window_bits]
        self.main_lengths = [0] * (NUM_CHARS + 8 * slots)
        self.length_lengths = [0] * LENGTH_ELEMENTS
        self.main_table: _Table = []
        self.length_table: _Table = []
        self.aligned_table: _Table = []
        self.repeats = [1, 1, 1]  # R0, R1, R2
        self.block_type = 0  # none yet
        self.block_size = 0
        self.block_left = 0
        self.pos = 0  # where the next byte goes in the window
        self.wrapped = False  # the window has been filled once: every offset is in reach
        self.output_total = 0  # bytes of output so far: E8 translation's positions
        self.frames = 0
        self.short_frame_seen = False
        self.translation_size: int | None = None  # None until the stream header is read
        self.translate = False
        self.data = b""  # this frame's input (a carried tail, then the data block)
        self.pairs: list[int] = []
        self.bp = 0  # bit position in self.data
        self.carry = b""
        self.carry_bits = 0

    def frame(self, packed: bytes, size: int) -> bytes:
        """Decode one data block's frame of `size` bytes of output."""
        if not 0 < size <= FRAME_SIZE:
            raise LzxError(f"a frame of {size} bytes (1..{FRAME_SIZE})")
        if self.short_frame_seen:
            raise LzxError("a frame follows a frame shorter than 32 KiB")
        self.short_frame_seen = size < FRAME_SIZE
        self._take_input(packed)
        start = self.pos
        try:
            if self.translation_size is None:
                self._stream_header()
            self._fill(start + size)
        except IndexError:
            raise LzxError("the compressed data ends inside a frame") from None
        self._end_input()
        output = self.window[start : start + size]
        if self.translate and self.frames < E8_MAX_FRAMES:
            _untranslate(output, self.output_total, self.translation_size or 0)
        self.frames += 1
        self.output_total += size
        if self.pos == self.window_size:
            self.pos, self.wrapped = 0, True
        return bytes(output)

    # --- input ----------------------------------------------------------------------

    def _take_input(self, packed: bytes) -> None:
        self.data = self.carry + packed
        self.pairs = _pairs(self.data)
        self.bp = self.carry_bits

    def _end_input(self) -> None:
        """Realign after the frame and keep what the next frame starts with."""
        if self.block_type != BLOCK_UNCOMPRESSED:
            # [MS-PATCH]: each frame's bits are padded to a 16-bit boundary.
            self.bp = (self.bp + 15) & ~15
        if self.bp > 8 * len(self.data):
            raise LzxError("a frame's compressed data runs past its data block")
        keep_from = (self.bp >> 4) << 1  # whole 16-bit words: the word grid stays put
        self.carry = self.data[keep_from:]
        self.carry_bits = self.bp - 8 * keep_from
        if len(self.carry) > MAX_CARRY_BYTES:
            raise LzxError(f"{len(self.carry)} bytes of a data block lie past its frame")

    def _bits(self, count: int) -> int:
        """The next `count` (0..17) bits, most significant first."""
        bp = self.bp
        self.bp = bp + count
        return (self.pairs[bp >> 4] >> (32 - (bp & 15) - count)) & MASKS[count]

    def _symbol(self, table: _Table, bits: int) -> int:
        bp = self.bp
        symbol, length = table[(self.pairs[bp >> 4] >> (32 - bits - (bp & 15))) & MASKS[bits]]
        self.bp = bp + length
        return symbol

    # --- headers and trees ------------------------------------------------------------

    def _stream_header(self) -> None:
        """The E8 translation flag, and the translation size when it is set."""
        self.translate = self._bits(1) == 1
        self.translation_size = self._bits(16) << 16 | self._bits(16) if self.translate else 0

    def _fill(self, end: int) -> None:
        if end > self.window_size:
            raise LzxError("a frame would run past the end of the window")
        while self.pos < end:
            if self.block_left == 0:
                self._block_header()
            run_end = self.pos + min(self.block_left, end - self.pos)
            self.block_left -= run_end - self.pos
            if self.block_type == BLOCK_UNCOMPRESSED:
                self._copy_stored(run_end)
            else:
                self._decode(run_end)

    def _block_header(self) -> None:
        if self.block_type == BLOCK_UNCOMPRESSED and self.block_size & 1:
            self.bp += 8  # the pad byte after an odd-sized uncompressed block
        if 8 * len(self.data) - self.bp < BLOCK_HEADER_BITS:
            raise LzxError("the compressed data ends inside a frame")
        block_type = self._bits(3)
        size = self._bits(16) << 8 | self._bits(8)
        if block_type == BLOCK_ALIGNED:
            lengths = [self._bits(3) for _ in range(ALIGNED_ELEMENTS)]
            self.aligned_table = _table(lengths, ALIGNED_BITS, "aligned-offset")
        if block_type in (BLOCK_VERBATIM, BLOCK_ALIGNED):
            self._read_lengths(self.main_lengths, 0, NUM_CHARS)
            self._read_lengths(self.main_lengths, NUM_CHARS, len(self.main_lengths))
            self.main_table = _table(self.main_lengths, MAIN_BITS, "main")
            self._read_lengths(self.length_lengths, 0, LENGTH_ELEMENTS)
            self.length_table = _table(self.length_lengths, MAIN_BITS, "length", may_be_empty=True)
        elif block_type == BLOCK_UNCOMPRESSED:
            self._stored_header()
        else:
            raise LzxError(f"block type {block_type} (1..3 are LZX block types)")
        self.block_type, self.block_size, self.block_left = block_type, size, size

    def _read_lengths(self, lengths: list[int], first: int, end: int) -> None:
        """Code lengths for lengths[first:end], coded by a pretree as changes to the last ones."""
        pretree = _table([self._bits(4) for _ in range(PRETREE_ELEMENTS)], PRETREE_BITS, "pretree")
        at = first
        while at < end:
            code = self._symbol(pretree, PRETREE_BITS)
            if code <= 16:
                lengths[at] = (lengths[at] - code) % 17
                at += 1
                continue
            if code == 17:
                run, value = 4 + self._bits(4), 0
            elif code == 18:
                run, value = 20 + self._bits(5), 0
            else:  # 19: a short run of one length, itself coded as a change
                run, same = 4 + self._bits(1), self._symbol(pretree, PRETREE_BITS)
                if same > 16:
                    raise LzxError(f"pretree code {same} where a length change must follow")
                value = (lengths[at] - same) % 17
            if run > end - at:
                raise LzxError("a run of code lengths overruns its tree")
            lengths[at : at + run] = [value] * run
            at += run

    def _stored_header(self) -> None:
        """Realign (1..16 bits of padding), then R0, R1, R2 as 32-bit little-endian."""
        self.bp = (self.bp & ~15) + 16
        at = self.bp >> 3
        if len(self.data) - at < 12:
            raise LzxError("the compressed data ends inside an uncompressed block header")
        self.repeats = list(struct.unpack_from("<3I", self.data, at))
        self.bp += 96

    # --- output -----------------------------------------------------------------------

    def _copy_stored(self, end: int) -> None:
        at, count = self.bp >> 3, end - self.pos
        if len(self.data) - at < count:
            raise LzxError("the compressed data ends inside an uncompressed block")
        self.window[self.pos : end] = self.data[at : at + count]
        self.bp += 8 * count
        self.pos = end

    def _decode(self, end: int) -> None:
        """Decode symbols of a verbatim or aligned block until the window reaches `end`."""
        window, pairs, bp, pos = self.window, self.pairs, self.bp, self.pos
        main, lengths, aligned = self.main_table, self.length_table, self.aligned_table
        use_aligned = self.block_type == BLOCK_ALIGNED
        r0, r1, r2 = self.repeats
        extra_bits, less_two, masks = EXTRA_BITS, OFFSET_LESS_TWO, MASKS
        while pos < end:
            symbol, used = main[(pairs[bp >> 4] >> (16 - (bp & 15))) & 0xFFFF]
            bp += used
            if symbol < NUM_CHARS:
                window[pos] = symbol
                pos += 1
                continue
            symbol -= NUM_CHARS
            length = symbol & 7
            if length == NUM_PRIMARY_LENGTHS:
                length, used = lengths[(pairs[bp >> 4] >> (16 - (bp & 15))) & 0xFFFF]
                bp += used
                length += NUM_PRIMARY_LENGTHS + MIN_MATCH
            else:
                length += MIN_MATCH
            slot = symbol >> 3
            if slot == 0:
                offset = r0
            elif slot == 1:
                offset, r1, r0 = r1, r0, r1
            elif slot == 2:
                offset, r2, r0 = r2, r0, r2
            else:
                extra = extra_bits[slot]
                if use_aligned and extra >= 3:
                    extra -= 3
                    high = (pairs[bp >> 4] >> (32 - (bp & 15) - extra)) & masks[extra]
                    bp += extra
                    low, used = aligned[(pairs[bp >> 4] >> (25 - (bp & 15))) & 0x7F]
                    bp += used
                    offset = less_two[slot] + (high << 3) + low
                else:
                    offset = less_two[slot] + (
                        (pairs[bp >> 4] >> (32 - (bp & 15) - extra)) & masks[extra]
                    )
                    bp += extra
                r0, r1, r2 = offset, r0, r1
            copied_from = pos - offset
            if copied_from >= 0 and offset >= length and length <= end - pos:
                window[pos : pos + length] = window[copied_from : copied_from + length]
            else:
                self._check_match(pos, end, offset, length)
                self._copy_slowly(pos, copied_from, length)
            pos += length
        self.bp, self.pos = bp, pos
        self.repeats = [r0, r1, r2]

    def _check_match(self, pos: int, end: int, offset: int, length: int) -> None:
        if length > MAX_MATCH:
            raise LzxError("a match needs the length tree, which this block left empty")
        if length > end - pos:
            raise LzxError("a match runs past the end of its block or frame")
        if not 0 < offset <= self.window_size - 3:
            raise LzxError(f"match offset {offset} outside 1..window size - 3")
        if offset > pos and not self.wrapped:
            raise LzxError("a match reaches back before the start of the data")

    def _copy_slowly(self, pos: int, copied_from: int, length: int) -> None:
        """A match overlapping its own output, or wrapping round the window."""
        window = self.window
        if copied_from >= 0:  # overlapping: the last `offset` bytes repeat
            pattern = window[copied_from:pos]
            window[pos : pos + length] = (pattern * (length // len(pattern) + 1))[:length]
            return
        mask = self.window_size - 1
        for i in range(length):  # at most MAX_MATCH bytes, and only just after a wrap
            window[pos + i] = window[(copied_from + i) & mask]


def _table(lengths: Sequence[int], bits: int, name: str, *, may_be_empty: bool = False) -> _Table:
    """The decoding table of a canonical Huffman code: entry = (symbol, code length).

    Indexed by the next `bits` bits; codes are assigned shortest first, then by symbol.
    """
    used = sorted((length, symbol) for symbol, length in enumerate(lengths) if length)
    if not used and may_be_empty:
        # Every entry consumes no bits and yields a length no match can have: the first
        # use of an empty length tree is refused by the match check.
        return [(EMPTY_TREE_LENGTH, 0)] * (1 << bits)
    space = sum(1 << (bits - length) for length, _ in used)
    if space > 1 << bits:
        raise LzxError(f"the {name} tree's code lengths are over-subscribed")
    if space < 1 << bits:
        raise LzxError(f"the {name} tree's code lengths are incomplete")
    table: _Table = [(0, 0)] * (1 << bits)
    at = 0
    for length, symbol in used:
        span = 1 << (bits - length)
        table[at : at + span] = [(symbol, length)] * span
        at += span
    return table


def _pairs(data: bytes) -> list[int]:
    """For each 16-bit little-endian word of `data`, it and the next as one 32-bit number.

    LZX reads bits most significant first from little-endian 16-bit words, so entry i
    holds bits 16*i .. 16*i+31 of the stream.
    """
    padded = data + bytes(INPUT_PADDING + (len(data) & 1))
    words = array("H", padded)
    if sys.byteorder == "little":
        words.byteswap()  # the stream as big-endian words: bit order = byte order
    stream = words.tobytes()
    count = len(words)
    even = array("I", stream[: 4 * (count // 2)])
    odd = array("I", stream[2 : 2 + 4 * ((count - 1) // 2)])
    if sys.byteorder == "little":
        even.byteswap()
        odd.byteswap()
    pairs = [0] * (count - 1)
    pairs[0::2] = even
    pairs[1::2] = odd
    return pairs


def _untranslate(frame: bytearray, at: int, translation_size: int) -> None:
    """Undo the E8 call translation: absolute call targets back to relative ones."""
    limit = len(frame) - E8_TAIL
    i = frame.find(0xE8, 0, limit) if limit > 0 else -1
    while i >= 0:
        value = int.from_bytes(frame[i + 1 : i + 5], "little", signed=True)
        here = at + i
        if -here <= value < translation_size:
            value = value - here if value >= 0 else value + translation_size
            frame[i + 1 : i + 5] = (value & 0xFFFFFFFF).to_bytes(4, "little")
        i = frame.find(0xE8, i + 5, limit)
