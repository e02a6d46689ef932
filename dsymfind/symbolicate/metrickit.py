"""MetricKit: a diagnostic payload (`MXDiagnosticPayload.jsonRepresentation()`), one
diagnostic alone (`MXCrashDiagnostic` and the others), or a bare call-stack tree.

A payload holds lists of diagnostics (`crashDiagnostics`, `hangDiagnostics`,
`cpuExceptionDiagnostics`, `diskWriteExceptionDiagnostics`, `appLaunchDiagnostics`),
each with its `diagnosticMetaData` and a `callStackTree`:
`callStacks[].callStackRootFrames[]`, each frame with `binaryUUID`, `binaryName`,
`address`, `offsetIntoBinaryTextSegment`, `sampleCount` and nested `subFrames` (its
callers). Every diagnostic is read, each its own (`Report.diagnostics`), and each call
stack is a thread of its diagnostic (`threadAttributed`: crashed).

Written back as it came, each frame looked up gaining the keys an `.ips` frame gains
(`symbol`, `symbolLocation`, `sourceFile`, `sourceLine`); an inlined callee becomes a
frame of its own in the tree, its caller the one subframe under it, with the frame's
own fields and `"inline": true`, as the `.ips` form puts it before its caller. Frames
that already carry a `symbol` are kept, so a symbolicated payload reads back unchanged.

What `offsetIntoBinaryTextSegment` means depends on the payload's age (docs/symbolicate.md):
older payloads put the image's load address there, newer ones the offset. A value V is
taken as the load address when V <= address, V is page-aligned and V is at least 4 GiB
(64-bit Apple platforms load every image above the 4 GiB zero page, and no image's code
is that large); the offset is then address - V. Otherwise V is the offset.

MetricKit names an image but gives no path, so Apple's are told by name
(crashreport.is_apple_image): one of the system libraries and frameworks a backtrace
usually passes through, or any name of Apple's `libsystem_*` and `libswift*` families.
Their frames left bare do not count as failures; their symbol tables are looked up as any
image's (symbolicate/dsyms.py).
"""

from __future__ import annotations

from dsymfind.apple.crashreport import CrashReportError, is_apple_image
from dsymfind.symbolicate.ips import indented, symbol_keys
from dsymfind.symbolicate.model import Diagnostic, Frame, Report, ReportImage, Thread
from dsymfind.uuids import normalize_uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from dsymfind.symbolicate.model import Seen

KIND = "metrickit"

PAGE_BYTES = 0x1000
LOWEST_64BIT_LOAD_ADDRESS = 1 << 32
# Frames followed down one stack: real ones hold a few hundred; a crafted chain would
# otherwise cost memory for nothing.
MAX_FRAMES_PER_STACK = 100_000
# A payload's lists of diagnostics, as MetricKit names them. Any other key ending so that
# holds a list is read the same way: a kind a later OS adds is not lost.
DIAGNOSTIC_KINDS = (
    "crashDiagnostics",
    "hangDiagnostics",
    "cpuExceptionDiagnostics",
    "diskWriteExceptionDiagnostics",
    "appLaunchDiagnostics",
)
DIAGNOSTICS_SUFFIX = "Diagnostics"
# A diagnostic alone does not say its kind; the metadata only its kind carries does.
KIND_BY_METADATA = (
    ("exceptionType", "crashDiagnostics"),
    ("signal", "crashDiagnostics"),
    ("terminationReason", "crashDiagnostics"),
    ("hangDuration", "hangDiagnostics"),
    ("totalCPUTime", "cpuExceptionDiagnostics"),
    ("writesCaused", "diskWriteExceptionDiagnostics"),
    ("launchDuration", "appLaunchDiagnostics"),
)
TREE, STACKS, METADATA = "callStackTree", "callStacks", "diagnosticMetaData"
BEGIN, END = "timeStampBegin", "timeStampEnd"
# The fields that say which frame an entry is: an inlined callee's entry repeats them.
FRAME_FIELDS = frozenset(
    {"binaryUUID", "offsetIntoBinaryTextSegment", "sampleCount", "binaryName", "address"}
)


def is_metrickit(document: dict[str, Any]) -> bool:
    return any(key in document for key in (*DIAGNOSTIC_KINDS, TREE, STACKS))


def read(seen: Seen) -> Report:
    document = seen.body
    assert document is not None  # formats.parse: a JSON body
    images = _Images()
    diagnostics: list[Diagnostic] = []
    threads: list[Thread] = []
    for diagnostic, tree in _trees(document):
        number = None
        if diagnostic is not None:
            number = len(diagnostics)
            diagnostics.append(diagnostic)
        if tree is not None:
            threads += _threads(tree, number, images)
    return Report(KIND, images.listed, threads, "", document, diagnostics)


def _trees(document: dict[str, Any]) -> list[tuple[Diagnostic | None, dict[str, Any] | None]]:
    """Each diagnostic (None for a bare tree) with its call-stack tree (None without one)."""
    if STACKS in document:
        return [(None, document)]
    if TREE in document:
        return [_diagnostic(document, _kind_of(document), None, document)]
    found: list[tuple[Diagnostic | None, dict[str, Any] | None]] = []
    for kind, listed in document.items():
        known = kind in DIAGNOSTIC_KINDS
        if known or (kind.endswith(DIAGNOSTICS_SUFFIX) and isinstance(listed, list)):
            for index, entry in enumerate(_list(listed, kind)):
                if isinstance(entry, dict):
                    found.append(_diagnostic(entry, kind, index, document))
    return found


