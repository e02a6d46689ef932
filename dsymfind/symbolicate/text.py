"""Apple's translated text form (what Xcode and Console show) written from any report.

A `.crash` is that form already: it is written back as crash.py writes it, its own lines
kept. An `.ips` is translated as Apple translates it: the header fields its body and
metadata line hold, the last exception backtrace, each thread with its frames
(`3   crashy                        \t       0x100ec5b3c main + 160 (crashy.c:31)`: the
number in 4 columns, the image in 30 then a tab, the pc right-aligned in 18), each
inlined callee on a line of its own before its caller, marked ` [inlined]` as crash.py
writes one, the crashed thread's registers, and Binary Images. macOS reports write
`Crashed Thread:` and images as `name (version) <uuid> path`, as macOS 12 and later do;
the others `Triggered by Thread:` and `name arch  <uuid> path`, as Xcode's translation of
an iOS report does. A MetricKit payload gives less: each diagnostic is a header from its
metadata, its call stacks as threads, and the images they name (no end, no path: `???`).
"""

from __future__ import annotations

import os

from dsymfind.apple.crashreport import EXCEPTION_NAMES, SIGNAL_NAMES
from dsymfind.symbolicate import crash
from dsymfind.symbolicate.model import (
    Diagnostic,
    Frame,
    Report,
    ReportImage,
    Thread,
    is_address,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from dsymfind.symbolicate.engine import Located

KIND = "text"
# Apple's translated reports say they are this version of the text form.
REPORT_VERSION = "12"
LABEL_COLUMNS = 22
NUMBER_COLUMNS, IMAGE_COLUMNS, ADDRESS_COLUMNS = 4, 30, 18
MACOS_PLATFORM = 1
UNKNOWN = "???"
ADDRESS_MASK = (1 << 64) - 1


def write(report: Report) -> str:
    if report.kind == crash.KIND:
        # An `.ips` metadata line before a text report is no part of the text form; its
        # last line is ended, as every line the writer makes is.
        text = crash.write(report).removeprefix(report.document.prefix)
        return text if not text or text.endswith("\n") else text + "\n"
    if report.kind == "metrickit":
        return _metrickit(report)
    if report.kind in ("sample", "spindump"):
        # Apple's own text already, as `sample` and spindump write it: written back so.
        from dsymfind.symbolicate import formats

        return formats.FORMS[report.kind].write(report)
    return _ips(report)


# --- .ips -------------------------------------------------------------------------------


def _ips(report: Report) -> str:
    body: dict[str, Any] = _dict(report.document.body)
    metadata: dict[str, Any] = _dict(report.document.metadata)
    macos = body.get("platform", metadata.get("platform")) == MACOS_PLATFORM
    described = [_dict(entry) for entry in _list(body.get("threads"))]
    faulting = body.get("faultingThread")
    lines = _ips_header(body, metadata, described, macos)
    for thread in report.threads:
        if thread.index is None:
            lines += ["Last Exception Backtrace:", *_frame_lines(report, thread), ""]
    for thread in report.threads:
        if thread.index is not None:
            entry = described[thread.index] if thread.index < len(described) else {}
            lines += [_heading(thread, entry), *_frame_lines(report, thread), ""]
    crashed = faulting if isinstance(faulting, int) and 0 <= faulting < len(described) else None
    if crashed is not None:
        state = _dict(described[crashed].get("threadState"))
        lines += _thread_state(crashed, state, report.arch)
    lines += ["Binary Images:", *_ips_images(report, body, macos), ""]
    lines += _ext_mods(_dict(body.get("extMods")))
    summary = body.get("vmSummary")
    if isinstance(summary, str) and summary:
        lines += ["VM Region Summary:", *summary.rstrip("\n").split("\n"), ""]
    return "\n".join(lines) + "\n"


def _ips_header(
    body: dict[str, Any], metadata: dict[str, Any], threads: list[dict[str, Any]], macos: bool
) -> list[str]:
    bundle = _dict(body.get("bundleInfo"))
    name = _text(body.get("procName")) or _text(metadata.get("app_name"))
    version = _text(bundle.get("CFBundleShortVersionString")) or _text(metadata.get("app_version"))
    build = _text(bundle.get("CFBundleVersion")) or _text(metadata.get("build_version"))
    code_type = _text(body.get("cpuType"))
    if code_type:
        code_type += " (Translated)" if body.get("translated") is True else " (Native)"
    os_version = _dict(body.get("osVersion"))
    train = _text(os_version.get("train")) or _text(metadata.get("os_version"))
    exception = _dict(body.get("exception"))
    termination = _dict(body.get("termination"))
    faulting = body.get("faultingThread")
    crashed = None
    if isinstance(faulting, int) and not isinstance(faulting, bool):
        crashed = str(faulting)
        queue = _text(threads[faulting].get("queue")) if 0 <= faulting < len(threads) else ""
        if queue:
            crashed += f"  Dispatch queue: {queue}"
    groups: list[list[tuple[str, str | None]]] = [
        [
            ("Process", _with_pid(name, body.get("pid"))),
            ("Path", _text(body.get("procPath"))),
            ("Identifier", _text(bundle.get("CFBundleIdentifier")) or name),
            ("Version", f"{version} ({build})" if version or build else UNKNOWN),
            ("Code Type", code_type),
            ("Parent Process", _with_pid(_text(body.get("parentProc")), body.get("parentPid"))),
            (
                "Responsible",
                _with_pid(_text(body.get("responsibleProc")), body.get("responsiblePid")),
            ),
            ("User ID", _number(body.get("userID"))),
        ],
        [
            ("Date/Time", _text(body.get("captureTime")) or _text(metadata.get("timestamp"))),
            ("OS Version", f"{train} ({_text(os_version.get('build'))})" if train else None),
            ("Report Version", REPORT_VERSION),
            ("Anonymous UUID", _text(body.get("crashReporterKey"))),
        ],
        [("Sleep/Wake UUID", _text(body.get("sleepWakeUUID")))],
        [
            ("Time Awake Since Boot", _seconds(body.get("uptime"))),
            ("Time Since Wake", _seconds(body.get("wakeTime"))),
        ],
        [("System Integrity Protection", _text(body.get("sip")))],
        [("Crashed Thread" if macos else "Triggered by Thread", crashed)],
        [
            ("Exception Type", _exception_type(exception)),
            ("Exception Codes", _text(exception.get("subtype"))),
            ("Exception Codes", _text(exception.get("codes"))),
        ],
        [
            ("Termination Reason", _termination(termination)),
            (
                "Terminating Process",
                _with_pid(_text(termination.get("byProc")), termination.get("byPid")),
            ),
        ],
    ]
    lines = _fields(groups)
    region = body.get("vmRegionInfo")
    if isinstance(region, str) and region:
        lines += [f"VM Region Info: {region}", ""]
    specific = _specific(body.get("asi"))
    if specific:
        lines += ["Application Specific Information:", *specific, ""]
    return lines


def _fields(groups: list[list[tuple[str, str | None]]]) -> list[str]:
    """Each group's fields that have a value, `Label:` padded as Apple pads it, a blank
    line after each group that has one."""
    lines: list[str] = []
    for group in groups:
        present = [f"{label + ':':<{LABEL_COLUMNS}} {value}" for label, value in group if value]
        if present:
            lines += [*present, ""]
    return lines


def _heading(thread: Thread, entry: dict[str, Any]) -> str:
    """`Thread 0 Crashed::  Dispatch queue: com.apple.main-thread`, `Thread 1:`."""
    heading = f"Thread {thread.index}" + (" Crashed" if thread.crashed else "")
    name, queue = _text(entry.get("name")), _text(entry.get("queue"))
    if not name and not queue:
        return heading + ":"
    heading += f":: {name}" if name else "::"
    return heading + (f"  Dispatch queue: {queue}" if queue else "")


def _thread_state(index: int, state: dict[str, Any], code_type: str) -> list[str]:
    """The crashed thread's registers as Apple lays them out: four a line, then the named
    ones; esr with its description."""
    if not state:
        return []
    flavor = _text(state.get("flavor"))
    arm = (flavor or code_type).upper().startswith("ARM")
    what = "ARM Thread State (64-bit)" if arm else "X86 Thread State (64-bit)"
    cells: list[tuple[str, int, int]] = []  # name, value, hex digits
    numbered = state.get("x") if arm else None
    if isinstance(numbered, list):
        for n, register in enumerate(numbered):
            value = _dict(register).get("value")
            if is_address(value):
                cells.append((f"x{n}", value, 16))
    named = [key for key in state if key not in ("x", "flavor")]
    if arm:
        order = ["fp", "lr", "sp", "pc", "cpsr", "far", "esr"]
        named = [key for key in order if key in state] + [k for k in named if k not in order]
    extra = []
    for key in named:
        value = _dict(state.get(key)).get("value")
        if is_address(value):
            extra.append((key, value, 8 if key in ("cpsr", "esr") else 16))
    if arm:
        # Apple's layout: x0 to x27 four a line, then x28 fp lr, sp pc cpsr, far esr.
        whole = len(cells) // 4 * 4
        rest = cells[whole:] + extra
        rows = _rows(cells[:whole], 4) + _rows(rest, 3)
    else:
        rows = _rows(cells + extra, 4)
    # Apple leaves two blank lines between the last thread and its registers.
    lines = ["", f"Thread {index} crashed with {what}:"]
    description = _text(_dict(state.get("esr")).get("description"))
    for row in rows:
        line = "  " + " ".join(f"{name:>4}: 0x{value:0{digits}x}" for name, value, digits in row)
        if description and row and row[-1][0] == "esr":
            line += f" {description}"
        lines.append(line)
    return [*lines, ""]


def _rows(cells: list[tuple[str, int, int]], width: int) -> list[list[tuple[str, int, int]]]:
    return [cells[n : n + width] for n in range(0, len(cells), width)]


def _ips_images(report: Report, body: dict[str, Any], macos: bool) -> list[str]:
    entries = _list(body.get("usedImages"))
    lines = []
    for image, raw in zip(report.images, entries, strict=False):
        entry = _dict(raw)
        size = entry.get("size")
        end = None
        if image.base is not None and is_address(size):
            end = (image.base + size - 1) & ADDRESS_MASK
        path = _text(entry.get("path")) or UNKNOWN
        version = _text(entry.get("CFBundleShortVersionString")) or "*"
        # An image the report names with no usable UUID (all zeros) is written as it came.
        uuid = image.uuid or _text(entry.get("uuid")).upper() or None
        lines.append(_image_line(image._replace(uuid=uuid), end, path, version, macos))
    return lines


def _image_line(image: ReportImage, end: int | None, path: str, version: str, macos: bool) -> str:
    start = UNKNOWN if image.base is None else f"{image.base:#x}"
    stop = UNKNOWN if end is None else f"{end:#x}"
    name = image.name or UNKNOWN
    uuid = (image.uuid or "").lower()
    if macos:
        described = f"{name} ({version}) <{uuid or UNKNOWN}>"
    else:
        described = f"{name} {image.arch or UNKNOWN}  <{uuid.replace('-', '') or UNKNOWN}>"
    return f"{start:>{ADDRESS_COLUMNS}} - {stop:>{ADDRESS_COLUMNS}} {described} {path}"


def _ext_mods(mods: dict[str, Any]) -> list[str]:
    """External Modification Summary, the three counters of each party Apple names."""
    parties = (
        ("targeted", "Calls made by other processes targeting this process:"),
        ("caller", "Calls made by this process:"),
        ("system", "Calls made by all processes on this machine:"),
    )
    lines = []
    for key, title in parties:
        counts = _dict(mods.get(key))
        if counts:
            lines += [f"  {title}", *(f"    {name}: {value}" for name, value in counts.items())]
    return ["External Modification Summary:", *lines, ""] if lines else []


def _exception_type(exception: dict[str, Any]) -> str | None:
    kind, signal = _text(exception.get("type")), _text(exception.get("signal"))
    if not kind:
        return signal or None
    return f"{kind} ({signal})" if signal else kind


def _termination(termination: dict[str, Any]) -> str | None:
    namespace = _text(termination.get("namespace"))
    if not namespace:
        return None
    text = f"Namespace {namespace}"
    code = termination.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        text += f", Code {code}"
    indicator = _text(termination.get("indicator"))
    return f"{text} {indicator}" if indicator else text


def _specific(asi: object) -> list[str]:
    """Application Specific Information: each image's messages."""
    lines: list[str] = []
    for messages in _dict(asi).values():
        if isinstance(messages, list):
            lines += [m for m in messages if isinstance(m, str)]
    return lines


# --- MetricKit ----------------------------------------------------------------------


def _metrickit(report: Report) -> str:
    """Each diagnostic its own text report; a bare call-stack tree one without header."""
    blocks = []
    numbers = sorted(
        {thread.diagnostic for thread in report.threads} | set(range(len(report.diagnostics))),
        key=lambda number: -1 if number is None else number,
    )
    for number in numbers:
        threads = [thread for thread in report.threads if thread.diagnostic == number]
        diagnostic = None if number is None else report.diagnostics[number]
        header = [] if diagnostic is None else _metrickit_header(diagnostic, threads)
        lines = list(header)
        for thread in threads:
            lines += [_heading(thread, {}), *_frame_lines(report, thread), ""]
        lines += ["Binary Images:", *_metrickit_images(report, threads, diagnostic)]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _metrickit_images(
    report: Report, threads: list[Thread], diagnostic: Diagnostic | None
) -> list[str]:
    """The images the diagnostic's frames name. MetricKit gives no image's size nor path:
    an image's end is the highest pc seen in it (the text form needs one, and readers find
    the image by its start), its path `???`, its arch the device's."""
    ends: dict[int, int] = {}
    for frame in (f for t in threads for f in t.frames):
        image = None if frame.image is None else report.images[frame.image]
        address = _address(image, frame)
        if frame.image is not None and address is not None:
            ends[frame.image] = max(ends.get(frame.image, address), address)
    arch = "" if diagnostic is None else _text(diagnostic.metadata.get("platformArchitecture"))
    lines = []
    for number in sorted(ends):
        image = report.images[number]
        lines.append(_image_line(image._replace(arch=arch), ends[number], UNKNOWN, "*", False))
    return lines


def _metrickit_header(diagnostic: Diagnostic, threads: list[Thread]) -> list[str]:
    metadata = _dict(diagnostic.metadata)
    version, build = _text(metadata.get("appVersion")), _text(metadata.get("appBuildVersion"))
    exception = metadata.get("exceptionType")
    signal = metadata.get("signal")
    kind = _named_number(EXCEPTION_NAMES, exception)
    signal_name = _named_number(SIGNAL_NAMES, signal)
    exception_type = f"{kind} ({signal_name})" if kind and signal_name else kind or signal_name
    codes = metadata.get("exceptionCode")
    crashed = next((str(t.index) for t in threads if t.crashed and t.index is not None), None)
    groups: list[list[tuple[str, str | None]]] = [
        [
            ("Identifier", _text(metadata.get("bundleIdentifier"))),
            ("Version", f"{version} ({build})" if version or build else None),
            ("Code Type", _text(metadata.get("platformArchitecture"))),
            ("Diagnostic", diagnostic.kind),
        ],
        [
            ("Date/Time", _text(diagnostic.end) or _text(diagnostic.begin)),
            ("OS Version", _text(metadata.get("osVersion"))),
            ("Report Version", REPORT_VERSION),
        ],
        [
            ("Exception Type", exception_type),
            ("Exception Codes", f"{codes:#018x}" if is_address(codes) else None),
            ("Termination Reason", _text(metadata.get("terminationReason"))),
            ("Hang Duration", _text(metadata.get("hangDuration"))),
        ],
        [("Triggered by Thread", crashed)],
    ]
    return _fields(groups)


# --- frames -------------------------------------------------------------------------


def _frame_lines(report: Report, thread: Thread) -> list[str]:
    lines: list[str] = []
    for number, frame in enumerate(thread.frames):
        head = _frame_head(report, number, frame)
        image = None if frame.image is None else report.images[frame.image]
        if not frame.symbols:
            lines += [f"{head} {text}" for text in _described(frame, image)]
        for located in frame.symbols:
            lines.append(f"{head} {_located(frame, located)}")
            if located.context is not None:  # --source-context, below the line it is for
                from dsymfind.symbolicate import context

                lines += context.text_lines(located)
    return lines


def _frame_head(report: Report, number: int, frame: Frame) -> str:
    image = None if frame.image is None else report.images[frame.image]
    name = UNKNOWN if image is None else image.name or UNKNOWN
    address = _address(image, frame)
    where = UNKNOWN if address is None else f"{address:#x}"
    return f"{number:<{NUMBER_COLUMNS}}{name:<{IMAGE_COLUMNS}}\t{where:>{ADDRESS_COLUMNS}}"


def _address(image: ReportImage | None, frame: Frame) -> int | None:
    if frame.address is not None:
        return frame.address
    if image is not None and image.base is not None and frame.offset is not None:
        return image.base + frame.offset
    source = frame.source
    value = source.get("address") if isinstance(source, dict) else None
    return value if is_address(value) else None


def _described(frame: Frame, image: ReportImage | None) -> Iterable[str]:
    """What follows a frame's pc: each symbol looked up (innermost first), else what the
    report names, else `0xBASE + offset`."""
    if frame.symbols:
        return [_located(frame, located) for located in frame.symbols]
    given = frame.given if frame.given is not None else _given(frame.source)
    if given.get("symbol"):
        return [_named(given)]
    base = image.base if image is not None and image.base is not None else _base(frame)
    if base is not None and frame.offset is not None:
        return [f"{base:#x} + {frame.offset}"]
    return [UNKNOWN]


def _base(frame: Frame) -> int | None:
    address = frame.address
    if address is not None and frame.offset is not None and address >= frame.offset:
        return address - frame.offset
    source = frame.source
    value = source.get("address") if isinstance(source, dict) else None
    if is_address(value) and frame.offset is not None and value >= frame.offset:
        return value - frame.offset
    return None


def _located(frame: Frame, located: Located) -> str:
    offset = None
    if located.start is not None and frame.offset is not None:
        offset = frame.offset - located.start
    file = os.path.basename(located.file) if located.file else None
    given = {"symbol": located.symbol, "offset": offset, "file": file, "line": located.line}
    return _named({**given, "inline": located.inline})


def _named(given: dict[str, Any]) -> str:
    text = str(given["symbol"])
    if given.get("offset") is not None:
        text += f" + {given['offset']}"
    file, line = given.get("file"), given.get("line")
    if file:
        text += f" ({file}:{line})" if line else f" ({file})"
    return text + (crash.INLINED_MARK if given.get("inline") else "")


def _given(source: object) -> dict[str, Any]:
    """What a JSON frame (an `.ips` or MetricKit entry) already names."""
    entry = _dict(source)
    symbol, offset = entry.get("symbol"), entry.get("symbolLocation")
    file, line = entry.get("sourceFile"), entry.get("sourceLine")
    return {
        "symbol": symbol if isinstance(symbol, str) else None,
        "offset": offset if is_address(offset) else None,
        "file": os.path.basename(file) if isinstance(file, str) else None,
        "line": line if is_address(line) else None,
        "inline": entry.get("inline") is True,
    }


# --- values -------------------------------------------------------------------------


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> str | None:
    return str(value) if _is_int(value) else None


def _named_number(names: dict[int, str], value: object) -> str | None:
    """A number's name, else the number; None for no number."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return names.get(value, str(value))


def _seconds(value: object) -> str | None:
    return f"{value} seconds" if _is_int(value) else None


def _with_pid(name: str, pid: object) -> str | None:
    if not name:
        return None
    return f"{name} [{pid}]" if _is_int(pid) else name
