"""Reports whose frames fall in the system libraries of a DeviceSupport tree
(support/device_support.py): a MetricKit payload and `sample` output, with the names
llvm-symbolizer gives the same addresses as the oracle."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dsymfind.symbolicate.addresses import return_address_step
from support.device_support import DeviceSupportTree, SystemLibrary, symbolized

# Where each library is loaded in the reports: far apart, page-aligned, above 4 GiB.
FIRST_BASE = 0x1_8000_0000
BASE_STEP = 0x100_0000
# Into each function: past its first instruction, and still inside it when a return
# address is looked up one instruction back (the generated functions are longer).
INTO_FUNCTION = 8


@dataclass(frozen=True)
class SystemFrame:
    library: SystemLibrary
    arch: str
    uuid: str
    base: int
    offset: int  # image offset (the dylibs' __TEXT is linked at 0: the file address too)
    expected: str  # llvm-symbolizer's name for the address looked up
    function_start: int


def system_frames(tree: DeviceSupportTree, per_slice: int = 2) -> list[SystemFrame]:
    """`per_slice` frames in each slice of each library of `tree`, innermost first, each
    at INTO_FUNCTION bytes into an exported function, named by the oracle."""
    frames = []
    number = 0
    for library in tree.libraries:
        for arch, uuid in library.uuids.items():
            exported = [(n, a) for n, a in library.functions[arch] if "_local_" not in n]
            for name, start in exported[1 : per_slice + 1]:
                base = FIRST_BASE + number * BASE_STEP
                frames.append(
                    SystemFrame(library, arch, uuid, base, start + INTO_FUNCTION, name, start)
                )
            number += 1
    for position, frame in enumerate(frames):
        looked_up = frame.offset - (return_address_step(frame.arch) if position else 0)
        (oracle,) = symbolized(frame.library.path, frame.arch, [looked_up])
        assert oracle == frame.expected, (oracle, frame)
    return frames


def metrickit_payload(frames: list[dict[str, object]]) -> str:
    """A payload of one crash whose one stack holds `frames` (innermost first), each
    the caller of the one before it as MetricKit nests them."""
    root: dict[str, object] | None = None
    for entry in reversed(frames):
        root = {**entry, "sampleCount": 1, "subFrames": [root] if root else []}
    stack = {"threadAttributed": True, "callStackRootFrames": [root]}
    crash = {
        "diagnosticMetaData": {"appVersion": "1.0", "appBuildVersion": "1", "signal": 11},
        "callStackTree": {"callStacks": [stack], "callStackPerThread": True},
    }
    return json.dumps({"timeStampBegin": "2026-12-01 10:00:00", "crashDiagnostics": [crash]})


def metrickit_frame(frame: SystemFrame) -> dict[str, object]:
    return {
        "binaryUUID": frame.uuid,
        "binaryName": frame.library.name,
        "offsetIntoBinaryTextSegment": frame.offset,
        "address": frame.base + frame.offset,
    }


def sample_report(frames: list[SystemFrame], named: tuple[str, str, str, int]) -> str:
    """`sample` output of one thread: `named` (symbol, image, UUID, base), a frame the
    tool named itself, outermost, then `frames` from the outermost in (innermost first
    as given), each `???` with its load address; the Binary Images of all of them."""
    symbol, image, image_uuid, image_base = named
    graph = ["    100 Thread_1   DispatchQueue_1: com.apple.main-thread  (serial)\n"]
    graph.append(f"    + 100 {symbol}  (in {image}) + 12  [{image_base + 0x40:#x}]\n")
    for depth, frame in enumerate(reversed(frames)):
        pad = "  " * (depth + 1)
        address = frame.base + frame.offset
        graph.append(
            f"    +{pad}100 ???  (in {frame.library.name})  load address {frame.base:#x}"
            f" + {frame.offset:#x}  [{address:#x}]\n"
        )
    images = {(image_base, image, image_uuid, f"/usr/lib/{image}")}
    images |= {(f.base, f.library.name, f.uuid, f.library.install_path) for f in frames}
    listed = "".join(
        f"       {base:#x} -        {base + 0xFFFFF:#x}  {name} (1.0) <{uuid}> {path}\n"
        for base, name, uuid, path in sorted(images)
    )
    return (
        "Analysis of sampling Mail (pid 812) every 1 millisecond\n"
        "Process:         Mail [812]\n"
        "Path:            /System/Applications/Mail.app/Contents/MacOS/Mail\n"
        "Identifier:      com.apple.mail\n"
        "Code Type:       ARM64\n"
        "Platform:        macOS\n"
        "\n"
        "OS Version:      macOS 14.3 (23D56)\n"
        "Analysis Tool:   /usr/bin/sample\n"
        "----\n"
        "\n"
        "Call graph:\n" + "".join(graph) + "\n"
        "Total number in stack (recursive counted multiple, when >=5):\n"
        "\n"
        "Binary Images:\n" + listed
    )
