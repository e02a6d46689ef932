"""Apple's text form written from any report (text.py), held to the report Apple wrote for
the same crash: LLVM's multithread-test crash, kept by LLDB in both forms."""

from __future__ import annotations

import json

import pytest
from support.crash_reports import CRASH_REPORTS, METRICKIT_CRASH

from dsymfind.symbolicate import formats
from dsymfind.symbolicate.engine import Located
from dsymfind.symbolicate.model import Report

LLDB = CRASH_REPORTS / "lldb"
IPS = (LLDB / "multithread-test.ips").read_text()
CRASH = (LLDB / "multithread-test.crash").read_text()
REPORTS = {
    "ips": (CRASH_REPORTS / "hello-macos.ips").read_text(),
    "crash": (CRASH_REPORTS / "universal-ios.crash").read_text(),
    "metrickit": json.dumps(METRICKIT_CRASH, indent=2) + "\n",
}
# An .ips metadata line before a text report (iOS 14, bug type 109): the text form.
BUG_TYPE_109 = (CRASH_REPORTS / "hello-ios14.ips").read_text()


def text_of(report_text: str) -> str:
    return formats.render(formats.parse(report_text), "text", {})


def section(lines: list[str], first: str) -> list[str]:
    """The lines from `first` up to the next blank line."""
    start = lines.index(first)
    end = next((n for n in range(start, len(lines)) if not lines[n].strip()), len(lines))
    return lines[start:end]


def test_the_text_of_the_ips_is_apples_text_of_the_same_crash() -> None:
    written = text_of(IPS).splitlines()
    apple = CRASH.splitlines()
    # The header, every thread and the crashed thread's registers, line for line: every
    # field the .ips holds, in Apple's order, padded as Apple pads it.
    registers = apple.index("Thread 2 crashed with ARM Thread State (64-bit):")
    assert written[: registers + 11] == apple[: registers + 11]
    # Binary Images: the same lines, save two edits LLDB made to its .crash to test its own
    # parser (neither is in the .ips): a blank line inside the section, and an image no
    # frame is in (bogus.dylib).
    images = section(written, "Binary Images:")
    theirs = [line for line in apple[apple.index("Binary Images:") :] if line.strip()]
    theirs = [line for line in theirs[: len(images) + 1] if "bogus.dylib" not in line]
    assert images == theirs[: len(images)]
    assert len(images) == 1 + 7  # the header and every image the .ips lists
    # What follows (External Modification Summary, VM Region Summary) reads the same; Apple
    # ends its file with blank lines the .ips does not say.
    ours = "\n".join(written[written.index("External Modification Summary:") :])
    rest = "\n".join(apple[apple.index("External Modification Summary:") :])
    assert ours.rstrip("\n") == rest.rstrip("\n")


def test_what_the_text_gives_reads_back_as_the_same_frames() -> None:
    report = formats.parse(IPS)
    again = formats.parse(text_of(IPS))
    assert again.kind == "crash"
    named = [
        (report.images[f.image].name, report.images[f.image].base + f.offset)
        for f in report.frames()
        if f.image is not None and f.offset is not None
    ]
    read = [(again.images[f.image].name, f.address) for f in again.frames() if f.image is not None]
    assert read == named
    assert {i.uuid for i in again.images} >= {i.uuid for i in report.images if i.uuid}


def test_frames_looked_up_gain_lines_and_inlined_callees_lines_of_their_own() -> None:
    report = formats.parse(REPORTS["ips"])
    thread = next(t for t in report.threads if any(not f.named for f in t.frames))
    number, frame = next((n, f) for n, f in enumerate(thread.frames) if not f.named)
    assert frame.image is not None and frame.offset is not None
    start = frame.offset - 0x10
    frame.symbols = [
        Located("twice", start, "/src/crashy.c", 10, True),
        Located("leaf", start, "/src/crashy.c", 14, False),
    ]
    lines = [line for line in text_of_report(report).splitlines() if "crashy.c" in line]
    address = report.images[frame.image].base + frame.offset
    head = f"{number:<4}{report.images[frame.image].name:<30}\t{address:#18x}"
    assert lines == [
        f"{head} twice + 16 (crashy.c:10) [inlined]",
        f"{head} leaf + 16 (crashy.c:14)",
    ]
    # Read back, they are the frames the text names, the callee marked inlined.
    again = formats.parse(text_of_report(report))
    given = [f.given for f in again.frames() if f.given and f.given.get("file") == "crashy.c"]
    assert [(g["symbol"], g["line"], g["inline"]) for g in given] == [
        ("twice", 10, True),
        ("leaf", 14, False),
    ]


