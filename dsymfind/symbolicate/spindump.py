"""spindump's text (`.spin`; Xcode Organizer's `.hang` holds many processes): a header
(Date/Time, OS Version, Duration, Steps...), then each process (`Process: NAME [PID]`,
`Path:`, `UUID:`...) with its threads, each `Thread 0x1a2b ... 1000 samples (1-1000)`
and its call tree, a frame a line, one step deeper per call (`*`: a kernel frame):

      1000  main + 92 (Finder + 24996) [0x100b3a1c4]
        1000  ??? (Finder + 25028) [0x100b3a1c4]

and "Binary Images:" lines `0x100b34000 - 0x100f2ffff  com.apple.finder 12.5 (1425.5.6)
<UUID>  /path`, under each process or once for all of them at the end. An unnamed frame
(`???`) is looked up at the offset into its image its line gives, in the images of its
own process, else those listed for all; it is written back as
`main + 92 (Finder + 25028) [0x100b3a1c4]  main.c:12`, the callees inlined into the
function after ` > `. `--process NAME` (or PID) keeps one process: the header, its own
lines and the images listed for all are written, nothing of the others. Read a line at a
time (hangtext.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dsymfind.apple import crashreport
from dsymfind.symbolicate import hangtext
from dsymfind.symbolicate.hangtext import FRAME, IMAGE, PROCESS, THREAD, Event, FrameLine, Source
from dsymfind.symbolicate.model import Frame, Report, ReportImage
from dsymfind.uuids import normalize_uuid

if TYPE_CHECKING:
    from dsymfind.symbolicate.model import Seen

KIND = "spindump"
PROCESS_FIELD = "Process:"
IMAGES = "Binary Images:"
THREAD_START = "Thread 0x"
KERNEL_MARK = "*"
ADDRESS_OPENS = ") [0x"
ARCHES = {"ARM64": "arm64", "ARM-64": "arm64", "ARM64E": "arm64e", "X86-64": "x86_64"}


def looks_like(head: str) -> bool:
    """The start of a spindump: a process, and a thread of it counted in samples."""
    process = head.startswith(PROCESS_FIELD) or f"\n{PROCESS_FIELD}" in head
    return process and THREAD_START in head and " samples" in head


def read(seen: Seen) -> Report:
    return read_source(Source(None, seen.text))


def read_source(source: Source) -> Report:
    return hangtext.read(KIND, source, Grammar, arch_of)


def write(report: Report) -> str:
    return hangtext.as_text(report, Grammar)


def arch_of(line: str) -> str | None:
    if not line.startswith(("Architecture:", "Code Type:")):
        return None
    words = line.partition(":")[2].split()
    return ARCHES.get(words[0].upper(), words[0].lower()) if words else None


class Grammar(hangtext.Grammar):
    def __init__(self) -> None:
        self.images = False

    def event(self, line: str) -> Event:
        stripped = line.strip()
        if line.startswith(PROCESS_FIELD):
            self.images = False
            return _process(line)
        if stripped == IMAGES:
            self.images = True
            # Unindented: the images of every process, after the last one.
            return Event(IMAGE, scope_global=True) if line == stripped else Event("")
        if self.images:
            if stripped.lstrip(KERNEL_MARK).startswith("0x"):
                return _image_line(stripped.lstrip(KERNEL_MARK))
            self.images = False
        if stripped.startswith(THREAD_START):
            return Event(THREAD, name=stripped)
        return _frame_line(line)

    def named(self, line: str, frame: FrameLine, found: Frame) -> str:
        symbol, offset, place = hangtext.described(found)
        start, end = frame.spans
        text = line[:start] + symbol + ("" if offset is None else f" + {offset}") + line[end:]
        if place and line.endswith("]"):
            text += f"  {place}"
        return text


def _process(line: str) -> Event:
    value = line[len(PROCESS_FIELD) :].strip()
    name, bracket, rest = value.partition(" [")
    pid = rest.partition("]")[0] if bracket else ""
    return Event(PROCESS, name=name.strip(), aliases=(pid,))


def _frame_line(line: str) -> Event:
    counted = hangtext.count_and_rest(line, KERNEL_MARK)
    if counted is None:
        return Event("")
    depth, _, rest = counted
    start = len(line) - len(rest.lstrip(" "))
    close = line.find(ADDRESS_OPENS, start)
    if close < 0:
        return Event("")
    opening = line.rfind(" (", start, close)
    end = line.find("]", close)
    if opening <= start or end < 0:
        return Event("")
    address = hangtext.hex_number(line[close + 3 : end])
    image, plus, into = line[opening + 2 : close].rpartition(" + ")
    offset = None
    if plus:
        offset = hangtext.decimal(into)
        if offset is None:
            offset = hangtext.hex_number(into)
    else:
        image = line[opening + 2 : close]
    symbol = line[start:opening]
    spans = (start, opening)
    kernel = KERNEL_MARK in line[:depth]
    if symbol != hangtext.UNNAMED:
        name, plus, number = symbol.rpartition(" + ")
        at = hangtext.decimal(number) if plus else None
        given = {"symbol": name if at is not None else symbol, "offset": at}
        given.update(file=None, line=None, inline=False)
        found = FrameLine(depth, image, symbol, offset, address, None, given, spans, kernel)
        return Event(FRAME, found)
    return Event(FRAME, FrameLine(depth, image, None, offset, address, None, None, spans, kernel))


def _image_line(stripped: str) -> Event:
    """`0xSTART - 0xEND  identifier version  <UUID>  /path`; none when the line is no such."""
    first, dash, rest = stripped.partition(" - ")
    start = hangtext.hex_number(first.strip())
    if not dash or start is None:
        return Event("")
    _, _, rest = rest.strip().partition(" ")
    opening = rest.find("<")
    closing = rest.find(">", opening)
    if opening < 0 or closing < 0:
        words, uuid, path = rest.split(), None, ""
    else:
        words = rest[:opening].split()
        uuid = normalize_uuid(rest[opening + 1 : closing])
        path = rest[closing + 1 :].strip()
    listed = words[0] if words else ""
    name = os.path.basename(path) or listed
    if not name:
        return Event("")
    image = ReportImage(uuid, name, "", start, crashreport.is_apple_image(path, name))
    return Event(IMAGE, image=image, aliases=(listed,))
