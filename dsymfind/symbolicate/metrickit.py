"""MetricKit crash diagnostics (`MXCrashDiagnostic`, `MXDiagnosticPayload`) and bare
call-stack trees: `callStackTree.callStacks[].callStackRootFrames[]`, each frame with
`binaryUUID`, `binaryName`, `address`, `offsetIntoBinaryTextSegment` and nested
`subFrames` (its callers). Written out in the JSON form (output.py); MetricKit has no
symbolicated form of its own.

What `offsetIntoBinaryTextSegment` means depends on the payload's age (docs/symbolicate.md):
older payloads put the image's load address there, newer ones the offset. A value V is
taken as the load address when V <= address, V is page-aligned and V is at least 4 GiB
(64-bit Apple platforms load every image above the 4 GiB zero page, and no image's code
is that large); the offset is then address - V. Otherwise V is the offset.

MetricKit names an image but gives no path, so Apple's are told by name
(crashreport.is_apple_image): one of the system libraries and frameworks a backtrace
usually passes through, or any name of Apple's `libsystem_*` and `libswift*` families.
Their dSYMs are not fetched; one on this machine is used all the same.
"""

from __future__ import annotations

from typing import Any

from dsymfind.apple.crashreport import CrashReportError, is_apple_image
from dsymfind.symbolicate.model import Frame, Report, ReportImage, Thread, is_address
from dsymfind.uuids import normalize_uuid

KIND = "metrickit"

PAGE_BYTES = 0x1000
LOWEST_64BIT_LOAD_ADDRESS = 1 << 32
# Frames followed down one stack: real ones hold a few hundred; a crafted chain would
# otherwise cost memory for nothing.
MAX_FRAMES_PER_STACK = 100_000


def is_metrickit(document: dict[str, Any]) -> bool:
    return any(key in document for key in ("callStackTree", "crashDiagnostics", "callStacks"))


def read(document: dict[str, Any]) -> Report:
    images: list[ReportImage] = []
    image_numbers: dict[str, int] = {}
    threads: list[Thread] = []
    for tree in _trees(document):
        for stack in _list(tree.get("callStacks"), "callStacks"):
            if not isinstance(stack, dict):
                continue
            crashed = stack.get("threadAttributed") is True
            roots = _list(stack.get("callStackRootFrames"), "callStackRootFrames")
            frames = [_frame(entry, n, images, image_numbers) for n, entry in _walk(roots)]
            threads.append(Thread(len(threads), crashed, frames))
    return Report(KIND, images, threads, "", document)


def _trees(document: dict[str, Any]) -> list[dict[str, Any]]:
    if "callStacks" in document:
        return [document]
    if "callStackTree" in document:
        diagnostics = [document]
    else:
        diagnostics = _list(document.get("crashDiagnostics"), "crashDiagnostics")
    trees = [d.get("callStackTree") for d in diagnostics if isinstance(d, dict)]
    return [tree for tree in trees if isinstance(tree, dict)]


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


def _frame(
    entry: dict[str, Any], depth: int, images: list[ReportImage], numbers: dict[str, int]
) -> Frame:
    raw = entry.get("binaryUUID")
    uuid = normalize_uuid(raw) if isinstance(raw, str) else None
    value = entry.get("offsetIntoBinaryTextSegment")
    if uuid is None or not isinstance(value, int) or not is_address(value):
        return Frame(None, None, depth, entry)
    raw_address = entry.get("address")
    address = raw_address if isinstance(raw_address, int) and is_address(raw_address) else None
    offset = value
    if address is not None and _is_load_address(value, address):
        offset = address - value
    number = numbers.get(uuid)
    if number is None:
        raw_name = entry.get("binaryName")
        name = raw_name if isinstance(raw_name, str) else "???"
        base = address - offset if address is not None and address >= offset else None
        numbers[uuid] = number = len(images)
        images.append(ReportImage(uuid, name, "", base, is_apple_image("", name)))
    return Frame(number, offset, depth, entry)


def _is_load_address(value: int, address: int) -> bool:
    return value <= address and value % PAGE_BYTES == 0 and value >= LOWEST_64BIT_LOAD_ADDRESS


def _list(value: object, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CrashReportError(f"{what} is not a list")
    return value
