"""The text `.crash` form: read its thread blocks, write it back symbolicated.

A frame line is `2   universal   0x0000000104a5d9c8 0x104a5c000 + 6600` (number, image
name, pc, then the image's load address and the offset); its image is the "Binary
Images" line starting at that load address (else the one of that name). A frame whose
image "Binary Images" does not list (Sentry's reports, hand-made ones) keeps its image's
name and load address, an image without a UUID. Written back as Apple writes a
symbolicated frame: `leaf + 20 (crashy.c:12)`, an inlined callee on a line of its own
before its caller, marked `[inlined]`, each followed by its source context when asked
for (context.py: indented lines no reader takes for a frame). Other lines stay as they were.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate.model import Frame, Report, ReportImage, Thread

if TYPE_CHECKING:
    from dsymfind.symbolicate.engine import Located
    from dsymfind.symbolicate.model import Seen

KIND = "crash"

# Longer lines are no frame lines and are not parsed (as crashreport does for images).
MAX_FRAME_LINE_CHARS = crashreport.MAX_IMAGE_LINE_CHARS
_THREAD = re.compile(r"Thread (?P<index>\d{1,9})(?P<crashed> Crashed)?:")
_FRAME = re.compile(
    r"(?P<number>\d{1,9})[ \t]+(?P<name>\S.*?)[ \t]+(?P<pc>0x[0-9a-fA-F]{1,16})[ \t]+"
)
_UNNAMED = re.compile(r"(?P<base>0x[0-9a-fA-F]{1,16}) \+ (?P<offset>\d{1,20})\s*")
_ARCH = re.compile(r"Code Type:\s+(?P<arch>\S+)")
_CODE_TYPES = {"ARM-64": "arm64", "X86-64": "x86_64", "ARM64E": "arm64e"}
# How a symbolicated line marks an inlined callee (as Apple and `write` write it).
INLINED_MARK = " [inlined]"
# Decimal fields of a named frame (an offset, a line) longer than this are no number of one.
MAX_DECIMAL_DIGITS = 20


class Document(NamedTuple):
    prefix: str  # an .ips metadata line before the text report (bug type 109), else ""
    lines: list[str]  # with their line endings


class _Line(NamedTuple):
    number: int  # of the line in the report
    head: str  # up to and including the pc and the blanks after it
    ending: str


def read(seen: Seen) -> Report:
    """The text report, alone or after an `.ips` metadata line (kept as its prefix)."""
    if seen.ips is None:
        report = _read(seen.text, "")
    else:
        report = _read(seen.ips.text, seen.ips.header + "\n")
    if not report.threads:
        raise CrashReportError("not a crash report: no thread with frames")
    return report


def _read(text: str, prefix: str) -> Report:
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    ranges = crashreport.text_images(bare)
    images = _Images(
        [ReportImage(i.uuid, i.name, i.arch, start, i.apple) for start, _, i in ranges]
    )
    threads: list[Thread] = []
    for index, line in enumerate(bare):
        if len(line) > MAX_FRAME_LINE_CHARS:
            continue
        header = _THREAD.match(line)
        if header is not None:
            threads.append(Thread(int(header["index"]), bool(header["crashed"]), []))
            continue
        found = _FRAME.match(line) if threads else None
        if found is None:
            continue
        source = _Line(index, line[: found.end()], lines[index][len(line) :])
        frames = threads[-1].frames
        frames.append(_frame(found, line[found.end() :], len(frames), source, images))
    return Report(KIND, images.listed, threads, _arch(bare), Document(prefix, lines))


def _frame(found: re.Match[str], rest: str, position: int, source: _Line, images: _Images) -> Frame:
    """The frame of a line: its image and offset, or, when the report already names it,
    what it gives (symbol, offset, file, line)."""
    pc = int(found["pc"], 16)
    unnamed = _UNNAMED.fullmatch(rest)
    if unnamed is None:
        image = images.index(found["name"], None)
        return Frame(image, None, position, source, named=True, address=pc, given=_given(rest))
    image = images.index(found["name"], int(unnamed["base"], 16))
    return Frame(image, int(unnamed["offset"]), position, source, address=pc)


class _Images:
    """The report's images: those "Binary Images" lists, then those only frames name."""

    def __init__(self, listed: list[ReportImage]) -> None:
        self.listed = listed
        self._by_base = {image.base: n for n, image in enumerate(listed)}
        self._by_name = {image.name: n for n, image in reversed(list(enumerate(listed)))}

    def index(self, name: str, base: int | None) -> int:
        """The image loaded at `base`, else the one named `name`; one with neither is
        added, as the frame gives it: it has no UUID, so no dSYM can be found for it."""
        found = self._by_base.get(base) if base is not None else None
        if found is None:
            found = self._by_name.get(name)
        if found is None:
            found = len(self.listed)
            apple = crashreport.is_apple_image("", name)
            self.listed.append(ReportImage(None, name, "", base, apple))
            self._by_name[name] = found
            if base is not None:
                self._by_base[base] = found
        return found


def _given(rest: str) -> dict[str, Any]:
    """What a named frame's line says (`start + 1`, `leaf + 20 (crashy.c:12) [inlined]`),
    read from the end, without a pattern that could backtrack."""
    text = rest.strip()
    inline = text.endswith(INLINED_MARK)
    text = text.removesuffix(INLINED_MARK)
    file, line = None, None
    if text.endswith(")"):
        head, _, place = text[:-1].rpartition(" (")
        path, colon, number = place.rpartition(":")
        if head and colon and _decimal(number) is not None:
            text, file, line = head, path, _decimal(number)
        elif head and not colon:
            text, file = head, place
    symbol, plus, offset = text.rpartition(" + ")
    at = _decimal(offset) if plus else None
    if at is None:
        symbol = text
    return {"symbol": symbol, "offset": at, "file": file, "line": line, "inline": inline}


def _decimal(text: str) -> int | None:
    digits = text.isascii() and text.isdigit() and len(text) <= MAX_DECIMAL_DIGITS
    return int(text) if digits else None


def _arch(lines: list[str]) -> str:
    for line in lines:
        found = _ARCH.match(line)
        if found is not None:
            return _CODE_TYPES.get(found["arch"].upper(), found["arch"].lower())
        if line.strip() == crashreport.BINARY_IMAGES_HEADER:
            break
    return ""


def write(report: Report) -> str:
    document: Document = report.document
    lines = list(document.lines)
    for frame in reversed(report.frames()):  # from the end: inserting keeps earlier indexes
        if frame.symbolicated:
            lines[frame.source.number : frame.source.number + 1] = _lines(frame)
    return document.prefix + "".join(lines)


def _lines(frame: Frame) -> list[str]:
    source: _Line = frame.source
    ending = source.ending or "\n"
    lines = []
    for located in frame.symbols:
        lines.append(f"{source.head}{_described(frame, located)}{ending}")
        if located.context is not None:
            from dsymfind.symbolicate import context

            lines += [f"{text}{ending}" for text in context.text_lines(located)]
    lines[-1] = lines[-1].removesuffix(ending) + source.ending
    return lines


def _described(frame: Frame, located: Located) -> str:
    text = located.symbol
    if located.start is not None and frame.offset is not None:
        text += f" + {frame.offset - located.start}"
    if located.file:
        place = os.path.basename(located.file)
        text += f" ({place}:{located.line})" if located.line else f" ({place})"
    return text + (INLINED_MARK if located.inline else "")
