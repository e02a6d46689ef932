"""The `sample` and spindump readers and writers (sample.py, spindump.py, hangtext.py):
their grammar on the shapes the tools write, what is kept byte for byte, and the
bounds on what they hold."""

from __future__ import annotations

import pytest
from support.hang_reports import sample_report, spindump_report
from support.symbolication import CRASHY_UUIDS, TEXT_VMADDR

from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate import formats, hangtext, sample, spindump
from dsymfind.symbolicate.engine import Located

ARM = CRASHY_UUIDS["arm64"]
LEAF = Located("leaf", 0x330, "/src/crashy.c", 12, True)
TRIGGER = Located("trigger", 0x300, "/src/crashy.c", 20, False)


def test_sample_frames_are_told_apart_by_place_in_the_tree() -> None:
    report = formats.parse(sample_report(ARM, [0x338, 0x348, 0x380]))
    crashy = [f for f in report.frames() if not f.named]
    # Outermost first; only the deepest is the pc.
    assert [(f.offset, f.position) for f in crashy] == [(0x380, 1), (0x348, 1), (0x338, 0)]
    assert {report.images[f.image].uuid for f in crashy} == {ARM}
    (dyld,) = [f for f in report.frames() if f.named]
    assert dyld.given == {"symbol": "start", "offset": 520, "file": None, "line": None,
                          "inline": False}  # fmt: skip


def test_a_named_sample_line_keeps_tree_count_addresses_and_ending() -> None:
    text = (
        "Process:  crashy [1]\nCall graph:\r\n"
        "    10 Thread_1\r\n"
        "    + ! : | 10 ???  (in crashy)  load address 0x100000000 + 0x338  "
        "[0x100000338,0x10000033c]\r\n"
        "Binary Images:\r\n"
        f"  0x100000000 - 0x100003fff +crashy (0) <{ARM}> /Users/dev/crashy\r\n"
    )
    report = formats.parse(text)
    (frame,) = report.frames()
    assert (frame.offset, frame.position) == (0x338, 0)
    frame.symbols = [LEAF, TRIGGER]
    written = formats.render(report, "sample", {})
    assert written == text.replace(
        "???  (in crashy)  load address 0x100000000 + 0x338  [0x100000338,0x10000033c]",
        "trigger > leaf  (in crashy) + 56  [0x100000338,0x10000033c]  crashy.c:12",
    )
    again = formats.parse(written)
    assert [f.named for f in again.frames()] == [True]


def test_spindump_named_line_and_kernel_frames() -> None:
    text = spindump_report([("crashy", 1, ARM, [0x348])], shared=False)
    report = formats.parse(text)
    app = next(f for f in report.frames() if report.images[f.image].name == "crashy")
    kernel = next(f for f in report.frames() if "kernel" in report.images[f.image].name)
    assert (app.offset, app.position, kernel.position) == (0x348, 1, 0)
    assert report.images[kernel.image].apple
    app.symbols = [TRIGGER]
    written = formats.render(report, "spindump", {})
    assert "  trigger + 72 (crashy + 840) [0x100000348]  crashy.c:20\n" in written
    assert written.replace("trigger + 72", "???").replace("  crashy.c:20", "") == text


def test_an_overlong_line_passes_through_unparsed() -> None:
    long_frame = "    + 10 ???  (in crashy)  [0x100000338]" + " " * hangtext.MAX_LINE_CHARS
    text = sample_report(ARM, [0x338]).replace("Call graph:\n", f"Call graph:\n{long_frame}\n")
    report = formats.parse(text)
    assert len([f for f in report.frames() if not f.named]) == 1
    for frame in report.frames():
        frame.symbols = [TRIGGER]
    assert long_frame in formats.render(report, "sample", {})


def test_an_image_no_list_gives_has_no_uuid() -> None:
    text = "Process: x [1]\nCall graph:\n    1 Thread_1\n    + 1 ???  (in Mystery)  [0x5000]\n"
    report = formats.parse(text)
    (image,) = report.images
    assert (image.uuid, image.name, report.frames()[0].offset) == (None, "Mystery", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Process: x [1]\nCall graph:\n    1 Thread_1\n", "not a sample report: no frame in it"),
        (
            "Process: x [1]\n  Thread 0x1 1 samples (1-1)\n",
            "not a spindump report: no frame in it",
        ),
    ],
)
def test_a_report_without_frames_is_refused(text: str, message: str) -> None:
    with pytest.raises(CrashReportError, match=message):
        formats.parse(text)


def test_process_needs_a_report_of_processes() -> None:
    report = formats.parse(sample_report(ARM, [0x338]))
    with pytest.raises(CrashReportError, match="no processes to pick from"):
        hangtext.pick(report, "crashy")


def test_the_text_checks_agree_with_the_modules() -> None:
    assert sample.looks_like(sample_report(ARM, [0x338]))
    assert spindump.looks_like(spindump_report([("a", 1, ARM, [0x338])], shared=True))
    assert not spindump.looks_like(sample_report(ARM, [0x338]))
    assert TEXT_VMADDR == 0x100000000


def test_images_and_processes_past_their_bounds_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hangtext, "MAX_IMAGES", 1)
    with pytest.raises(CrashReportError, match="more than 1 images"):
        formats.parse(sample_report(ARM, [0x338]))
    monkeypatch.setattr(hangtext, "MAX_PROCESSES", 1)
    two = spindump_report([("a", 1, ARM, [0x338]), ("b", 2, ARM, [0x338])], shared=True)
    with pytest.raises(CrashReportError, match="more than 1 processes"):
        formats.parse(two)


def test_names_with_parentheses_and_selectors_as_the_tools_print_them() -> None:
    text = (
        "Process:  zmq [1]\nCall graph:\n    1753 Thread_13171144\n"
        "    + 1753 thread_routine(void*)  (in libzmq.dylib) + 48  [0x125303e3a]\n"
        "    +   1753 zmq::kqueue_t::loop()  (in libzmq.dylib) + 165  [0x1252f6ba1]\n"
    )
    given = [f.given for f in formats.parse(text).frames()]
    assert [(g["symbol"], g["offset"]) for g in given if g] == [
        ("thread_routine(void*)", 48),
        ("zmq::kqueue_t::loop()", 165),
    ]
    spin = (
        "Process:          Finder [389] [unique pid 1234]\n\n"
        "  Thread 0x1a2b    1000 samples (1-1000)\n"
        "  1000  -[NSApplication run] + 100 (AppKit + 1234) [0x1a2b3c]\n"
        "    1000  ??? (Finder + 25028) [0x100b3a1c4]\n"
        "      *1000  ??? (kernel.release.t8101 + 12345) [0xfffffe0007a3c3c]\n"
    )
    report = formats.parse(spin)
    assert report.document.processes == [("Finder", "389")]
    appkit, finder, kernel = report.frames()
    assert appkit.given is not None
    assert (appkit.given["symbol"], appkit.given["offset"]) == ("-[NSApplication run]", 100)
    assert (finder.offset, finder.named, finder.position) == (25028, False, 1)
    # No list names the kernel: its frames are still known as Apple's.
    assert report.images[kernel.image].apple and not report.images[finder.image].apple
