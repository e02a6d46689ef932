"""MetricKit payloads whole: every kind of diagnostic symbolicated and kept apart with its
metadata and timestamps, the payload written back with its frames named, the JSON form
saying which diagnostic each thread came from. The payloads are shaped as Apple's
`MXDiagnosticPayload.jsonRepresentation()` (from a device and from Xcode's simulated
payloads), with frames in the crashy fixture; llvm-symbolizer names what they should."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_UUIDS,
    TEXT_VMADDR,
    crashy_search_path,
    symbolicate,
    symbolizer,
)

ARM = CRASHY_UUIDS["arm64"]
KERNEL_UUID = "0D3A5C1E-7F29-3B48-9E61-2C5D8A4F7B03"
# Where the app and the kernel library were loaded on the device.
APP_BASE, KERNEL_BASE = 0x104A5C000, 0x1F0A29000
# Offsets into crashy's arm64 slice (llvm-objdump): the crash in twice() inlined into
# leaf(); return addresses in trigger() after its call to leaf(), in leaf() after its
# call to norm_of(), in norm_of() after its call to geo::Point::norm(); a pc in the latter.
LEAF_CRASH, TRIGGER_RETURN, LEAF_RETURN, NORM_OF_RETURN, IN_NORM = 0x338, 0x380, 0x348, 0x3C0, 0x3A0
METADATA = {
    "appBuildVersion": "7",
    "appVersion": "1.2",
    "osVersion": "iPhone OS 17.3 (21D50)",
    "deviceType": "iPhone14,5",
    "platformArchitecture": "arm64",
    "regionFormat": "GB",
}
BEGIN, END = "2024-03-04 00:00:00 +0000", "2024-03-04 23:59:00 +0000"
SYMBOL_KEYS = ("symbol", "symbolLocation", "sourceFile", "sourceLine")


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return crashy_search_path(tmp_path, config_file)


run = symbolicate


def stack(*offsets: int, older: bool = False, samples: int = 1) -> dict[str, Any]:
    """A chain of crashy frames, innermost first, each caller the subframe of its callee;
    `older` payloads put the load address in offsetIntoBinaryTextSegment."""
    frame: dict[str, Any] | None = None
    for offset in reversed(offsets):
        entry: dict[str, Any] = {
            "binaryUUID": ARM,
            "offsetIntoBinaryTextSegment": APP_BASE if older else offset,
            "sampleCount": samples,
        }
        if frame is not None:
            entry["subFrames"] = [frame]
        entry |= {"binaryName": "crashy", "address": APP_BASE + offset}
        frame = entry
    assert frame is not None
    return frame


def kernel_frame() -> dict[str, Any]:
    return {
        "binaryUUID": KERNEL_UUID,
        "offsetIntoBinaryTextSegment": KERNEL_BASE,
        "sampleCount": 1,
        "binaryName": "libsystem_kernel.dylib",
        "address": KERNEL_BASE + 0x43C4,
    }


def tree(*stacks: tuple[bool | None, dict[str, Any]], per_thread: bool = True) -> dict[str, Any]:
    made = []
    for attributed, root in stacks:
        entry: dict[str, Any] = {"callStackRootFrames": [root]}
        if attributed is not None:
            entry = {"threadAttributed": attributed, **entry}
        made.append(entry)
    return {"callStacks": made, "callStackPerThread": per_thread}


def diagnostic(call_tree: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "version": "1.0.0",
        "callStackTree": call_tree,
        "diagnosticMetaData": {**METADATA, **metadata},
    }


def payload() -> dict[str, Any]:
    """One diagnostic of each kind, as a device delivers them in one payload."""
    crash = diagnostic(
        tree((False, kernel_frame()), (True, stack(LEAF_CRASH, TRIGGER_RETURN))),
        exceptionType=1,
        exceptionCode=0,
        signal=11,
        terminationReason="Namespace SIGNAL, Code 11 Segmentation fault: 11",
        virtualMemoryRegionInfo="0 is not in any region.",
    )
    hang = diagnostic(
        tree((True, stack(IN_NORM, NORM_OF_RETURN, LEAF_RETURN, TRIGGER_RETURN))),
        hangDuration="2.5 sec",
    )
    cpu = diagnostic(
        tree((None, stack(LEAF_CRASH, TRIGGER_RETURN, samples=20)), per_thread=False),
        totalCPUTime="90 sec",
        totalSampledTime="180 sec",
    )
    disk = diagnostic(
        tree((None, stack(NORM_OF_RETURN - 4, LEAF_RETURN, older=True)), per_thread=False),
        writesCaused="2,147.48 MB",
    )
    launch = diagnostic(tree((True, stack(IN_NORM, NORM_OF_RETURN))), launchDuration="20000 ms")
    return {
        "timeStampEnd": END,
        "crashDiagnostics": [crash],
        "hangDiagnostics": [hang],
        "timeStampBegin": BEGIN,
        "cpuExceptionDiagnostics": [cpu],
        "diskWriteExceptionDiagnostics": [disk],
        "appLaunchDiagnostics": [launch],
    }


def write(path: Path, document: dict[str, Any]) -> str:
    path.write_text(json.dumps(document, indent=2))
    return str(path)


def expected_names(offsets: list[int]) -> list[list[str]]:
    """llvm-symbolizer's frames for each frame: the first a pc, the others return
    addresses, looked up inside their call (4 bytes back on arm64)."""
    lookups = [offset if n == 0 else offset - 4 for n, offset in enumerate(offsets)]
    found = symbolizer(CRASHY_DWARF, "arm64", [TEXT_VMADDR + offset for offset in lookups])
    return [[entry["FunctionName"] for entry in frames] for frames in found]


def names(rows: list[dict[str, Any]]) -> list[str]:
    return [row["symbol"] for row in rows]


def test_every_diagnostic_is_symbolicated_and_kept_apart(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "payload.json", payload())
    status, out, err = run("--format", "json", report, capsys=capsys)
    doc = json.loads(out)
    assert status == 0, err
    kinds = [(d["kind"], d["index"]) for d in doc["diagnostics"]]
    assert kinds == [
        ("crashDiagnostics", 0),
        ("hangDiagnostics", 0),
        ("cpuExceptionDiagnostics", 0),
        ("diskWriteExceptionDiagnostics", 0),
        ("appLaunchDiagnostics", 0),
    ]
    assert all((d["timeStampBegin"], d["timeStampEnd"]) == (BEGIN, END) for d in doc["diagnostics"])
    crash_meta = doc["diagnostics"][0]["diagnosticMetaData"]
    assert (crash_meta["signal"], crash_meta["exceptionType"], crash_meta["appVersion"]) == (
        11,
        1,
        "1.2",
    )
    assert doc["diagnostics"][1]["diagnosticMetaData"]["hangDuration"] == "2.5 sec"
    threads = doc["threads"]
    assert [(t["diagnostic"], t["index"], t["crashed"]) for t in threads] == [
        (0, 0, False),
        (0, 1, True),
        (1, 0, True),
        (2, 0, False),
        (3, 0, False),
        (4, 0, True),
    ]
    want = {
        1: [LEAF_CRASH, TRIGGER_RETURN],
        2: [IN_NORM, NORM_OF_RETURN, LEAF_RETURN, TRIGGER_RETURN],
        3: [LEAF_CRASH, TRIGGER_RETURN],
        4: [NORM_OF_RETURN - 4, LEAF_RETURN],
        5: [IN_NORM, NORM_OF_RETURN],
    }
    for number, offsets in want.items():
        flat = [name for frame in expected_names(offsets) for name in frame]
        assert names(threads[number]["frames"]) == [*flat], number
    assert threads[0]["frames"][0]["image"] == "libsystem_kernel.dylib"
    assert {i["name"]: i["status"] for i in doc["images"]} == {
        "libsystem_kernel.dylib": "system",
        "crashy": "found",
    }


def without_names(node: Any) -> Any:
    """A written payload as it came in: inlined callees' entries folded into their one
    subframe, the keys symbolication adds taken off."""
    if isinstance(node, list):
        return [without_names(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("inline") is True:
        (caller,) = node["subFrames"]
        return without_names(caller)
    return {k: without_names(v) for k, v in node.items() if k not in SYMBOL_KEYS}


def test_a_payload_comes_back_as_the_payload_with_its_frames_named(local_dsyms, tmp_path, capsys):
    original = payload()
    report = write(tmp_path / "payload.json", original)
    status, out, _ = run(report, capsys=capsys)
    written = json.loads(out)
    assert status == 0
    assert without_names(written) == original  # every key and value, in every diagnostic
    crash_root = written["crashDiagnostics"][0]["callStackTree"]["callStacks"][1][
        "callStackRootFrames"
    ][0]
    # twice() inlined into leaf(): a frame of its own before its caller, as .ips has it.
    assert {k: crash_root[k] for k in (*SYMBOL_KEYS, "inline", "address", "sampleCount")} == {
        "symbol": "twice",
        "symbolLocation": LEAF_CRASH - 0x328,
        "sourceFile": "crashy.c",
        "sourceLine": 10,
        "inline": True,
        "address": APP_BASE + LEAF_CRASH,
        "sampleCount": 1,
    }
    (leaf,) = crash_root["subFrames"]
    assert (leaf["symbol"], leaf["sourceLine"], "inline" in leaf) == ("leaf", 14, False)
    assert leaf["subFrames"][0]["symbol"] == "trigger"
    for kind in ("hangDiagnostics", "cpuExceptionDiagnostics", "diskWriteExceptionDiagnostics"):
        root = written[kind][0]["callStackTree"]["callStacks"][0]["callStackRootFrames"][0]
        assert "symbol" in root and "symbol" in root["subFrames"][0], kind
    # Apple's frame is left as it came.
    kernel = written["crashDiagnostics"][0]["callStackTree"]["callStacks"][0]
    assert kernel["callStackRootFrames"] == [kernel_frame()]

    again = tmp_path / "again.json"
    again.write_text(out)
    status, twice, err = run(str(again), capsys=capsys)
    assert (status, twice) == (0, out)
    assert "found" not in err  # every frame named already: no dSYM needed


def test_a_diagnostic_alone_and_a_bare_tree_are_read_too(local_dsyms, tmp_path, capsys):
    alone = diagnostic(tree((True, stack(LEAF_CRASH, TRIGGER_RETURN))), hangDuration="3 sec")
    status, out, _ = run("--format", "json", write(tmp_path / "hang.json", alone), capsys=capsys)
    doc = json.loads(out)
    assert status == 0
    assert [(d["kind"], d["index"]) for d in doc["diagnostics"]] == [("hangDiagnostics", None)]
    assert names(doc["threads"][0]["frames"]) == ["twice", "leaf", "trigger"]

    bare = tree((True, stack(LEAF_CRASH, TRIGGER_RETURN)))
    status, out, _ = run(write(tmp_path / "tree.json", bare), capsys=capsys)
    written = json.loads(out)
    assert status == 0
    root = written["callStacks"][0]["callStackRootFrames"][0]
    assert (root["symbol"], root["subFrames"][0]["symbol"]) == ("twice", "leaf")
    assert without_names(written) == bare


def test_crashed_only_keeps_each_diagnostics_attributed_stacks(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "payload.json", payload())
    status, out, _ = run("--crashed-only", "--format", "json", report, capsys=capsys)
    assert status == 0
    threads = json.loads(out)["threads"]
    # The crash's attributed thread alone; the CPU and disk trees are no thread's: kept.
    assert [(t["diagnostic"], t["index"]) for t in threads] == [
        (0, 1),
        (1, 0),
        (2, 0),
        (3, 0),
        (4, 0),
    ]


def test_a_large_payload_goes_to_a_folder_under_its_own_name(local_dsyms, tmp_path, capsys):
    document = payload()
    many = copy.deepcopy(document["hangDiagnostics"][0])
    document["hangDiagnostics"] = [copy.deepcopy(many) for _ in range(50)]
    first = write(tmp_path / "a.json", document)
    second = write(tmp_path / "b.json", payload())
    status, _, err = run("-o", str(tmp_path / "out"), first, second, capsys=capsys)
    assert status == 0, err
    assert sorted(os.listdir(tmp_path / "out")) == ["a.json", "b.json"]
    written = json.loads((tmp_path / "out" / "a.json").read_text())
    assert len(written["hangDiagnostics"]) == 50
    assert all(
        h["callStackTree"]["callStacks"][0]["callStackRootFrames"][0]["symbol"]
        == "geo::Point::norm() const"
        for h in written["hangDiagnostics"]
    )
