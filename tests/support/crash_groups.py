"""Crash reports made here for `symbolicate --group`: `.ips` reports about crashy (named or
to be symbolicated) with the exception, version, build and time each test asks for."""

from __future__ import annotations

import json
from typing import Any

from support.symbolication import CRASHY_UUIDS, TEXT_VMADDR, ips_report

ARM = CRASHY_UUIDS["arm64"]
DYLD_UUID = "5E8F2A97-1C34-3D6B-A0F5-7B9C3E2D1A48"
DYLD_BASE = 0x180000000
# Offsets into crashy's arm64 slice, and what a backtrace holding them names
# (llvm-symbolizer): the crash in twice() inlined into leaf(), and return addresses.
LEAF_CRASH = 0x338  # twice, leaf
LEAF_RETURN = 0x348  # leaf
TRIGGER_RETURN = 0x380  # trigger
MAIN_RETURN = 0x390  # main
NORM_OF = 0x3C0  # norm_of
SIGNALS = {"EXC_BAD_ACCESS": "SIGSEGV", "EXC_BREAKPOINT": "SIGTRAP", "EXC_CRASH": "SIGABRT"}


def raw_ips(
    offsets: list[int],
    exception: str = "EXC_BAD_ACCESS",
    version: str = "1.0",
    build: str = "1",
    captured: str = "2026-11-30 16:42:10.9120 +0100",
) -> str:
    """A report whose crashed thread holds these offsets into crashy, to be symbolicated,
    its version and build in `bundleInfo` (as the body gives them)."""
    return ips_report(
        ARM,
        "arm64",
        offsets,
        exception={"type": exception, "signal": SIGNALS.get(exception, "SIGSEGV")},
        bundleInfo={"CFBundleShortVersionString": version, "CFBundleVersion": build},
        captureTime=captured,
    )


def named_ips(
    symbols: list[str | tuple[str, bool]],
    exception: str = "EXC_BAD_ACCESS",
    version: str = "1.0",
    build: str = "1",
    captured: str = "2026-11-30 16:42:10.9120 +0100",
    *,
    offset: int = 0,
    apple_first: bool = False,
    extra: dict[str, Any] | None = None,
) -> str:
    """An `.ips` already symbolicated: its crashed thread's frames name `symbols` (a pair
    (symbol, True) for an inlined callee), each `offset` bytes in; `apple_first` puts a
    frame of dyld on top. Another thread, not crashed, names other functions."""
    frames: list[dict[str, Any]] = []
    if apple_first:
        frames.append(
            {"imageOffset": 0x1000, "imageIndex": 1, "symbol": "__abort", "symbolLocation": 8}
        )
    for n, entry in enumerate(symbols):
        symbol, inline = entry if isinstance(entry, tuple) else (entry, False)
        frame: dict[str, Any] = {
            "imageOffset": 0x300 + 0x10 * n + offset,
            "imageIndex": 0,
            "symbol": symbol,
            "symbolLocation": 4 + offset,
            "sourceFile": "crashy.c",
            "sourceLine": 10 + n,
        }
        if inline:
            frame["inline"] = True
        frames.append(frame)
    metadata = {
        "app_name": "crashy",
        "bug_type": "309",
        "name": "crashy",
        "app_version": version,
        "build_version": build,
        "timestamp": captured,
    }
    other = [{"imageOffset": 0x500, "imageIndex": 0, "symbol": "idle", "symbolLocation": 0}]
    body = {
        "cpuType": "ARM-64",
        "captureTime": captured,
        "exception": {"type": exception, "signal": SIGNALS.get(exception, "SIGSEGV")},
        "faultingThread": 1,
        "threads": [{"frames": other}, {"triggered": True, "frames": frames}],
        "usedImages": [
            {
                "source": "P",
                "arch": "arm64",
                "base": TEXT_VMADDR,
                "uuid": ARM.lower(),
                "path": "/Users/dev/crashy",
                "name": "crashy",
            },
            {
                "source": "P",
                "arch": "arm64e",
                "base": DYLD_BASE,
                "uuid": DYLD_UUID.lower(),
                "path": "/usr/lib/dyld",
                "name": "dyld",
            },
        ],
        **(extra or {}),
    }
    return json.dumps(metadata) + "\n" + json.dumps(body) + "\n"


def variations(count: int) -> list[str]:
    """`count` symbolicated reports over a handful of signatures, versions and times: the
    bench's and the page test's input."""
    stacks: list[list[str | tuple[str, bool]]] = [
        [("twice", True), "leaf", "trigger", "main"],
        ["norm_of", "leaf", "trigger", "main"],
        ["fail", "trigger", "main"],
        [("twice", True), "leaf", "main"],
    ]
    kinds = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3]
    reports = []
    for n in range(count):
        kind = kinds[n * 7 % len(kinds)]
        exception = (
            "EXC_BREAKPOINT" if kind == 2 else "EXC_CRASH" if n % 5 == 0 else "EXC_BAD_ACCESS"
        )
        reports.append(
            named_ips(
                stacks[kind],
                exception,
                version=f"1.{n % 3}",
                build=str(100 + n % 3),
                captured=f"2026-11-{1 + n % 28:02d} {n % 24:02d}:00:00.0000 +0000",
                offset=n % 5 * 4,
                apple_first=n % 2 == 0,
            )
        )
    return reports
