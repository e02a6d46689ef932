"""The report-form registry (formats.py): each form told apart by its text, read, and
written back; --format's choices are the registry's forms and json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.crash_reports import CRASH_REPORTS, METRICKIT_CRASH
from support.hang_reports import sample_report, spindump_report
from support.symbolication import CRASHY_UUIDS

from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate import formats
from dsymfind.symbolicate.engine import Located
from dsymfind.symbolicate.model import Report

# What each registered form is read from: the committed reports, and the payload above.
REPORTS = {
    "ips": (CRASH_REPORTS / "hello-macos.ips").read_text(),
    "crash": (CRASH_REPORTS / "universal-ios.crash").read_text(),
    "metrickit": json.dumps(METRICKIT_CRASH, indent=2) + "\n",
    "sample": sample_report(CRASHY_UUIDS["arm64"], [0x338, 0x348, 0x380]),
    "spindump": spindump_report(
        [("crashy", 1, CRASHY_UUIDS["arm64"], [0x348, 0x380])], shared=False
    ),
}
# An .ips metadata line before a text report (iOS 14, bug type 109): the text form.
BUG_TYPE_109 = (CRASH_REPORTS / "hello-ios14.ips").read_text()


def as_written(name: str, text: str) -> object:
    """What a form keeps of a report nothing was added to: a JSON form its data (and the
    `.ips` metadata line as it was), the text form every byte."""
    if name == "ips":
        header, _, body = text.partition("\n")
        return header, json.loads(body)
    return json.loads(text) if name == "metrickit" else text


def frames(report: Report) -> list[tuple[int | None, int | None, bool]]:
    return [(f.image, f.offset, f.named) for f in report.frames()]


def test_the_format_choices_are_the_registered_forms_then_text_and_json() -> None:
    assert (*formats.FORMS, "text", "json") == formats.FORMATS
    assert formats.FORMATS == ("ips", "sample", "spindump", "crash", "metrickit", "text", "json")
    assert all(form.name == name for name, form in formats.FORMS.items())


def test_every_registered_form_has_a_report_here() -> None:
    assert set(REPORTS) == set(formats.FORMS)


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_each_form_is_told_apart_read_and_written_back_unchanged(name: str) -> None:
    report = formats.parse(REPORTS[name])
    assert report.kind == name
    assert formats.default_format(report) == name
    assert report.frames()
    written = formats.render(report, name, {})
    assert as_written(name, written) == as_written(name, REPORTS[name])
    again = formats.parse(written)
    assert again.kind == name
    assert frames(again) == frames(report)


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_frame_named_in_its_form_reads_back_named(name: str) -> None:
    report = formats.parse(REPORTS[name])
    frame = next(f for f in report.frames() if f.image is not None and not f.named)
    frame.symbols = [Located("leaf", 0x330, "/src/crashy.c", 12, False)]
    again = formats.parse(formats.render(report, name, {}))
    named = again.frames()[report.frames().index(frame)]
    assert named.named


def test_an_ips_header_before_a_text_report_is_the_text_form_and_is_kept() -> None:
    report = formats.parse(BUG_TYPE_109)
    assert report.kind == "crash"
    assert formats.render(report, "crash", {}) == BUG_TYPE_109


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_every_form_is_also_written_as_json(name: str) -> None:
    written = json.loads(formats.render(formats.parse(REPORTS[name]), "json", {}))
    assert {"images", "threads"} <= set(written)


def test_a_report_is_written_in_its_own_form_as_text_or_as_json_only() -> None:
    report = formats.parse(REPORTS["crash"])
    with pytest.raises(CrashReportError) as refused:
        formats.render(report, "ips", {})
    assert str(refused.value) == (
        "a report in the crash form is written in that form, as text or as json, not as ips"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (" \n", "empty: not a crash report"),
        ("Thread 0:\0", "binary data: not a crash report"),
        ("Process: hello\nBinary Images:\n", "not a crash report: no thread with frames"),
        (
            '{"bug_type":"288"}\n{"threads":[]}\n',
            "not a crash report: no usedImages (IPS bug_type 288)",
        ),
        ('{"threads":[]}', "not a crash report: no usedImages"),
    ],
)
def test_what_no_form_claims_is_refused_as_before(text: str, message: str) -> None:
    with pytest.raises(CrashReportError) as refused:
        formats.parse(text)
    assert str(refused.value) == message


PROBE = """\
import sys
from dsymfind.apple import crashreport
from dsymfind.symbolicate import formats
formats.parse(crashreport.read_text(sys.argv[1]))
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("name", ["ips", "crash"])
def test_reading_a_report_imports_only_its_own_forms_module(name: str, tmp_path: Path) -> None:
    report = tmp_path / "report"
    report.write_text(REPORTS[name])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(report)], capture_output=True, text=True, check=True
    )
    loaded = {m for m in done.stdout.split() if m.startswith("dsymfind.symbolicate.")}
    modules = {form.module for form in formats.FORMS.values()}
    assert loaded & modules == {formats.FORMS[name].module}
