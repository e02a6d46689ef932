"""UUID spellings: what callers send, what keys and UUID trees use.

Imported on the helper's hot path: standard library built-ins only.
"""

_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
# DebugSymbols' file-mapped trees: the first 20 hex digits in groups of four, then the last 12.
_TREE_GROUPS = (4, 4, 4, 4, 4, 12)


def normalize_uuid(text: str) -> str | None:
    """The uppercase dashed form of a UUID given in any case, dashed or not; None if not a UUID."""
    digits = text.strip().replace("-", "")
    if len(digits) != 32 or not _HEX_DIGITS.issuperset(digits):
        return None
    return dashed(digits.upper())


def dashed(hex32: str) -> str:
    """8-4-4-4-12 grouping of 32 hex digits."""
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


def uuid_hex(uuid: str) -> str:
    """The 32 uppercase hex digits of a normalized UUID."""
    return uuid.replace("-", "")


def tree_parts(uuid: str) -> list[str]:
    """Path components of a UUID's entry in a file-mapped UUID tree."""
    digits = uuid_hex(uuid)
    parts, start = [], 0
    for width in _TREE_GROUPS:
        parts.append(digits[start : start + width])
        start += width
    return parts


def tree_entry(root: str, uuid: str) -> str:
    """The path of a UUID's entry below a file-mapped tree root."""
    return "/".join([root.rstrip("/") or "/", *tree_parts(uuid)])
