"""Property lists a hostile store or helper may hand over."""

from __future__ import annotations

import struct


def deep_binary_plist(depth: int) -> bytes:
    """A binary plist of `depth` arrays, each holding the next: a few bytes per level, and
    past the depth plistlib's recursive binary reader can follow (plistlib cannot write
    one: it recurses too)."""
    objects = [bytes([0xA1]) + struct.pack(">H", i + 1) for i in range(depth)] + [b"\xa0"]
    offsets, position = [], 8
    for item in objects:
        offsets.append(position)
        position += len(item)
    table = b"".join(struct.pack(">I", offset) for offset in offsets)
    trailer = struct.pack(">6xBBQQQ", 4, 2, len(objects), 0, position)
    return b"bplist00" + b"".join(objects) + table + trailer
