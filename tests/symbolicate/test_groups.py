"""symbolicate/groups.py: what a report's signature is made of in each form, its times,
and the page's frames with their source context."""

from __future__ import annotations

import json

from support.crash_groups import named_ips
from support.crash_reports import CRASH_REPORTS

from dsymfind.symbolicate import formats, groups

CRASHY = "4C4C4488-5555-3144-A1C4-05D5352879DF"
DYLD = "5E8F2A97-1C34-3D6B-A0F5-7B9C3E2D1A48"


def entries_of(text: str) -> list[groups.Entry]:
    return groups.entries("r", formats.parse(text))


def signatures(text: str, frames: int = 3) -> list[tuple[str, tuple[str, ...]]]:
    return [groups.signature(entry, frames) for entry in entries_of(text)]


def test_an_ips_signs_with_its_exception_and_its_crashed_threads_app_frames():
    text = named_ips([("twice", True), "leaf", "trigger", "main"], apple_first=True)
    assert signatures(text) == [("EXC_BAD_ACCESS (SIGSEGV)", ("twice", "leaf", "trigger"))]
    assert signatures(text, 1) == [("EXC_BAD_ACCESS (SIGSEGV)", ("twice",))]
    entry = entries_of(text)[0]
    assert (entry.version, entry.build) == ("1.0", "1")
    assert groups._iso(entry.seen) == "2026-11-30T15:42:10Z"


def test_a_text_report_reads_its_header():
    text = (CRASH_REPORTS / "greet-macos-legacy.crash").read_text()
    (entry,) = entries_of(text)
    assert entry.ending.startswith("EXC_BAD_ACCESS")
    assert groups.signature(entry, 3)[1] == ("greet", "main")
    assert entry.version is not None and entry.seen is not None


def test_an_apple_frame_alone_signs_by_its_name():
    text = (CRASH_REPORTS / "universal-ios.crash").read_text()
    (entry,) = entries_of(text)
    assert groups.signature(entry, 3) == (entry.ending, ("__pthread_kill",))


def metrickit_payload() -> str:
    def frame(uuid: str, name: str, offset: int, symbol: str | None = None) -> dict:
        found = {
            "binaryUUID": uuid,
            "binaryName": name,
            "offsetIntoBinaryTextSegment": offset,
            "address": 0x100000000 + offset,
            "sampleCount": 1,
        }
        return found if symbol is None else {**found, "symbol": symbol}

    def tree(*frames: dict) -> dict:
        root = None
        for entry in reversed(frames):
            root = {**entry, "subFrames": [root] if root else []}
        return {"callStacks": [{"threadAttributed": True, "callStackRootFrames": [root]}]}

    meta = {"appVersion": "2.1", "appBuildVersion": "40"}
    return json.dumps(
        {
            "timeStampBegin": "2026-11-02 10:00:00",
            "crashDiagnostics": [
                {
                    "diagnosticMetaData": {**meta, "exceptionType": 1, "signal": 11},
                    "callStackTree": tree(
                        frame(DYLD, "libsystem_kernel.dylib", 0x10, "__pthread_kill"),
                        frame(CRASHY, "crashy", 0x338, "leaf"),
                    ),
                }
            ],
            "hangDiagnostics": [
                {
                    "diagnosticMetaData": {**meta, "hangDuration": "3 sec"},
                    "callStackTree": tree(frame(CRASHY, "crashy", 0x380, "trigger")),
                }
            ],
        }
    )


def test_each_metrickit_diagnostic_is_grouped_alone_with_apples_names():
    found = entries_of(metrickit_payload())
    assert [groups.signature(entry, 3) for entry in found] == [
        ("EXC_BAD_ACCESS (SIGSEGV)", ("leaf",)),
        ("hang", ("trigger",)),
    ]
    assert {(e.version, e.build, groups._iso(e.seen)) for e in found} == {
        ("2.1", "40", "2026-11-02T10:00:00Z")
    }


def test_times_in_any_zone_compare_in_utc():
    early = groups._time("2026-11-29 09:00:00.50 +0100")
    late = groups._time("2026-11-29T08:30:00Z")
    assert early is not None and late is not None and early < late
    assert groups._time("yesterday") is None
    assert groups._time(None) is None


def test_the_page_shows_a_frames_source_context_escaped():
    data = {
        "reports": 1,
        "groups": [
            {
                "signature": {"exception": "EXC_CRASH (SIGABRT)", "frames": ["leaf"]},
                "count": 1,
                "versions": [{"version": "1.0", "build": "1", "count": 1}],
                "first_seen": None,
                "last_seen": None,
                "representative": {
                    "report": "r.ips",
                    "frames": [
                        {
                            "image": "crashy",
                            "symbol": "leaf",
                            "offset": 4,
                            "file": "/src/crashy.c",
                            "line": 14,
                            "inline": False,
                            "context": {"first": 13, "lines": ["if (a < b)", "  leaf();"]},
                        }
                    ],
                },
            }
        ],
    }
    page = groups.as_page(data)
    assert "leaf + 4 (crashy.c:14)" in page
    assert '<pre class="context">   13  if (a &lt; b)\n   14    leaf();</pre>' in page
    assert "<script" not in page
