"""Hypothesis settings and byte-level mutation strategies shared by the property suites."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# CI (CI=true) runs the short, fixed form; a developer's run explores LOCAL_FACTOR times more.
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
LOCAL_FACTOR = 2

# Byte and word values that sit on the edges readers get wrong: sign bits, all-ones,
# page and header sizes, and the magic numbers themselves.
EDGE_BYTES = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]
EDGE_WORDS = [
    0,
    1,
    2,
    4,
    8,
    0x1B,  # LC_UUID
    0x18,  # sizeof(uuid_command)
    32,
    33,
    0x1000,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    0xCAFE_BABE,
    0xFEED_FACF,
]
EDGE_QWORDS = [0, 1 << 32, (1 << 32) + 1, 1 << 63, (1 << 64) - 1]


def property_settings(examples: int) -> settings:
    """`examples` in CI, more locally; deterministic, no example database, our own time bound."""
    return settings(
        max_examples=examples if IN_CI else examples * LOCAL_FACTOR,
        derandomize=True,
        database=None,
        deadline=None,  # targets.bounded applies MAX_SECONDS, with one re-measure
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes], focus: int = 4096) -> bytes:
    """A seed with a few edits, most of them in its first `focus` bytes, where headers live."""
    data = bytearray(draw(st.sampled_from(seeds), label="seed"))
    for _ in range(draw(st.integers(1, 6), label="edits")):
        end = max(1, min(len(data), focus))
        at = draw(st.integers(0, end - 1) | st.integers(0, max(0, len(data) - 1)), label="at")
        kind = draw(st.sampled_from(["byte", "word", "qword", "insert", "delete", "truncate"]))
        if kind == "byte":
            value = draw(st.sampled_from(EDGE_BYTES) | st.integers(0, 255))
            data[at : at + 1] = bytes([value])
        elif kind in ("word", "qword"):
            width, values = (4, EDGE_WORDS) if kind == "word" else (8, EDGE_QWORDS)
            value = draw(st.sampled_from(values) | st.integers(0, 2 ** (8 * width) - 1))
            order = draw(st.sampled_from("<>"))
            data[at : at + width] = value.to_bytes(width, "little" if order == "<" else "big")
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            del data[at:]
    return bytes(data)
