"""What the `sample` tool's output and spindump's text have in common: a call tree of
frame lines, each `COUNT  <frame> [0xADDR]` indented one step per call, and "Binary
Images" lines naming each image's load address, UUID and path.

Such files reach hundreds of MB (a spindump of every process, a long sample), so they
are read a line at a time and never held whole: what is kept is one Frame per distinct
frame (its scope, image, address or offset, and whether it is a leaf of the tree), one
Thread per thread holding frames first met there, the images and, for spindump, the
processes. A file of any size costs at most MAX_DISTINCT_FRAMES frames; past that it is
refused, as that report's one error line. A line longer than MAX_LINE_CHARS is passed
through as it came and never parsed. Writing reads the file again, a line at a time,
and replaces each frame line looked up; every other byte is written as it came.

A frame's place in the tree says whether it is the pc (a leaf: nothing deeper follows
it) or a return address, so each line is seen with the next one (`walk`).
"""

from __future__ import annotations

import io
import os
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate.model import Frame, Report, ReportImage, Thread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from dsymfind.symbolicate.engine import Located

MAX_LINE_CHARS = 4096
# ~400 bytes each (the Frame, its key, the dict entry): at most about 100 MB, whatever
# the file's size.
MAX_DISTINCT_FRAMES = 250_000
# Real ones hold a few thousand images and a few hundred processes: a file of nothing but
# their lines would otherwise cost memory with its size.
MAX_IMAGES = 100_000
MAX_PROCESSES = 100_000
UNNAMED = "???"


class FrameLine(NamedTuple):
    """One frame line, as a form's grammar splits it."""

    depth: int  # the column its count starts at
    image: str  # the image's name as the line gives it
    symbol: str | None  # None when the report leaves it unnamed (`???`)
    offset: int | None  # into the image, when the line says
    address: int | None  # the (first) address in brackets
    base: int | None  # the image's load address, when the line says
    given: dict[str, Any] | None  # a named frame's symbol and offset
    spans: tuple[int, ...]  # where the grammar's parts of the line start and end
    system: bool = False  # marked as the kernel's: an Apple image even when none is listed


class Event(NamedTuple):
    """What a line is: a frame, a new thread or process, an image, or none of these."""

    kind: str  # FRAME, THREAD, PROCESS, IMAGE, or "" for any other line
    frame: FrameLine | None = None
    name: str = ""
    image: ReportImage | None = None
    scope_global: bool = False  # an image listed for every process (spindump's last list)
    # An image's other names (its file's), a process's pid.
    aliases: tuple[str, ...] = ()


FRAME, THREAD, PROCESS, IMAGE = "frame", "thread", "process", "image"


class Grammar:
    """A form's lines: `event(line)` for each whole line of at most MAX_LINE_CHARS,
    without its ending; `named(line, frame, symbols)` the frame line looked up."""

    def event(self, line: str) -> Event:
        raise NotImplementedError

    def named(self, line: str, frame: FrameLine, found: Frame) -> str:
        raise NotImplementedError


class Source(NamedTuple):
    """Where the report's text is read again from: a file, or the text itself."""

    path: str | None
    text: str | None

    def open(self) -> IO[str]:
        if self.path is not None:
            return open(self.path, encoding="utf-8", errors="replace", newline="")
        return io.StringIO(self.text or "", newline="")


class Document:
    """What a writer needs besides the frames: the source, each frame by its key, and
    for spindump the processes (name, pid) and the one `--process` picked."""

    __slots__ = ("frames", "grammar", "picked", "processes", "source", "thread_process")

    def __init__(self, source: Source, grammar: Callable[[], Grammar]) -> None:
        self.source, self.grammar = source, grammar
        self.frames: dict[tuple[Any, ...], Frame] = {}
        self.processes: list[tuple[str, str]] = []
        self.thread_process: list[int | None] = []  # per Report.threads entry
        self.picked: int | None = None


def chunks(stream: IO[str]) -> Iterator[str]:
    """The stream's lines with their endings, a line longer than MAX_LINE_CHARS in
    pieces (never parsed: only a piece ending its line could look whole)."""
    while True:
        piece = stream.readline(MAX_LINE_CHARS + 1)
        if not piece:
            return
        yield piece


def walk(stream: IO[str], grammar: Grammar) -> Iterator[tuple[str, Event, bool]]:
    """(chunk as it came, its event, whether a frame is a leaf): each frame line is
    given once the line after it is seen."""
    pending: tuple[str, Event] | None = None
    overlong = False
    for chunk in chunks(stream):
        whole = chunk.endswith(("\n", "\r"))
        line = chunk.rstrip("\r\n")
        if overlong or (not whole and len(chunk) > MAX_LINE_CHARS):
            event = Event("")
        else:
            event = grammar.event(line)
        overlong = not whole
        if pending is not None:
            leaf = event.frame is None or _depth(pending) >= event.frame.depth
            yield pending[0], pending[1], leaf
            pending = None
        if event.kind == FRAME:
            pending = (chunk, event)
        else:
            yield chunk, event, False
    if pending is not None:
        yield pending[0], pending[1], True