def _diagnostic(
    entry: dict[str, Any], kind: str | None, index: int | None, payload: dict[str, Any]
) -> tuple[Diagnostic, dict[str, Any] | None]:
    metadata = entry.get(METADATA)
    tree = entry.get(TREE)
    found = Diagnostic(
        kind,
        index,
        metadata if isinstance(metadata, dict) else {},
        entry.get(BEGIN, payload.get(BEGIN)),
        entry.get(END, payload.get(END)),
    )
    return found, tree if isinstance(tree, dict) else None


def _kind_of(entry: dict[str, Any]) -> str | None:
    metadata = entry.get(METADATA)
    if not isinstance(metadata, dict):
        return None
    return next((kind for key, kind in KIND_BY_METADATA if key in metadata), None)


def _threads(tree: dict[str, Any], diagnostic: int | None, images: _Images) -> list[Thread]:
    threads = []
    for index, stack in enumerate(_list(tree.get(STACKS), STACKS)):
        if not isinstance(stack, dict):
            continue
        roots = _list(stack.get("callStackRootFrames"), "callStackRootFrames")
        frames = [_frame(entry, depth, images) for depth, entry in _walk(roots)]
        threads.append(Thread(index, stack.get("threadAttributed") is True, frames, diagnostic))
    return threads


def _walk(roots: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """Each frame with its depth in the stack, callers after callees, depth first."""
    found: list[tuple[int, dict[str, Any]]] = []
    pending = [(0, entry) for entry in reversed(roots)]
    while pending and len(found) < MAX_FRAMES_PER_STACK:
        depth, entry = pending.pop()
        if not isinstance(entry, dict):
            continue
        found.append((depth, entry))
        callers = entry.get("subFrames")
        if isinstance(callers, list):
            pending += [(depth + 1, caller) for caller in reversed(callers)]
    return found


def _frame(entry: dict[str, Any], depth: int, images: _Images) -> Frame:
    # is_address spelled out (a parsed int is never a subclass but bool): this runs for
    # every frame of every stack.
    named = "symbol" in entry
    raw = entry.get("binaryUUID")
    uuid = images.uuid(raw) if isinstance(raw, str) else None
    value = entry.get("offsetIntoBinaryTextSegment")
    if uuid is None or type(value) is not int or value < 0:
        return Frame(None, None, depth, entry, named=named)
    raw_address = entry.get("address")
    address = raw_address if type(raw_address) is int and raw_address >= 0 else None
    offset = value
    if address is not None and _is_load_address(value, address):
        offset = address - value
    raw_name = entry.get("binaryName")
    base = address - offset if address is not None and address >= offset else None
    number = images.index(uuid, raw_name if isinstance(raw_name, str) else "???", base)
    return Frame(number, offset, depth, entry, named=named)


class _Images:
    """The images frames name, each UUID once, as the first frame of it describes it."""

    def __init__(self) -> None:
        self.listed: list[ReportImage] = []
        self._numbers: dict[str, int] = {}
        self._uuids: dict[str, str | None] = {}  # by the spelling frames give

    def uuid(self, given: str) -> str | None:
        """`given` normalized (None: no UUID), once for each spelling: the frames of a
        payload name few images."""
        found = self._uuids.get(given, "")  # "": not seen (no UUID is spelled so)
        if found == "":
            found = self._uuids[given] = normalize_uuid(given)
        return found

    def index(self, uuid: str, name: str, base: int | None) -> int:
        number = self._numbers.get(uuid)
        if number is None:
            number = self._numbers[uuid] = len(self.listed)
            self.listed.append(ReportImage(uuid, name, "", base, is_apple_image("", name)))
        return number


def _is_load_address(value: int, address: int) -> bool:
    return value <= address and value % PAGE_BYTES == 0 and value >= LOWEST_64BIT_LOAD_ADDRESS


def _list(value: object, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CrashReportError(f"{what} is not a list")
    return value


def write(report: Report) -> str:
    """The payload (or diagnostic, or tree) as it came, its frames named in place."""
    for frame in report.frames():
        if frame.symbols and isinstance(frame.source, dict):
            _name(frame, frame.source)
    return indented(report.document) + "\n"


def _name(frame: Frame, entry: dict[str, Any]) -> None:
    """Name `entry`, the frame's place in its tree; with inlined callees, the entry
    becomes the innermost callee, each callee holding the next one out as its one
    subframe, and the function they were inlined into last, with the frame's callers."""
    *callees, function = frame.symbols
    node = {**entry, **symbol_keys(frame.offset, function)}
    fields = {key: value for key, value in entry.items() if key in FRAME_FIELDS}
    for located in reversed(callees):
        keys = symbol_keys(frame.offset, located)
        node = {**fields, **keys, "inline": True, "subFrames": [node]}
    entry.clear()
    entry.update(node)
