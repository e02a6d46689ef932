"""Batches of reports a CI job can act on: folders as inputs, `-o DIR` mirroring them, the
`--summary` file, and progress on stderr for long batches (docs/symbolicate.md, "Batches").

Every file under a folder is taken for a report, whatever its name: reports are told
apart by content, and a file that is none is its own `unreadable` line. Only hidden files
and folders (`.DS_Store`, `.git`) are passed over, and the output folder when it lies
inside an input one (a second run must not read the first one's outputs).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, NamedTuple

from dsymfind.errors import DsymfindError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import TextIO, TypeVar

    from dsymfind.symbolicate.model import Report, ReportImage

    T = TypeVar("T")

# What the summary says of a report: its frames all named, some left bare, not a report
# that could be read, or read and symbolicated but not written.
COMPLETE, PARTIAL, UNREADABLE, UNWRITTEN = "complete", "partial", "unreadable", "unwritten"
STATUSES = (COMPLETE, PARTIAL, UNREADABLE, UNWRITTEN)
# A batch this long says how far it got; a shorter one is over before it would matter.
LONG_BATCH = 100
# In a log, a line each time this many more reports are done.
LOG_EVERY = 100
REDRAW_INTERVAL = 0.1
BAR_WIDTH = 24


class Input(NamedTuple):
    path: str
    # Its path under the folder it was found in (`-o DIR` writes it there); None for a
    # report named on the command line, written as DIR/<its name>.
    relative: str | None


def expand(inputs: Sequence[str], out: str | None) -> list[Input]:
    """The reports the inputs name, each once: a file as it is, a folder as every file
    under it (sorted, so that a run's order and its outputs' names do not depend on the
    file system's)."""
    skipped = os.path.realpath(out) if out is not None else None
    found: dict[str, Input] = {}
    for given in inputs:
        if not os.path.isdir(given):
            found.setdefault(given, Input(given, None))
            continue
        for path, relative in _walk(given, skipped):
            found.setdefault(path, Input(path, relative))
    return list(found.values())


def _walk(folder: str, skipped: str | None) -> list[tuple[str, str]]:
    listed = []
    for root, folders, files in os.walk(folder):
        # os.walk follows no link to a folder: a report tree cannot loop, nor lead out.
        folders[:] = sorted(
            name
            for name in folders
            if not name.startswith(".") and os.path.realpath(os.path.join(root, name)) != skipped
        )
        # Each folder's path under `folder` made once, not each file's by relpath (which
        # asks the system for the working folder twice a file).
        under = os.path.relpath(root, folder)
        for name in sorted(files):
            if not name.startswith("."):
                relative = name if under == os.curdir else os.path.join(under, name)
                listed.append((os.path.join(root, name), relative))
    return listed


def has_folder(inputs: Sequence[str]) -> bool:
    return any(os.path.isdir(given) for given in inputs)


def target(folder: str, given: Input, form: str, taken: set[str]) -> str:
    """Where `given` is written under `folder`: at its path under its input folder (or
    its name, for a report named alone), `.json` added for JSON; never twice the same
    name, never outside `folder`."""
    name = given.relative or os.path.basename(given.path.rstrip("/")) or "report"
    name = os.path.normpath(name)
    if os.path.isabs(name) or name == ".." or name.startswith(".." + os.sep):
        name = os.path.basename(name) or "report"
    if form == "json" and not name.endswith(".json"):
        name += ".json"
    stem, number = name, 1
    while name in taken:
        number += 1
        name = f"{stem}-{number}"
    taken.add(name)
    return os.path.join(folder, name)


def refused_target(
    target_path: str,
    found: tuple[int, int],
    source: tuple[int, int] | None,
    inputs: set[tuple[int, int]],
) -> str | None:
    """Why `target_path`, a file that exists (`found`: its device and inode, from the one
    stat an output gets), may not be written: it is the report itself, or another report
    of the batch (`-o` onto the input folder, or `a.ips` written as JSON where
    `a.ips.json` is also an input). None when it may be replaced."""
    if found == source:
        return f"{target_path} is the report itself; write to another -o"
    if found in inputs:
        return f"{target_path} is a report of this batch; write to another -o"
    return None


def identities(inputs: Iterable[Input]) -> dict[str, tuple[int, int]]:
    """The device and inode of each input that could be read, by its path."""
    return {given.path: found for given in inputs if (found := _identity(given.path)) is not None}


def _identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return status.st_dev, status.st_ino


# -- the summary -------------------------------------------------------------------------


def check_summary_path(path: str) -> None:
    """Fail before any work when the summary could not be written where asked."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise DsymfindError(f"cannot write the summary to {path}: it is a folder")
    if not os.path.isdir(folder):
        raise DsymfindError(f"cannot write the summary to {path}: no folder {folder}")


class BareImage(NamedTuple):
    uuid: str | None
    name: str
    status: str  # the status line's word: missing or mismatch
    verdict: str | None  # fetch/verdicts.py's word for a missing one; None otherwise


def entry(
    path: str,
    stated: tuple[str | None, str | None, str | None],
    status: str,
    bare: Sequence[BareImage],
    output: str | None,
) -> dict[str, Any]:
    """One report's object in the summary; `stated` its app, version and build (identity)."""
    app, version, build = stated
    return {
        "path": path,
        "app": app,
        "version": version,
        "build": build,
        "status": status,
        "bare_images": [image._asdict() for image in bare],
        "output": output,
    }


def bare_images(
    needed: dict[str, ReportImage], statuses: dict[str, str], verdicts: dict[str, str]
) -> list[BareImage]:
    """The images (by image_key) whose frames were left bare: missing or mismatched."""
    return [
        BareImage(image.uuid, image.name, statuses[key], verdicts.get(key))
        for key, image in needed.items()
        if statuses.get(key) in ("missing", "mismatch")
    ]


def write_summary(path: str, entries: list[dict[str, Any]]) -> None:
    """The summary as JSON, replacing `path` whole or not at all; DsymfindError (one
    line) when it cannot be written."""
    from dsymfind import atomic
    from dsymfind.symbolicate.ips import indented

    totals = {"reports": len(entries)}
    totals.update({status: 0 for status in STATUSES})
    for each in entries:
        totals[each["status"]] += 1
    text = indented({"reports": entries, "totals": totals}) + "\n"
    try:
        atomic.write_bytes(path, text.encode(), fsync=False)
    except OSError as exc:
        raise DsymfindError(f"cannot write the summary to {path}: {exc.strerror or exc}") from None


def identity(report: Report) -> tuple[str | None, str | None, str | None]:
    """(app, version, build) as the report states them; None where it does not."""
    document = report.document
    if report.kind == "ips":
        metadata, body = document.metadata, document.body or {}
        info = body.get("bundleInfo")
        info = info if isinstance(info, dict) else {}
        return (
            _text(metadata.get("app_name")) or _text(body.get("procName")),
            _text(metadata.get("app_version")) or _text(info.get("CFBundleShortVersionString")),
            _text(metadata.get("build_version")) or _text(info.get("CFBundleVersion")),
        )
    if report.kind == "crash":
        return _text_identity(getattr(document, "lines", ()))
    if report.kind == "metrickit" and isinstance(document, dict):
        return _metrickit_identity(document)
    return None, None, None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _text_identity(lines: Iterable[str]) -> tuple[str | None, str | None, str | None]:
    """From Apple's text header: `Process: NAME [PID]`, `Version: 1.2 (345)`."""
    app = version = build = None
    for line in lines:
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "Process" and app is None:
            app = value.split(" [", 1)[0] or None
        elif key == "Version" and version is None:
            version, _, rest = value.partition(" (")
            build = rest.rstrip(")") or None
            version = version or None
        elif key.startswith("Binary Images") or key.startswith("Thread 0"):
            break
    return app, version, build


def _metrickit_identity(document: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """From the first diagnostic's `diagnosticMetaData` (MetricKit names no app, only
    its bundle identifier)."""
    found: list[dict[str, Any]] = []

    def visit(value: object, depth: int) -> None:
        if found or depth > 4:
            return
        if isinstance(value, dict):
            meta = value.get("diagnosticMetaData")
            if isinstance(meta, dict):
                found.append(meta)
                return
            for inner in value.values():
                visit(inner, depth + 1)
        elif isinstance(value, list):
            for inner in value[:1]:
                visit(inner, depth + 1)

    visit(document, 0)
    meta = found[0] if found else {}
    return (
        _text(meta.get("bundleIdentifier")),
        _text(meta.get("appVersion")),
        _text(meta.get("appBuildVersion")),
    )


# -- progress --------------------------------------------------------------------------


class Meter:
    """How far a long batch is, on stderr: on a terminal a bar redrawn in place (hidden
    while other lines are printed), in a log a line each LOG_EVERY reports."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.on = total >= LONG_BATCH
        self.live = self.on and _is_terminal(self.stream)
        self.done = 0
        self.doing = ""
        self._drawn = False
        self._drawn_at = 0.0

    def phase(self, doing: str, total: int) -> None:
        self.doing, self.done, self.total = doing, 0, total

    def each(self, items: Iterable[T]) -> Iterator[T]:
        """The items, the bar cleared while each is worked on (its lines printed) and a
        step counted after it, however its turn of the loop ended."""
        for item in items:
            self.hide()
            yield item
            self.step()
        self.hide()

    def step(self) -> None:
        self.done += 1
        if not self.on:
            return
        if self.live:
            now = time.monotonic()
            due = now - self._drawn_at >= REDRAW_INTERVAL or self.done == self.total
            if due or not self._drawn:
                self._drawn_at = now
                self.stream.write(f"\r\x1b[K{self._bar()}")
                self.stream.flush()
                self._drawn = True
        elif self.done % LOG_EVERY == 0 or self.done == self.total:
            print(f"dsymfind: {self.done} of {self.total} reports {self.doing}", file=self.stream)

    def hide(self) -> None:
        """Clear the bar before another line is printed (it comes back at the next step)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def _bar(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = round(fraction * BAR_WIDTH)
        return (
            f"{self.doing} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%}"
            f"  {self.done}/{self.total} reports"
        )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