def _depth(pending: tuple[str, Event]) -> int:
    frame = pending[1].frame
    return -1 if frame is None else frame.depth


class _Reading:
    """The report as lines come: threads, processes, images by scope, distinct frames."""

    def __init__(self, kind: str, source: Source, grammar: Callable[[], Grammar]) -> None:
        self.kind = kind
        self.document = Document(source, grammar)
        self.threads: list[Thread] = []
        self.current: Thread | None = None
        self.process: int | None = None
        self.images: list[ReportImage] = []
        # By scope (a process's index, or None for every process), by name and by base.
        self.by_name: dict[tuple[int | None, str], int] = {}
        self.by_base: dict[int, int] = {}
        # By name alone, the first listed: for a frame whose process lists no such image.
        self.any_scope: dict[str, int] = {}
        self.unresolved: list[tuple[Frame, int | None, FrameLine]] = []

    def see(self, event: Event, leaf: bool) -> None:
        if event.kind == PROCESS:
            if len(self.document.processes) >= MAX_PROCESSES:
                raise CrashReportError(f"more than {MAX_PROCESSES} processes: too large to read")
            pid = event.aliases[0] if event.aliases else ""
            self.document.processes.append((event.name, pid))
            self.process = len(self.document.processes) - 1
            self.current = None
        elif event.kind == THREAD:
            self.current = None
        elif event.kind == IMAGE:
            if event.scope_global:
                self.process = None
            if event.image is not None:
                self._image(event.image, event.aliases, self.process)
        elif event.kind == FRAME and event.frame is not None:
            self._frame(event.frame, leaf)

    def _image(self, image: ReportImage, aliases: tuple[str, ...], scope: int | None) -> None:
        if len(self.images) >= MAX_IMAGES:
            raise CrashReportError(f"more than {MAX_IMAGES} images: too large to read")
        index = len(self.images)
        self.images.append(image)
        for name in (image.name, *aliases):
            self.by_name.setdefault((scope, name), index)
            self.any_scope.setdefault(name, index)
        if image.base is not None:
            self.by_base.setdefault(image.base, index)

    def _frame(self, line: FrameLine, leaf: bool) -> None:
        value = line.offset if line.offset is not None else line.address
        what = "offset" if line.offset is not None else "address"
        named = line.symbol is not None
        key = (self.process, line.image, what, value, leaf, named)
        frames = self.document.frames
        if key in frames:
            return
        if len(frames) >= MAX_DISTINCT_FRAMES:
            raise CrashReportError(
                f"more than {MAX_DISTINCT_FRAMES} distinct frames: too large to symbolicate"
            )
        if self.current is None:
            self.current = Thread(len(self.threads), False, [])
            self.threads.append(self.current)
            self.document.thread_process.append(self.process)
        position = 0 if leaf else 1
        frame = Frame(
            None, line.offset, position, key, named=named, address=line.address, given=line.given
        )
        frames[key] = frame
        self.current.frames.append(frame)
        self.unresolved.append((frame, self.process, line._replace(given=None)))

    def report(self, arch: str) -> Report:
        for frame, scope, line in self.unresolved:
            frame.image = self._image_of(scope, line)
            if frame.image is not None and frame.offset is None and frame.address is not None:
                start = self.images[frame.image].base
                if start is not None and frame.address >= start:
                    frame.offset = frame.address - start
        self.unresolved = []
        return Report(self.kind, self.images, self.threads, arch, self.document)

    def _image_of(self, scope: int | None, line: FrameLine) -> int | None:
        name, base = line.image, line.base
        if base is not None and base in self.by_base:
            return self.by_base[base]
        found = self.by_name.get((scope, name))
        if found is None:
            found = self.by_name.get((None, name))
        if found is None and scope is not None:
            found = self.any_scope.get(name)
        if found is None and name:
            # An image the frames name but no list gives: no UUID, so no dSYM.
            found = len(self.images)
            apple = line.system or crashreport.is_apple_image("", name)
            self.images.append(ReportImage(None, name, "", base, apple))
            self.by_name[(scope, name)] = found
        return found


def read(
    kind: str, source: Source, grammar: Callable[[], Grammar], arch_of: Callable[[str], str | None]
) -> Report:
    """The report in `source`, read a line at a time."""
    reading = _Reading(kind, source, grammar)
    arch = ""
    with source.open() as stream:
        for chunk, event, leaf in walk(stream, grammar()):
            if not arch and event.kind == "":
                arch = arch_of(chunk.rstrip("\r\n")) or ""
            reading.see(event, leaf)
    if not reading.document.frames:
        raise CrashReportError(f"not a {kind} report: no frame in it")
    return reading.report(arch)