def text_of_report(report: Report) -> str:
    return formats.render(report, "text", {})


def test_a_frame_not_named_is_its_image_base_and_offset() -> None:
    written = text_of(REPORTS["ips"])
    report = formats.parse(REPORTS["ips"])
    frame = next(f for f in report.frames() if not f.named and f.image is not None)
    base = report.images[frame.image].base
    assert f"{base + frame.offset:#x} {base:#x} + {frame.offset}" in written


def test_a_crash_report_is_already_text_and_an_ips_metadata_line_is_dropped() -> None:
    assert text_of(REPORTS["crash"]) == REPORTS["crash"]
    text = BUG_TYPE_109.partition("\n")[2]
    assert text_of(BUG_TYPE_109) == text
    # As `crash`, a .crash is written as it always was: the metadata line kept.
    assert formats.render(formats.parse(BUG_TYPE_109), "crash", {}) == BUG_TYPE_109


def test_crash_names_the_text_form_for_a_report_in_another_form() -> None:
    for name in ("ips", "metrickit"):
        report = formats.parse(REPORTS[name])
        assert formats.render(report, "crash", {}) == formats.render(report, "text", {})


def test_a_metrickit_diagnostic_is_a_header_its_stacks_and_their_images() -> None:
    payload = json.loads(json.dumps(METRICKIT_CRASH))
    metadata = payload["crashDiagnostics"][0]["diagnosticMetaData"]
    metadata |= {
        "appVersion": "2.1",
        "appBuildVersion": "77",
        "exceptionType": 1,
        "exceptionCode": 0,
        "platformArchitecture": "arm64e",
        "bundleIdentifier": "com.example.hello",
    }
    lines = text_of(json.dumps(payload)).splitlines()
    assert "Identifier:            com.example.hello" in lines
    assert "Version:               2.1 (77)" in lines
    assert "OS Version:            iPhone OS 17.3 (21D50)" in lines
    assert "Exception Type:        EXC_BAD_ACCESS (SIGSEGV)" in lines
    assert "Date/Time:             2024-03-04 23:59:00 +0000" in lines
    assert "Triggered by Thread:   0" in lines
    assert section(lines, "Thread 0 Crashed:") == [
        "Thread 0 Crashed:",
        f"0   {'hello':<30}\t{0x104A5C338:#18x} 0x104a5c000 + 824",
    ]
    # No size nor path in a payload: the image reaches at least its highest pc.
    assert section(lines, "Binary Images:")[1:] == [
        f"{0x104A5C000:#18x} - {0x104A5C338:#18x} hello arm64e  "
        "<4c4c449a55553144a19ae6e643e6625e> ???"
    ]


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_every_form_is_written_as_text_that_reads_back(name: str) -> None:
    again = formats.parse(text_of(REPORTS[name]))
    assert again.kind == "crash"
    assert again.frames()


def test_a_form_other_than_its_own_text_or_json_is_refused_before_writing() -> None:
    report = formats.parse(REPORTS["ips"])
    for form in ("ips", "crash", "text", "json"):
        formats.check(report, form)
    with pytest.raises(formats.CrashReportError, match="not as metrickit"):
        formats.check(report, "metrickit")


def test_the_last_exception_backtrace_comes_first_and_threads_keep_their_names() -> None:
    header, _, body = IPS.partition("\n")
    document = json.loads(body)
    document["lastExceptionBacktrace"] = [{"imageIndex": 5, "imageOffset": 147300}]
    document["threads"][1]["name"] = "worker"
    document["threads"][0]["name"] = "main"
    lines = text_of(header + "\n" + json.dumps(document)).splitlines()
    assert section(lines, "Last Exception Backtrace:") == [
        "Last Exception Backtrace:",
        f"0   {'libsystem_c.dylib':<30}\t{0x19CB61F64:#18x} 0x19cb3e000 + 147300",
    ]
    assert lines.index("Last Exception Backtrace:") < lines.index(
        "Thread 0:: main  Dispatch queue: com.apple.main-thread"
    )
    assert "Thread 1:: worker" in lines
    assert "Thread 2 Crashed:" in lines
