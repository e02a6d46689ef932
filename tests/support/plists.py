"""Property lists a hostile store, helper or bundle may hand over."""

from __future__ import annotations

import plistlib
import struct

# A binary plist's trailer: offsets of 4 bytes, references of 2 (binary_plist's objects).
_OFFSET_SIZE, _REF_SIZE = 4, 2


def binary_plist(objects: list[bytes]) -> bytes:
    """A binary plist of `objects`, each encoded with its marker byte, the first the top;
    references are 2-byte indexes (ref()). plistlib cannot write the crafted ones: it
    recurses, and it never shares a container or makes one hold itself."""
    offsets, position = [], 8
    for item in objects:
        offsets.append(position)
        position += len(item)
    table = b"".join(struct.pack(">I", offset) for offset in offsets)
    trailer = struct.pack(">6xBBQQQ", _OFFSET_SIZE, _REF_SIZE, len(objects), 0, position)
    return b"bplist00" + b"".join(objects) + table + trailer


def ref(index: int) -> bytes:
    return struct.pack(">H", index)


def deep_binary_plist(depth: int) -> bytes:
    """A binary plist of `depth` arrays, each holding the next: a few bytes per level, and
    past the depth plistlib's recursive binary reader can follow."""
    return binary_plist([b"\xa1" + ref(i + 1) for i in range(depth)] + [b"\xa0"])


def xml_plist(
    body: bytes, *, declaration: bytes = b'<?xml version="1.0" encoding="UTF-8"?>'
) -> bytes:
    return declaration + b'\n<plist version="1.0">\n' + body + b"\n</plist>\n"


def poisoned(value: bytes) -> bytes:
    """A per-UUID plist whose dictionary is sound but for one value."""
    return xml_plist(
        b"<dict><key>DBGVersion</key><string>3</string><key>DBGPoison</key>" + value + b"</dict>"
    )


# Each one made plistlib raise something other than InvalidFileException, or return what
# a writer or a walk of the value fails on; the reader must call all of them unreadable.
POISONS = {
    "date": poisoned(b"<date>x</date>"),  # AttributeError
    "base64": poisoned(b"<data>a</data>"),  # binascii.Error
    "digits": poisoned(b"<integer>" + b"9" * 5000 + b"</integer>"),  # int()'s digit limit
    "wide-integer": poisoned(b"<integer>18446744073709551616</integer>"),  # OverflowError to write
    "xml-nesting": poisoned(b"<array>" * 2000 + b"</array>" * 2000),  # RecursionError to write
    "binary-nesting": deep_binary_plist(5000),  # RecursionError
    "binary-cut": plistlib.dumps({"DBGVersion": "3"}, fmt=plistlib.FMT_BINARY)[:-9],
    "stray-key": xml_plist(b"<key>DBGVersion</key>"),  # IndexError
    "not-text-codec": xml_plist(b"<dict/>", declaration=b'<?xml version="1.0" encoding="rot13"?>'),
    "mismatched-tag": poisoned(b"<string>x</strin>"),  # ExpatError
    "self-holding": binary_plist([b"\xd1" + ref(1) + ref(0), b"\x51a"]),  # a dict in itself
    # 48 levels of two references to the next: 2**48 values in a few hundred bytes.
    "expansion": binary_plist([b"\xa2" + ref(i + 1) * 2 for i in range(48)] + [b"\x09"]),
    # One string of 16 KiB, 2000 times: 32 MiB once written out, from 20 KiB.
    "repeated-string": binary_plist(
        [b"\xaf\x11\x07\xd0" + ref(1) * 2000, b"\x5f\x11\x40\x00" + b"s" * 16384]
    ),
    "null": binary_plist([b"\xd1" + ref(1) + ref(2), b"\x51a", b"\x00"]),  # TypeError to write
}
