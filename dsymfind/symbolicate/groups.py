"""`symbolicate --group`: reports that crashed the same way, counted together.

A report's signature is how it ended (the exception type and signal; for a MetricKit
diagnostic that is no crash, its kind: `hang`, `cpuException`, ...) and the top frames of
its crashed thread that lie in the app's own images (not Apple's), by symbol: each
inlined callee counts as a frame, offsets and addresses are left out, so one crash
reads the same in every build. When no app frame has a name, the first frame's image
and offset stand in. The reports are grouped once symbolicated (a report whose frames it
names already needs no dSYM), each group with its counts per version and build, when it
was first and last seen, and one representative crashed thread.

Written as a text table, JSON, or one HTML page that needs nothing else: no script, no
font, no request; every string a report gave is escaped.
"""

from __future__ import annotations

import datetime
import html
import json
import os
import re
from typing import Any, NamedTuple

from dsymfind.apple.crashreport import EXCEPTION_NAMES, SIGNAL_NAMES
from dsymfind.symbolicate import output
from dsymfind.symbolicate.model import Frame, Report, Thread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

DEFAULT_FRAMES = 3
TEXT, JSON = "text", "json"
# What a text report's header may say before its threads start: looked for only there.
MAX_HEADER_LINES = 200
_HEADER = re.compile(r"(?P<key>Version|Exception Type|Date/Time|Crashed Thread):\s+(?P<value>.*)")
_VERSION = re.compile(r"(?P<version>\S+?)\s*\((?P<build>[^()]*)\)")
_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d+))?"
    r"\s*(?P<zone>Z|[+-]\d{2}:?\d{2})?"
)
UNKNOWN = "unknown"


class Options(NamedTuple):
    frames: int  # app frames in a signature
    form: str  # TEXT or JSON, for stdout or -o FILE
    page: str | None  # --html FILE


class Entry(NamedTuple):
    """One crash to group: a report, or one diagnostic of a MetricKit payload."""

    path: str
    report: Report
    thread: Thread | None  # its crashed thread
    ending: str  # exception type and signal, or the diagnostic's kind
    version: str | None
    build: str | None
    seen: datetime.datetime | None


class Group:
    __slots__ = ("builds", "count", "first", "last", "representative", "signature")

    def __init__(self, signature: tuple[str, tuple[str, ...]], representative: Entry) -> None:
        self.signature = signature
        self.representative = representative
        self.count = 0
        self.builds: dict[tuple[str | None, str | None], int] = {}
        self.first: datetime.datetime | None = None
        self.last: datetime.datetime | None = None

    def add(self, entry: Entry) -> None:
        self.count += 1
        key = (entry.version, entry.build)
        self.builds[key] = self.builds.get(key, 0) + 1
        seen = entry.seen
        if seen is not None:
            if self.first is None or seen < self.first:
                self.first = seen
            if self.last is None or seen > self.last:
                self.last = seen


def entries(path: str, report: Report) -> list[Entry]:
    """The crashes of a report: itself, or each diagnostic of a MetricKit payload."""
    if report.kind == "metrickit":
        return _diagnostics(path, report)
    if report.kind == "ips":
        return [_ips(path, report)]
    if report.kind == "crash":
        return [_text(path, report)]
    return [Entry(path, report, _crashed(report.threads), report.kind, None, None, None)]


def _ips(path: str, report: Report) -> Entry:
    parts = report.document
    metadata = parts.metadata if isinstance(parts.metadata, dict) else {}
    body = parts.body if isinstance(parts.body, dict) else {}
    exception = body.get("exception")
    ending = UNKNOWN
    if isinstance(exception, dict):
        ending = _ending(exception.get("type"), exception.get("signal"))
    bundle = body.get("bundleInfo")
    bundle = bundle if isinstance(bundle, dict) else {}
    version = _string(metadata.get("app_version")) or _string(
        bundle.get("CFBundleShortVersionString")
    )
    build = _string(metadata.get("build_version")) or _string(bundle.get("CFBundleVersion"))
    seen = _time(body.get("captureTime")) or _time(metadata.get("timestamp"))
    thread = _crashed([t for t in report.threads if t.index is not None] or report.threads)
    return Entry(path, report, thread, ending, version, build, seen)


