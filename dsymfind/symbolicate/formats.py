"""Reports told apart by content, never by name: `.ips` (a JSON metadata line, then a JSON
body, or a text report for bug type 109), MetricKit JSON, and the text `.crash` form.
Parsing goes through apple/crashreport.py, the same reader `dsymfind prefetch` uses. Each
form's own module is imported when a report of that form is met (the text form's patterns
cost an `.ips` report a millisecond and a half to compile)."""

from __future__ import annotations

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate import ips, output
from dsymfind.symbolicate.model import Report

# The forms a report is written in: each its own (MetricKit's as the payload came), or JSON.
FORMATS = ("ips", "crash", "metrickit", "json")


def parse(text: str) -> Report:
    """The report in `text`; CrashReportError when it is none."""
    stripped = crashreport.strip_leading(text)
    if not stripped:
        raise CrashReportError("empty: not a crash report")
    if "\0" in stripped[:4096]:
        raise CrashReportError("binary data: not a crash report")
    if not stripped.startswith("{"):
        return _text_report(stripped, "")
    parts = crashreport.split_ips(stripped)
    if parts.body is None:
        return _text_report(parts.text, parts.header + "\n")
    if "usedImages" not in parts.body:
        from dsymfind.symbolicate import metrickit

        if metrickit.is_metrickit(parts.body):
            return metrickit.read(parts.body)
    return ips.read(parts)


def _text_report(text: str, prefix: str) -> Report:
    from dsymfind.symbolicate import crash

    report = crash.read(text, prefix)
    if not report.threads:
        raise CrashReportError("not a crash report: no thread with frames")
    return report


def default_format(report: Report) -> str:
    """A report is written back in its own form."""
    return report.kind


def render(report: Report, form: str, statuses: dict[str, str]) -> str:
    if form == "json":
        return output.as_json(report, statuses)
    if form != report.kind:
        raise CrashReportError(
            f"a report in the {report.kind} form is written in that form or as json, not as {form}"
        )
    if form == "ips":
        return ips.write(report)
    if form == "metrickit":
        from dsymfind.symbolicate import metrickit

        return metrickit.write(report)
    from dsymfind.symbolicate import crash

    return crash.write(report)
