"""Reports told apart by content, never by name: `.ips` (a JSON metadata line, then a JSON
body, or a text report for bug type 109), MetricKit JSON, and the text `.crash` form.
Parsing goes through apple/crashreport.py, the same reader `dsymfind prefetch` uses.

Each form is one `Form` record in FORMS: a cheap check of the text, and the module that
reads and writes it, imported only when a report of that form is met (the text form's
patterns cost an `.ips` report a millisecond and a half to compile). A new form is a
module and a line in FORMS. JSON is written, never read (output.py).
"""

from __future__ import annotations

import sys

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate.model import Seen

# How much of a text report the sample and spindump checks look at.
HEAD_CHARS = 64 << 10

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from dsymfind.symbolicate.model import Report


class Form:
    """A report form: its name (`--format`, Report.kind), the cheap check its text passes,
    and the module that reads it (`read(Seen) -> Report`) and writes it back
    (`write(Report) -> str`)."""

    __slots__ = ("claims", "module", "name")

    def __init__(self, name: str, module: str, claims: Callable[[Seen], bool]) -> None:
        self.name, self.module, self.claims = name, module, claims

    def read(self, seen: Seen) -> Report:
        report: Report = self._loaded().read(seen)
        return report

    def write(self, report: Report) -> str:
        text: str = self._loaded().write(report)
        return text

    def _loaded(self) -> ModuleType:
        # The built-in import: importlib would load warnings, re and enum for nothing.
        __import__(self.module)
        return sys.modules[self.module]


def _lists_images(seen: Seen) -> bool:
    """Apple's JSON form: its body lists the images its frames name."""
    return seen.body is not None and "usedImages" in seen.body


def _is_text(seen: Seen) -> bool:
    """A text report, alone or after an `.ips` metadata line (bug type 109)."""
    return seen.body is None


def _is_metrickit(seen: Seen) -> bool:
    """A MetricKit payload, diagnostic or call-stack tree: known by its keys."""
    if seen.body is None:
        return False
    from dsymfind.symbolicate import metrickit

    return metrickit.is_metrickit(seen.body)


def _is_sample(seen: Seen) -> bool:
    """The `sample` tool's output: a call graph after its header (sample.py)."""
    head = seen.text[:HEAD_CHARS]
    return seen.ips is None and ("\nCall graph:" in head or head.startswith("Call graph:"))


def _is_spindump(seen: Seen) -> bool:
    """spindump's text: a process whose threads are counted in samples (spindump.py)."""
    head = seen.text[:HEAD_CHARS]
    process = head.startswith("Process:") or "\nProcess:" in head
    return seen.ips is None and process and "Thread 0x" in head and " samples" in head


# The forms, in --format's order; a report is read in the first one whose check it passes.
FORMS: dict[str, Form] = {
    form.name: form
    for form in (
        Form("ips", "dsymfind.symbolicate.ips", _lists_images),
        Form("sample", "dsymfind.symbolicate.sample", _is_sample),
        Form("spindump", "dsymfind.symbolicate.spindump", _is_spindump),
        Form("crash", "dsymfind.symbolicate.crash", _is_text),
        Form("metrickit", "dsymfind.symbolicate.metrickit", _is_metrickit),
    )
}
JSON = "json"
# Apple's translated text form, written from any report (text.py); `crash` names it too for
# a report in another form, the text form being what a `.crash` is.
TEXT = "text"
TEXT_WRITER = "dsymfind.symbolicate.text"
# The forms a report is written in: each its own (MetricKit's as the payload came), Apple's
# text form, or JSON.
FORMATS = (*FORMS, TEXT, JSON)


def parse(text: str) -> Report:
    """The report in `text`; CrashReportError when it is none."""
    stripped = crashreport.strip_leading(text)
    if not stripped:
        raise CrashReportError("empty: not a crash report")
    if "\0" in stripped[:4096]:
        raise CrashReportError("binary data: not a crash report")
    seen = Seen(stripped)
    form = next((form for form in FORMS.values() if form.claims(seen)), None)
    if form is None:
        # JSON no form claims: what it lacks is named as Apple's own form would.
        assert seen.ips is not None
        raise crashreport.no_used_images(seen.ips.metadata)
    return form.read(seen)


def default_format(report: Report) -> str:
    """A report is written back in its own form."""
    return report.kind


def check(report: Report, form: str) -> None:
    """CrashReportError unless `report` can be written in `form`: asked before anything is
    fetched for it."""
    if form in (JSON, TEXT, report.kind, "crash"):
        return
    raise CrashReportError(
        f"a report in the {report.kind} form is written in that form, as text or as json, "
        f"not as {form}"
    )


def render(
    report: Report, form: str, statuses: dict[str, str], verdicts: dict[str, str] | None = None
) -> str:
    """The report in `form`; JSON names each image's status and, for a missing one, its
    verdict (fetch/verdicts.py), both by image_key."""
    if form == JSON:
        from dsymfind.symbolicate import output

        return output.as_json(report, statuses, verdicts or {})
    check(report, form)
    if form == report.kind:
        return FORMS[form].write(report)
    __import__(TEXT_WRITER)
    text: str = sys.modules[TEXT_WRITER].write(report)
    return text
