"""Which address of a frame is looked up (docs/symbolicate.md, "Address rules").

Frame 0 of a thread is the pc: the instruction that was running, looked up as it is.
Every other frame holds a return address, the instruction after a call; the call is
what the frame was doing, and for a call at the end of a function (or of an inlined
range) the return address already belongs to the next one. So the lookup goes back
into the call instruction: 4 bytes on arm64 (fixed-width instructions: the call itself),
1 byte elsewhere (x86_64's variable-length calls: some byte of it). What is shown as
the offset into the function (symbolLocation, `+ 20`) stays Apple's: from the return
address.
"""

from __future__ import annotations

ARM_INSTRUCTION_BYTES = 4
# Any byte of a variable-length call instruction is inside it.
OTHER_CALL_BACKSTEP = 1
# Architectures whose instructions are all 4 bytes (a report's `arch` spelling).
FIXED_WIDTH_ARCHES = frozenset({"arm64", "arm64e", "arm64_32", "armv7k", "arm64-v8"})


def return_address_step(arch: str) -> int:
    """How far before a return address its call is looked up, in an image of `arch`:
    asked once per image, not per frame."""
    return ARM_INSTRUCTION_BYTES if arch.lower() in FIXED_WIDTH_ARCHES else OTHER_CALL_BACKSTEP


def lookup_offset(offset: int, position: int, step: int) -> int | None:
    """The image offset to look up for a frame at `position` in its thread, `step` the
    image's return_address_step; None when the frame cannot be in any function (a
    return address at offset 0)."""
    if position == 0:
        return offset
    return offset - step if offset >= step else None