def _text(path: str, report: Report) -> Entry:
    said: dict[str, str] = {}
    for line in report.document.lines[:MAX_HEADER_LINES]:
        found = _HEADER.match(line)
        if found is not None:
            said.setdefault(found["key"], found["value"].strip())
    version = build = None
    if "Version" in said:
        written = _VERSION.match(said["Version"])
        if written is None:
            version = said["Version"] or None
        else:
            version, build = written["version"], written["build"].strip() or None
    ending = said.get("Exception Type") or UNKNOWN
    seen = _time(said.get("Date/Time"))
    metadata = _metadata(report.document.prefix)
    # An .ips metadata line says which is the version and which the build, where the
    # text's `Version:` does not (iOS wrote the build first).
    version = _string(metadata.get("app_version")) or version
    build = _string(metadata.get("build_version")) or build
    seen = seen or _time(metadata.get("timestamp"))
    return Entry(path, report, _crashed(report.threads), ending, version, build, seen)


def _diagnostics(path: str, report: Report) -> list[Entry]:
    found = []
    for number, diagnostic in enumerate(report.diagnostics):
        metadata = diagnostic.metadata
        kind = (diagnostic.kind or UNKNOWN).removesuffix("Diagnostics")
        ending = kind
        if kind == "crash":
            exception, signal = metadata.get("exceptionType"), metadata.get("signal")
            if isinstance(exception, int):
                exception = EXCEPTION_NAMES.get(exception, exception)
            if isinstance(signal, int):
                signal = SIGNAL_NAMES.get(signal, signal)
            ending = _ending(exception, signal)
        own = [thread for thread in report.threads if thread.diagnostic == number]
        version = _string(metadata.get("appVersion"))
        build = _string(metadata.get("appBuildVersion"))
        seen = _time(diagnostic.begin)
        found.append(Entry(path, report, _crashed(own), ending, version, build, seen))
    if not report.diagnostics:  # a bare call-stack tree says nothing of how it ended
        found.append(Entry(path, report, _crashed(report.threads), UNKNOWN, None, None, None))
    return found


def _metadata(prefix: str) -> dict[str, Any]:
    if not prefix:
        return {}
    try:
        found = json.loads(prefix)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _ending(exception: object, signal: object) -> str:
    named = [str(value) for value in (exception, signal) if value not in (None, "")]
    if not named:
        return UNKNOWN
    return f"{named[0]} ({named[1]})" if len(named) == 2 else named[0]


def _crashed(threads: list[Thread]) -> Thread | None:
    return next((thread for thread in threads if thread.crashed), threads[0] if threads else None)


def _string(value: object) -> str | None:
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
        return str(value)
    return None


def _time(value: object) -> datetime.datetime | None:
    """A report's time (`2024-05-14 10:21:07.00 +0200`), in UTC; one without a zone is
    taken as UTC."""
    if not isinstance(value, str):
        return None
    found = _TIME.search(value)
    if found is None:
        return None
    zone = found["zone"] or "Z"
    fraction = (found["fraction"] or "0")[:6].ljust(6, "0")
    written = f"{found['date']}T{found['time']}.{fraction}"
    try:
        moment = datetime.datetime.fromisoformat(written)
    except ValueError:
        return None
    offset = datetime.timedelta()
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        offset = -offset if zone[0] == "-" else offset
    return (moment - offset).replace(tzinfo=datetime.UTC)


def signature(entry: Entry, frames: int) -> tuple[str, tuple[str, ...]]:
    """(how it ended, the top `frames` names of the crashed thread in the app's images)."""
    thread = entry.thread
    if thread is None:
        return entry.ending, ()
    images = entry.report.images
    names: list[str] = []
    for frame in thread.frames:
        if frame.image is None or images[frame.image].apple:
            continue
        names += _names(frame)
        if len(names) >= frames:
            return entry.ending, tuple(names[:frames])
    if names:
        return entry.ending, tuple(names)
    return entry.ending, _first_frame(entry, thread)


def _names(frame: Frame) -> list[str]:
    """The frame's symbols, innermost first; none when nothing names it."""
    if frame.symbols:
        return [located.symbol for located in frame.symbols]
    if frame.given is not None:
        symbol = frame.given.get("symbol")
        return [symbol] if isinstance(symbol, str) and symbol else []
    source = frame.source
    if isinstance(source, dict):
        symbol = source.get("symbol")
        if isinstance(symbol, str) and symbol:
            return [symbol]
    return []


def _first_frame(entry: Entry, thread: Thread) -> tuple[str, ...]:
    if not thread.frames:
        return ()
    frame = thread.frames[0]
    named = _names(frame)
    if named:
        return (named[-1],)
    image = "???" if frame.image is None else entry.report.images[frame.image].name
    return (image if frame.offset is None else f"{image} + {frame.offset:#x}",)


