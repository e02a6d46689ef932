"""The text `.crash` form: read its thread blocks, write it back symbolicated.

A frame line is `2   universal   0x0000000104a5d9c8 0x104a5c000 + 6600` (number, image
name, pc, then the image's load address and the offset); its image is the "Binary
Images" line starting at that load address (else the one of that name). Written back as
Apple writes a symbolicated frame: `leaf + 20 (crashy.c:12)`, an inlined callee on a
line of its own before its caller, marked `[inlined]`. Other lines stay as they were.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from dsymfind.apple import crashreport
from dsymfind.symbolicate.model import Frame, Located, Report, ReportImage, Thread

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


class Document(NamedTuple):
    prefix: str  # an .ips metadata line before the text report (bug type 109), else ""
    lines: list[str]  # with their line endings


class _Line(NamedTuple):
    number: int  # of the line in the report
    head: str  # up to and including the pc and the blanks after it
    ending: str


def read(text: str, prefix: str = "") -> Report:
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    ranges = crashreport.text_images(bare)
    images = [ReportImage(i.uuid, i.name, i.arch, start, i.apple) for start, _, i in ranges]
    by_base = {image.base: n for n, image in enumerate(images)}
    by_name = {image.name: n for n, image in reversed(list(enumerate(images)))}
    threads: list[Thread] = []
    for index, line in enumerate(bare):
        if len(line) > MAX_FRAME_LINE_CHARS:
            continue
        header = _THREAD.match(line)
        if header is not None:
            threads.append(Thread(int(header["index"]), bool(header["crashed"]), []))
            continue
        frame = _FRAME.match(line) if threads else None
        if frame is None:
            continue
        source = _Line(index, line[: frame.end()], lines[index][len(line) :])
        frames = threads[-1].frames
        image, offset, named = _image(line[frame.end() :], frame["name"], by_base, by_name)
        frames.append(Frame(image, offset, len(frames), source, named=named))
    return Report(KIND, images, threads, _arch(bare), Document(prefix, lines))


def _image(
    rest: str, name: str, by_base: dict[int | None, int], by_name: dict[str, int]
) -> tuple[int | None, int | None, bool]:
    """(image index, offset, False) of an unsymbolicated frame; a named one is
    (None, None, True)."""
    unnamed = _UNNAMED.fullmatch(rest)
    if unnamed is None:
        return None, None, True
    image = by_base.get(int(unnamed["base"], 16), by_name.get(name))
    return image, int(unnamed["offset"]), False


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
    lines = [f"{source.head}{_described(frame, located)}{ending}" for located in frame.symbols]
    lines[-1] = lines[-1].removesuffix(ending) + source.ending
    return lines


def _described(frame: Frame, located: Located) -> str:
    text = located.symbol
    if located.start is not None and frame.offset is not None:
        text += f" + {frame.offset - located.start}"
    if located.file:
        place = os.path.basename(located.file)
        text += f" ({place}:{located.line})" if located.line else f" ({place})"
    return text + (" [inlined]" if located.inline else "")
