"""The `sample` tool's output: a header (Process, Path, Load Address, Code Type...), the
"Call graph:" of every thread, "Total number in stack", "Sort by top of stack" and
"Binary Images:".

A call-graph line is a count of samples and a frame, one step deeper per call, behind
blanks and the tree's `+ ! : |` marks:

    +     2351 main  (in Finder) + 92  [0x100b3a1c4]
    +       2351 ???  (in Finder)  load address 0x100b34000 + 0x61c4  [0x100b3a1c4,0x100b3a1c8]

and an image line `0x100b34000 - 0x100f2ffff +com.apple.finder (12.5) <UUID> /path`
(`+`: not one of the system's). An unnamed frame (`???`) is looked up at the offset its
line gives, or its address less its image's load address; it is written back as
`main  (in Finder) + 92  [0x100b3a1c4]  main.c:12`, the callees inlined into the function
after ` > `. Every other byte (counts, tree, the other sections) is written as it came.
Read a line at a time (hangtext.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dsymfind.apple import crashreport
from dsymfind.symbolicate import hangtext
from dsymfind.symbolicate.hangtext import FRAME, IMAGE, THREAD, Event, FrameLine, Source
from dsymfind.symbolicate.model import Frame, Report, ReportImage
from dsymfind.uuids import normalize_uuid

if TYPE_CHECKING:
    from dsymfind.symbolicate.model import Seen

KIND = "sample"
CALL_GRAPH = "Call graph:"
AFTER_GRAPH = ("Total number in stack", "Sort by top of stack")
IMAGES = "Binary Images:"
TREE_MARKS = "+!:|"
IN = "  (in "
LOAD_ADDRESS = "load address "
CODE_TYPES = {"ARM64": "arm64", "ARM-64": "arm64", "ARM64E": "arm64e", "X86-64": "x86_64"}


def looks_like(head: str) -> bool:
    """The start of a sample's output: a call graph after a header."""
    return (f"\n{CALL_GRAPH}" in head or head.startswith(CALL_GRAPH)) and "Process:" in head


def read(seen: Seen) -> Report:
    return read_source(Source(None, seen.text))


def read_source(source: Source) -> Report:
    return hangtext.read(KIND, source, Grammar, arch_of)


def write(report: Report) -> str:
    return hangtext.as_text(report, Grammar)


def arch_of(line: str) -> str | None:
    if not line.startswith("Code Type:"):
        return None
    words = line.partition(":")[2].split()
    return CODE_TYPES.get(words[0].upper(), words[0].lower()) if words else None


class Grammar(hangtext.Grammar):
    def __init__(self) -> None:
        self.section = ""

    def event(self, line: str) -> Event:
        stripped = line.strip()
        if stripped == CALL_GRAPH:
            self.section = "graph"
            return Event("")
        if stripped == IMAGES:
            self.section = "images"
            return Event("")
        if stripped.startswith(AFTER_GRAPH):
            self.section = "after"
            return Event("")
        if self.section == "graph":
            return _graph_line(line)
        if self.section == "images" and stripped.startswith("0x"):
            return _image_line(stripped)
        return Event("")

    def named(self, line: str, frame: FrameLine, found: Frame) -> str:
        symbol, offset, place = hangtext.described(found)
        start, end, tail, bracket = frame.spans
        text = line[:start] + symbol + line[end:tail]
        text += "" if offset is None else f" + {offset}"
        text += line[bracket:]
        if place and line.endswith("]"):
            text += f"  {place}"
        return text


def _graph_line(line: str) -> Event:
    counted = hangtext.count_and_rest(line, TREE_MARKS)
    if counted is None:
        return Event("")
    depth, _, rest = counted
    start = len(line) - len(rest) + 1
    at = line.find(IN, start)
    if at < 0:
        marked = any(mark in line[:depth] for mark in TREE_MARKS)
        return Event("") if marked else Event(THREAD, name=rest.strip())
    close = line.find(")", at + len(IN))
    bracket = line.find("  [", close)
    end = line.find("]", bracket)
    if at == start or close < 0 or bracket < 0 or end < 0:
        return Event("")
    addresses = line[bracket + 3 : end].split(",")
    address = hangtext.hex_number(addresses[0])
    image = line[at + len(IN) : close]
    symbol = line[start:at]
    tail = line[close + 1 : bracket].strip()
    spans = (start, at, close + 1, bracket)
    if symbol != hangtext.UNNAMED:
        plus, _, number = tail.partition(" ")
        given_offset = hangtext.decimal(number) if plus == "+" else None
        given = {"symbol": symbol, "offset": given_offset, "file": None, "line": None}
        given["inline"] = False
        return Event(FRAME, FrameLine(depth, image, symbol, None, address, None, given, spans))
    base = offset = None
    if tail.startswith(LOAD_ADDRESS):
        loaded, plus, into = tail[len(LOAD_ADDRESS) :].partition(" + ")
        base = hangtext.hex_number(loaded)
        offset = hangtext.hex_number(into) if plus else None
    return Event(FRAME, FrameLine(depth, image, None, offset, address, base, None, spans))


def _image_line(stripped: str) -> Event:
    """`0xSTART - 0xEND +name (version) <UUID> /path`; none when the line is no such."""
    first, dash, rest = stripped.partition(" - ")
    start = hangtext.hex_number(first.strip())
    if not dash or start is None:
        return Event("")
    _, _, rest = rest.strip().partition(" ")
    rest = rest.strip()
    opening = rest.find("<")
    closing = rest.find(">", opening)
    if opening < 0 or closing < 0:
        listed, uuid, path = rest, None, ""
    else:
        listed = rest[:opening].strip()
        uuid = normalize_uuid(rest[opening + 1 : closing])
        path = rest[closing + 1 :].strip()
    listed = listed.removeprefix("+").strip()
    if listed.endswith(")") and " (" in listed:
        listed = listed[: listed.rfind(" (")].strip()
    name = os.path.basename(path) or listed
    image = ReportImage(uuid, name, "", start, crashreport.is_apple_image(path, name))
    return Event(IMAGE, image=image, aliases=(listed,))