def group(found: Iterable[Entry], frames: int) -> list[Group]:
    """The groups, largest first (ties in the order first met)."""
    groups: dict[tuple[str, tuple[str, ...]], Group] = {}
    for entry in found:
        key = signature(entry, frames)
        known = groups.get(key)
        if known is None:
            known = groups[key] = Group(key, entry)
        known.add(entry)
    return sorted(groups.values(), key=lambda g: -g.count)


def as_data(groups: list[Group]) -> dict[str, Any]:
    """What --format json writes (docs/symbolicate.md)."""
    return {
        "reports": sum(g.count for g in groups),
        "groups": [_group_data(g) for g in groups],
    }


def _group_data(found: Group) -> dict[str, Any]:
    ending, frames = found.signature
    builds = sorted(found.builds.items(), key=lambda item: (-item[1], str(item[0])))
    return {
        "signature": {"exception": ending, "frames": list(frames)},
        "count": found.count,
        "versions": [
            {"version": version, "build": build, "count": count}
            for (version, build), count in builds
        ],
        "first_seen": _iso(found.first),
        "last_seen": _iso(found.last),
        "representative": {
            "report": found.representative.path,
            "frames": _stack(found.representative),
        },
    }


def _iso(moment: datetime.datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _stack(entry: Entry) -> list[dict[str, Any]]:
    """The representative's crashed thread as JSON output writes its frames (with their
    `context` where the output gives one)."""
    if entry.thread is None:
        return []
    threads = json.loads(output.as_json(entry.report, {}, {}))["threads"]
    frames: list[dict[str, Any]] = threads[entry.report.threads.index(entry.thread)]["frames"]
    return frames


def write(groups: list[Group], options: Options, out: str | None) -> str | None:
    """The groups in the form asked, for stdout (returned) or -o FILE and the page."""
    data = as_data(groups)
    text = json.dumps(data, indent=2) + "\n" if options.form == JSON else as_table(data)
    if options.page is not None:
        _save(options.page, as_page(data))
        if options.form != JSON and out is None:
            return None
    if out is not None:
        _save(out, text)
        return None
    return text


def _save(path: str, text: str) -> None:
    from dsymfind import atomic
    from dsymfind.errors import DsymfindError

    try:
        atomic.write_bytes(os.path.abspath(path), text.encode(), fsync=False)
    except OSError as exc:
        raise DsymfindError(f"cannot write {path}: {exc.strerror or exc}") from None


def _signature_text(data: dict[str, Any]) -> str:
    frames = data["signature"]["frames"]
    return " > ".join(frames) if frames else "(no frames)"


def _versions_text(data: dict[str, Any]) -> str:
    return ", ".join(f"{_build_name(row)} x{row['count']}" for row in data["versions"])


def _build_name(row: dict[str, Any]) -> str:
    version, build = row["version"] or "?", row["build"]
    return version if build is None else f"{version} ({build})"


def as_table(data: dict[str, Any]) -> str:
    """One row a group, largest first, then each group's representative crashed thread."""
    head = ("#", "COUNT", "EXCEPTION", "TOP FRAMES", "VERSIONS", "FIRST SEEN", "LAST SEEN")
    rows = [head]
    for number, found in enumerate(data["groups"], 1):
        rows.append(
            (
                str(number),
                str(found["count"]),
                found["signature"]["exception"],
                _signature_text(found),
                _versions_text(found),
                found["first_seen"] or "-",
                found["last_seen"] or "-",
            )
        )
    widths = [max(len(row[n]) for row in rows) for n in range(len(head) - 1)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[-1]
        for row in rows
    ]
    lines.append(f"{data['reports']} reports in {len(data['groups'])} groups")
    for number, found in enumerate(data["groups"], 1):
        lines += ["", f"Group {number}: {found['representative']['report']}"]
        lines += [f"  {n:<3} {_frame_text(row)}" for n, row in enumerate(_shown(found), 0)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _shown(found: dict[str, Any]) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = found["representative"]["frames"]
    return frames


def _frame_text(row: dict[str, Any]) -> str:
    image = row.get("image") or "???"
    symbol = row.get("symbol")
    if symbol is None:
        address = row.get("address")
        what = f"{address:#x}" if isinstance(address, int) else "?"
    else:
        offset = row.get("offset")
        what = symbol if offset is None else f"{symbol} + {offset}"
    place = _place(row)
    text = f"{image:<24} {what}" + (f" ({place})" if place else "")
    return text + (" [inlined]" if row.get("inline") else "")


def _place(row: dict[str, Any]) -> str:
    file, line = row.get("file"), row.get("line")
    if not isinstance(file, str) or not file:
        return ""
    name = os.path.basename(file)
    return f"{name}:{line}" if line else name


# The page: no script, no font, no address outside it.
_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;vertical-align:top}
section.group{border-top:1px solid #ccc;margin-top:1.5em}
ol.frames{font-family:ui-monospace,monospace;font-size:12px}
pre.context{background:#f4f4f4;margin:2px 0 6px;padding:4px}
svg text{font-size:11px}
"""
BAR_HEIGHT, BAR_GAP, CHART_WIDTH, LABEL_WIDTH = 18, 4, 640, 160


def as_page(data: dict[str, Any]) -> str:
    """One HTML page, self-contained, every string of a report escaped."""
    groups = data["groups"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Crash groups</title>",
        f"<style>{_STYLE}</style></head><body>",
        f'<h1>Crash groups</h1><p id="summary" data-reports="{data["reports"]}" '
        f'data-groups="{len(groups)}">{data["reports"]} reports in {len(groups)} groups</p>',
        "<h2>Reports per version</h2>",
        _chart(groups),
    ]
    for number, found in enumerate(groups, 1):
        parts.append(_group_section(number, found))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _chart(groups: list[dict[str, Any]]) -> str:
    per_version: dict[str, int] = {}
    for found in groups:
        for row in found["versions"]:
            name = _build_name(row)
            per_version[name] = per_version.get(name, 0) + row["count"]
    if not per_version:
        return "<p>No reports.</p>"
    most = max(per_version.values())
    height = len(per_version) * (BAR_HEIGHT + BAR_GAP)
    bars = []
    span = CHART_WIDTH - LABEL_WIDTH - 60
    for n, (name, count) in enumerate(sorted(per_version.items())):
        y = n * (BAR_HEIGHT + BAR_GAP)
        width = max(1, round(span * count / most))
        bars.append(
            f'<g class="bar" data-version="{_e(name)}" data-count="{count}">'
            f'<text x="0" y="{y + 13}">{_e(name)}</text>'
            f'<rect x="{LABEL_WIDTH}" y="{y}" width="{width}" height="{BAR_HEIGHT}" '
            'fill="#4a78b5"></rect>'
            f'<text x="{LABEL_WIDTH + width + 4}" y="{y + 13}">{count}</text></g>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="versions" width="{CHART_WIDTH}" '
        f'height="{height}" role="img" aria-label="reports per version">' + "".join(bars) + "</svg>"
    )


def _group_section(number: int, found: dict[str, Any]) -> str:
    ending = found["signature"]["exception"]
    frames = "".join(f"<li>{_e(name)}</li>" for name in found["signature"]["frames"])
    versions = "".join(
        f'<tr class="version"><td>{_e(_build_name(row))}</td><td>{row["count"]}</td></tr>'
        for row in found["versions"]
    )
    stack = "".join(_frame_item(row) for row in found["representative"]["frames"])
    return (
        f'<section class="group" id="group-{number}" data-count="{found["count"]}">'
        f'<h2>#{number} <span class="count">{found["count"]}</span> reports: '
        f'<span class="exception">{_e(ending)}</span></h2>'
        f'<ol class="signature">{frames}</ol>'
        f"<p>First seen {_e(found['first_seen'] or '-')}, "
        f"last seen {_e(found['last_seen'] or '-')}</p>"
        f"<table><tr><th>version</th><th>reports</th></tr>{versions}</table>"
        f'<h3>Crashed thread of <span class="report">'
        f"{_e(found['representative']['report'])}</span></h3>"
        f'<ol class="frames" start="0">{stack}</ol></section>'
    )


def _frame_item(row: dict[str, Any]) -> str:
    text = _e(_frame_text(row))
    context = _context(row.get("context"))
    return f"<li>{text}{context}</li>"


def _context(context: object) -> str:
    """A frame's source lines (`{"first": N, "lines": [...]}`), numbered; nothing when
    the frame has none."""
    if not isinstance(context, dict):
        return ""
    lines = context.get("lines")
    first = context.get("first", context.get("start", 1))
    if not isinstance(lines, list) or not isinstance(first, int):
        return ""
    shown = "\n".join(f"{first + n:>5}  {line}" for n, line in enumerate(lines))
    return f'<pre class="context">{_e(shown)}</pre>'


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