def write(report: Report, make: Callable[[], Grammar], out: IO[str]) -> None:
    """The report written into `out`: each frame line looked up named, every other line
    (and the lines of processes `--process` did not pick) as it came."""
    document: Document = report.document
    frames = document.frames
    process: int | None = None
    picked = document.picked
    grammar = make()
    with document.source.open() as stream:
        for chunk, event, leaf in walk(stream, grammar):
            if event.kind == PROCESS:
                process = 0 if process is None else process + 1
            elif event.kind == IMAGE and event.scope_global:
                process = None
            if picked is not None and process is not None and process != picked:
                continue
            if event.kind != FRAME or event.frame is None:
                out.write(chunk)
                continue
            line = event.frame
            value = line.offset if line.offset is not None else line.address
            what = "offset" if line.offset is not None else "address"
            key = (process, line.image, what, value, leaf, line.symbol is not None)
            found = frames.get(key)
            if found is None or not found.symbols:
                out.write(chunk)
                continue
            bare = chunk.rstrip("\r\n")
            out.write(grammar.named(bare, line, found) + chunk[len(bare) :])


def from_file(report: Report) -> bool:
    """Whether the report is read from its file, a line at a time (read_path)."""
    document = report.document
    return isinstance(document, Document) and document.source.path is not None


def write_out(report: Report, out: IO[str]) -> None:
    """The report in its own form into `out`, a line at a time."""
    write(report, report.document.grammar, out)


def write_file(report: Report, target: str, *, replace: bool) -> None:
    """The report into the file `target`: a file beside it renamed over it (`replace`),
    or `target` itself written into (a pipe or a device)."""
    if not replace:
        with open(target, "w", encoding="utf-8", newline="") as out:
            write_out(report, out)
        return
    folder = os.path.dirname(target) or "."
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(target)}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as out:
            write_out(report, out)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def as_text(report: Report, make: Callable[[], Grammar]) -> str:
    out = io.StringIO(newline="")
    write(report, make, out)
    return out.getvalue()


def described(frame: Frame) -> tuple[str, int | None, str]:
    """(symbol, offset into it, `file:line` or "") of a looked-up frame: the function,
    with the callees inlined into it after `>`, and the innermost one's line."""
    chain = list(reversed(frame.symbols))
    outer: Located = chain[0]
    symbol = " > ".join(located.symbol for located in chain)
    offset = None
    if outer.start is not None and frame.offset is not None and frame.offset >= outer.start:
        offset = frame.offset - outer.start
    inner = frame.symbols[0]
    place = ""
    if inner.file:
        place = os.path.basename(inner.file) + (f":{inner.line}" if inner.line else "")
    return symbol, offset, place


def hex_number(text: str) -> int | None:
    """`0x1F` as a number; None for anything else (or more than 64 bits)."""
    if not text.startswith("0x") or not 2 < len(text) <= 18:
        return None
    digits = text[2:]
    if not all(c in "0123456789abcdefABCDEF" for c in digits):
        return None
    return int(digits, 16)


def decimal(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None


def pick(report: Report, wanted: str) -> None:
    """Only the process named `wanted` (or of that pid) is kept, looked up and written
    (with the lines before the first process and the images every process shares)."""
    document = report.document
    processes = document.processes if isinstance(document, Document) else []
    if not processes:
        raise CrashReportError(f"--process {wanted}: the report has no processes to pick from")
    found = [n for n, (name, pid) in enumerate(processes) if wanted in (name, pid)]
    if not found:
        names = ", ".join(dict.fromkeys(name for name, _ in processes))
        raise CrashReportError(f"--process {wanted}: no such process (it has {names})")
    document.picked = found[0]
    kept = [
        (thread, process)
        for thread, process in zip(report.threads, document.thread_process, strict=True)
        if process == found[0]
    ]
    report.threads = [thread for thread, _ in kept]
    document.thread_process = [process for _, process in kept]


def count_and_rest(line: str, marks: str) -> tuple[int, int, str] | None:
    """(the column of the count, the count, what follows it) of an indented tree line:
    blanks and `marks` (tree characters), a decimal count, then the rest; None when the
    line is no such line."""
    at = 0
    size = len(line)
    while at < size and (line[at] == " " or line[at] in marks):
        at += 1
    digits = at
    while digits < size and line[digits].isdigit() and line[digits].isascii():
        digits += 1
    if digits == at or digits - at > 20 or digits >= size or line[digits] != " ":
        return None
    return at, int(line[at:digits]), line[digits:]
