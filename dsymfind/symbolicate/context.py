"""`--source-context N`: the source lines around each app frame's line, for the report's
reader, as LLDB's crashlog shows them.

A frame's file, as its DWARF names it, is read from a folder it maps to, tried in order:
the checkout of the build's commit that `dsymfind sources` (or the download) made for its
image's UUID (the per-UUID plist's `DBGBuildSourcePath` -> `DBGSourcePath`, trusted only
when that folder is one of the cache's worktrees or inside a configured
`source_checkouts` clone), then each `--source-map BUILD=LOCAL`, the longest BUILD first.
Nothing else is ever read: the path below the mapped root is resolved name by name inside
it (vcs/checkouts.py's rule, so `..` and symlinks leading out are refused), only a regular
file is read (opened without blocking, so a FIFO or a device is not waited on), and at
most MAX_FILE_BYTES of it. Frames of Apple's images, and those the report named already,
get none.

The heavier imports (the lookup, git's checkouts) are made only when context is asked for:
crash.py imports this module to write the lines.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from dsymfind.errors import DsymfindError
from dsymfind.symbolicate.engine import Context

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from dsymfind.settings import Settings
    from dsymfind.symbolicate.engine import Located
    from dsymfind.symbolicate.model import Report

# Lines either side of a frame's line: a larger N is taken as this.
MAX_CONTEXT = 50
# What is read of one source file: a frame whose line lies past it gets no context.
MAX_FILE_BYTES = 4 * 1024 * 1024
# A longer source line is cut here (a minified or generated file).
MAX_LINE_CHARS = 400
# How the frame's own line and the lines around it are marked in the text forms: never a
# digit first, nor an empty line, so that a reader of the report (ours, LLDB's crashlog,
# which strips each line) never takes one for a frame or the end of a thread.
INDENT = "    "
MARK, OTHER = "->", " |"
# Control characters in a source line (an escape sequence a terminal would obey) are shown
# as this; tabs stay.
_CONTROLS = {c: "\ufffd" for c in (*range(0x20), 0x7F) if c != 0x09}


class SourceMap(NamedTuple):
    build: str  # a prefix of the paths the DWARF names
    local: str  # the folder they are read from


class Wanted(NamedTuple):
    lines: int  # either side of the frame's line, at most MAX_CONTEXT
    maps: tuple[SourceMap, ...]  # --source-map, longest BUILD first


def wanted(count: int | None, maps: Sequence[str]) -> Wanted | None:
    """What --source-context and --source-map ask for; None when neither is given."""
    if count is None:
        if maps:
            raise DsymfindError("--source-map goes with --source-context N")
        return None
    if count < 0:
        raise DsymfindError(f"--source-context takes a number of lines, not {count}")
    parsed = [source_map(text) for text in maps]
    parsed.sort(key=lambda found: len(found.build), reverse=True)
    return Wanted(min(count, MAX_CONTEXT), tuple(parsed))


def source_map(text: str) -> SourceMap:
    """`BUILD=LOCAL` (the first `=` splits them): DsymfindError when either is empty."""
    build, equals, local = text.partition("=")
    if not equals or not build or not local:
        raise DsymfindError(f"--source-map takes BUILD=LOCAL, not {text!r}")
    trimmed = build.rstrip("/") or "/"
    return SourceMap(os.path.normpath(trimmed), os.path.expanduser(local))


def attach(reports: Iterable[Report], request: Wanted, current: Settings) -> None:
    """Give each looked-up frame of an app image its context where its file can be read
    (Located.context); frames are otherwise left as they are."""
    sources = _Sources(current)
    for report in reports:
        for frame in report.frames():
            if frame.named or not frame.symbols or frame.image is None:
                continue
            image = report.images[frame.image]
            if image.apple:
                continue
            roots = [*sources.checkout(image.uuid), *request.maps]
            # A new list: the engine hands the same one to every frame at that offset.
            found = [sources.located(entry, roots, request.lines) for entry in frame.symbols]
            frame.symbols = found


class _Sources:
    """The run's checkouts (by UUID) and source files (by mapped root and path), each
    found or read once."""

    def __init__(self, current: Settings) -> None:
        self.current = current
        self._checkouts: dict[str, tuple[SourceMap, ...]] = {}
        self._files: dict[tuple[str, str], list[str] | None] = {}

    def checkout(self, uuid: str | None) -> tuple[SourceMap, ...]:
        if uuid is None:
            return ()
        if uuid not in self._checkouts:
            self._checkouts[uuid] = _checkout(self.current, uuid)
        return self._checkouts[uuid]

    def located(self, located: Located, roots: Sequence[SourceMap], count: int) -> Located:
        if not located.file or not located.line:
            return located
        for root in roots:
            relative = _below(located.file, root.build)
            if relative is None:
                continue
            key = (root.local, relative)
            if key not in self._files:
                self._files[key] = read_lines(root.local, relative)
            lines = self._files[key]
            if lines is not None and located.line <= len(lines):
                first = max(1, located.line - count)
                shown = lines[first - 1 : located.line + count]
                return located._replace(context=Context(first, tuple(shown)))
        return located


def _checkout(current: Settings, uuid: str) -> tuple[SourceMap, ...]:
    """The mapping of the UUID's cached dSYM to its build's checkout, as `dsymfind sources`
    prints it; none when the folder is not one the cache made or the user configured (a
    bundle may carry any plist)."""
    from dsymfind import debugsymbols
    from dsymfind.local_lookup import Lookup
    from dsymfind.paths import CachePaths

    try:
        answer = Lookup(current).find(uuid)
    except (DsymfindError, OSError):
        return ()
    if answer is None:
        return ()
    build = answer.get(debugsymbols.BUILD_SOURCE_PATH)
    local = answer.get(debugsymbols.SOURCE_PATH)
    if not isinstance(build, str) or not isinstance(local, str) or not build:
        return ()
    trusted = [CachePaths(current["cache_dir"]).checkouts, *current["source_checkouts"]]
    real = os.path.realpath(local)
    if not any(_inside(real, os.path.realpath(os.path.expanduser(t))) for t in trusted):
        return ()
    return (SourceMap(os.path.normpath(build), local),)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _below(path: str, prefix: str) -> str | None:
    """`path` relative to `prefix`, when it lies below it (path components compared)."""
    normal = os.path.normpath(path)
    if prefix == os.curdir:  # a build made with -ffile-compilation-dir=. names paths so
        return None if os.path.isabs(normal) or normal.startswith("../") else normal
    if prefix == "/":
        return normal.lstrip("/") if normal.startswith("/") else None
    if not normal.startswith(prefix + "/"):
        return None
    return normal[len(prefix) + 1 :]


def read_lines(local: str, relative: str) -> list[str] | None:
    """The lines of the regular file `local`/`relative` (resolved inside `local`), at most
    MAX_FILE_BYTES of it, each at most MAX_LINE_CHARS; None when it leads out, is no
    regular file or cannot be read."""
    from dsymfind.vcs import checkouts

    try:
        path = checkouts.resolved_inside(local, relative)
    except checkouts.SourcesError:
        return None
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        data = _read_up_to(descriptor, MAX_FILE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    whole = len(data) <= MAX_FILE_BYTES
    lines = data[:MAX_FILE_BYTES].decode("utf-8", "replace").split("\n")
    if not whole or data.endswith(b"\n"):
        lines.pop()  # cut short: its last line is not whole; or after the file's last newline
    return [_shown(line) for line in lines]


def _read_up_to(descriptor: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(descriptor, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _shown(line: str) -> str:
    text = line.removesuffix("\r")
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + "…"
    return text.translate(_CONTROLS)


def text_lines(located: Located) -> list[str]:
    """The context of a frame's line as the text forms write it below that line (none
    without context): `    -> 12  code` for the line itself, `     | 11  code` around it."""
    context = located.context
    if context is None:
        return []
    width = len(str(context.first + len(context.lines) - 1))
    return [
        f"{INDENT}{MARK if number == located.line else OTHER} {number:>{width}}  {text}".rstrip()
        for number, text in enumerate(context.lines, context.first)
    ]
