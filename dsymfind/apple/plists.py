"""Property lists from bytes that may hold anything: one reader, one error.

Every plist dsymfind reads comes through `loads`: a bundle's per-UUID plist, a store's
companion plist, a chained helper's answer, DebugSymbols' preferences. plistlib does not
answer bad bytes with one error: its XML reader lets through whatever its parts raise
(expat, int(), float(), datetime, binascii, a codec named in the XML declaration, its own
element stack), and its binary reader recurses without a bound. So what counts as
unreadable is decided here, once, and each caller keeps only its policy for it (ignored,
left out, refused, a configuration error).

A value `loads` returns is also one every writer and walker can take: only the property
list types, as an XML plist carries them (plistlib writes it back), no object that contains
itself, nested and repeated within bounds (a binary plist may refer to one object from many
places, so a few bytes could stand for more than any walk could visit).
"""

from __future__ import annotations

from dsymfind import _plist
from dsymfind.errors import DsymfindError

# No plist dsymfind reads nests more than three deep (a per-UUID plist's remapping); 64
# keeps writers and comparisons, which recurse, far from the interpreter's limit.
MAX_DEPTH = 64
# A value's size spelled out: its strings' and data's lengths, SCALAR_SIZE for any other
# value, each object counted as often as references reach it. No plist of a mebibyte (the
# most any caller reads) spells out past this without repeating objects by reference
# many times over, and every writer and walker spells the repeats out.
MAX_SPELLED_OUT_BYTES = 16 << 20
SCALAR_SIZE = 8
# plistlib writes integers in this range, and a binary plist holds no other.
INTEGER_RANGE = range(-(1 << 63), 1 << 64)
# A reason is one short line; a parser's message may quote the whole bad input.
MAX_REASON_CHARS = 160


class UnreadablePlist(DsymfindError):
    """Bytes that are no property list dsymfind can use: `reason` says why in a few words,
    the message also names where they came from when the reader knows."""

    def __init__(self, reason: str, where: str | None = None) -> None:
        self.reason = " ".join(reason.split())[:MAX_REASON_CHARS] or "no reason given"
        self.where = where
        said = f"unreadable plist: {self.reason}"
        super().__init__(said if where is None else f"{where}: {said}")


def loads(data: bytes) -> object:
    """The value of an XML or binary plist; UnreadablePlist for anything else."""
    import plistlib
    from xml.parsers.expat import ExpatError

    try:
        value = plistlib.loads(data)
    # What plistlib (Lib/plistlib.py, 3.11 to 3.13) lets through on bad bytes, and why:
    # ValueError: its InvalidFileException (an unknown header, a damaged binary plist, an
    #   entity declaration), binascii.Error (<data>), UnicodeError (a codec named in the
    #   XML declaration), int(), float() and datetime() of bad text, a misplaced element;
    # ExpatError: XML that is not well-formed (not a ValueError);
    # AttributeError: a <date> its pattern does not match (it calls .groupdict() on None);
    # TypeError: a <date> of a year alone, which its pattern lets through to datetime();
    # LookupError: a <key> outside any dict (IndexError on its empty element stack), an
    #   XML declaration naming a codec that is not a text encoding (base64, rot13);
    # RecursionError: a binary plist nested past the interpreter's limit.
    # Never MemoryError: it allocates in proportion to the bytes (the binary reader checks
    # its offset table against them) and every caller bounds those.
    except (ValueError, ExpatError, AttributeError, TypeError, LookupError, RecursionError) as exc:
        raise UnreadablePlist(_reason(exc)) from None
    _check_value(value)
    return value


def loads_dict(data: bytes) -> dict[str, object]:
    """`loads` for the plists whose root must be a dictionary (a per-UUID plist, a store's)."""
    value = loads(data)
    if not isinstance(value, dict):
        raise UnreadablePlist(f"its root is {_kind(value)}, not a dictionary")
    return value


def _reason(exc: Exception) -> str:
    """A few words on what plistlib refused, where its own message says little."""
    import binascii

    if isinstance(exc, binascii.Error):
        return f"a <data> that is not base64 ({exc})"
    if isinstance(exc, RecursionError):
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(exc, AttributeError | TypeError):
        return "a <date> that is not an ISO 8601 date"
    if isinstance(exc, IndexError):
        return "a key or value outside any dictionary or array"
    text = str(exc)
    if "integer string conversion" in text:  # int()'s digit limit, thousands of digits
        return "an integer wider than 64 bits"
    if text in ("", "Invalid file"):  # plistlib's InvalidFileException says no more
        return "neither an XML plist nor a sound binary one"
    return text


def _check_value(root: object) -> None:
    """Refuse what XML cannot carry, a container holding itself, and values past the bounds.

    One pass in post-order, without recursion, measuring each object once however many
    references reach it, so the work grows with the bytes read, not with what they spell."""
    measured: dict[int, tuple[int, int]] = {}  # id -> (levels, size spelled out)
    open_ids: set[int] = set()
    todo: list[tuple[object, bool]] = [(root, False)]
    while todo:
        value, children_measured = todo.pop()
        if children_measured:
            open_ids.discard(id(value))
            measured[id(value)] = _measure(_children(value), measured)
        elif id(value) in measured:
            continue
        elif id(value) in open_ids:
            raise UnreadablePlist("a dictionary or array that contains itself")
        elif isinstance(value, (dict, list)):
            open_ids.add(id(value))
            todo.append((value, True))
            todo.extend((child, False) for child in _children(value))
        else:
            measured[id(value)] = (0, _scalar_size(value))


def _children(value: object) -> list[object]:
    """A list's items, a dictionary's keys and values."""
    if isinstance(value, list):
        return value
    assert isinstance(value, dict)
    for key in value:
        if not isinstance(key, str):
            raise UnreadablePlist(f"a dictionary key that is {_kind(key)}")
    return [*value, *value.values()]


def _measure(children: list[object], measured: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """The levels and size of a container whose children are measured already."""
    levels, size = 1, SCALAR_SIZE
    for child in children:
        below, inside = measured[id(child)]
        levels, size = max(levels, below + 1), size + inside
    if levels > MAX_DEPTH:
        raise UnreadablePlist(f"nested deeper than {MAX_DEPTH} levels")
    if size > MAX_SPELLED_OUT_BYTES:
        from dsymfind.progress import human_size

        raise UnreadablePlist(
            f"more than {human_size(MAX_SPELLED_OUT_BYTES)} spelled out, by repeated references"
        )
    return levels, size


def _scalar_size(value: object) -> int:
    """What a value adds spelled out; UnreadablePlist for one XML cannot carry."""
    import datetime

    if isinstance(value, str):
        if not _plist.representable(value):
            raise UnreadablePlist(f"a string XML cannot carry: {value[:40]!r}")
        return max(len(value), SCALAR_SIZE)
    if isinstance(value, bytes):
        return max(len(value), SCALAR_SIZE)
    if isinstance(value, int) and not isinstance(value, bool) and value not in INTEGER_RANGE:
        raise UnreadablePlist("an integer wider than 64 bits")
    if not isinstance(value, int | float | datetime.datetime):
        # None (an unknown XML element, binary token 0), a keyed archive's UID
        raise UnreadablePlist(f"{_kind(value)}, which an XML plist cannot carry")
    return SCALAR_SIZE


def _kind(value: object) -> str:
    return "a null" if value is None else f"a {type(value).__name__}"
