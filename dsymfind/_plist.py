"""An XML property-list writer for the helper's answers, without plistlib.

plistlib costs the helper most of its start-up time (it drags in datetime, enum and
the binary format); the answers are a dict of dicts of strings, which this writes
directly. Output is what DebugSymbols, LLDB, crashlog.py and xnu's regex accept:
`<?xml` at byte 0, UTF-8, no BOM (docs/helper-contract.md).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

_HEADER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"'
    ' "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
    '<plist version="1.0">\n'
)
# XML 1.0 allows these three control characters; a parser would turn a raw CR into LF.
_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord("\r"): "&#13;"}
_FORBIDDEN = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"] + ["\ufffe", "\uffff"]
)


class UnrepresentableError(ValueError):
    """A string that no XML 1.0 document can carry (a control character, invalid UTF-8)."""


def escape(text: str) -> str:
    """Text as XML character data; raises UnrepresentableError when XML cannot carry it."""
    if not _FORBIDDEN.isdisjoint(text):
        raise UnrepresentableError(f"control character in {text!r}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A surrogate: an undecodable byte of a file name (os.fsdecode's surrogateescape).
        raise UnrepresentableError(f"not valid UTF-8: {text!r}") from None
    return text.translate(_ESCAPES)


def representable(text: str) -> bool:
    try:
        escape(text)
    except UnrepresentableError:
        return False
    return True


def render(answers: "Mapping[str, Mapping[str, str]]") -> bytes:
    """The whole document: a root dict of UUID keys, each holding a dict of string values."""
    out = [_HEADER]
    if not answers:
        out.append("<dict/>\n")
    else:
        out.append("<dict>\n")
        for uuid, values in answers.items():
            out.append(f"\t<key>{escape(uuid)}</key>\n")
            out.append(_render_dict(values))
        out.append("</dict>\n")
    out.append("</plist>\n")
    return "".join(out).encode("utf-8")


def _render_dict(values: "Mapping[str, str]") -> str:
    if not values:
        return "\t<dict/>\n"
    lines = ["\t<dict>\n"]
    for key, value in values.items():
        lines.append(f"\t\t<key>{escape(key)}</key>\n\t\t<string>{escape(value)}</string>\n")
    lines.append("\t</dict>\n")
    return "".join(lines)
