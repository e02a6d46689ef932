"""What every report form is read into, and what symbolication adds to it.

A reader (ips.py, crash.py, metrickit.py) keeps a reference to where each frame came from
(`Frame.source`), so its writer can put the names back in the report's own form.
Its mutable classes are written by hand, not dataclasses: `dataclasses` imports `inspect`,
a tenth of what `dsymfind symbolicate` of a small report takes to start
(tests/test_import_cost.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeGuard

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import IpsParts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.symbolicate.engine import Located


class ReportImage(NamedTuple):
    uuid: str | None  # uppercase dashed; None when the report gives none (no dSYM to find)
    name: str
    arch: str  # "" when the report does not say
    base: int | None  # the load address of its first segment, when the report says
    apple: bool  # one of Apple's system images: its frames left bare are no failure


class Frame:
    __slots__ = ("address", "given", "image", "named", "offset", "position", "source", "symbols")

    def __init__(
        self,
        image: int | None,  # index into Report.images; None when the frame names none usable
        offset: int | None,  # pc - image base (imageOffset); None when unusable
        position: int,  # 0 for the pc of its thread, then return addresses
        source: Any = None,  # where the reader found it, for its writer
        *,
        named: bool = False,  # the report already names it (kept as it is)
        address: int | None = None,  # the pc as the report writes it, when it does
        given: dict[str, Any] | None = None,  # a named frame's symbol, offset, file, line
    ) -> None:
        self.image, self.offset, self.position = image, offset, position
        self.source, self.named = source, named
        self.address, self.given = address, given
        self.symbols: list[Located] = []  # innermost first, once looked up

    @property
    def symbolicated(self) -> bool:
        return bool(self.symbols)


class Thread:
    __slots__ = ("crashed", "diagnostic", "frames", "index")

    def __init__(
        self,
        index: int | None,  # None for a report's last exception backtrace (ips.py)
        crashed: bool,  # MetricKit: the stack is `threadAttributed`
        frames: list[Frame],
        diagnostic: int | None = None,  # MetricKit: its diagnostic, in Report.diagnostics
    ) -> None:
        self.index, self.crashed, self.frames = index, crashed, frames
        self.diagnostic = diagnostic


class Diagnostic(NamedTuple):
    """One MetricKit diagnostic of a report (metrickit.py): the call stacks of its
    threads carry its place in Report.diagnostics."""

    kind: str | None  # its list in the payload ("hangDiagnostics"); None when unknown
    position: int | None  # its place in that list; None for a diagnostic alone
    metadata: dict[str, Any]  # its `diagnosticMetaData`, as it came
    begin: Any  # `timeStampBegin`, its own or its payload's; None when neither says
    end: Any  # `timeStampEnd`, likewise


class Report:
    __slots__ = ("arch", "diagnostics", "document", "images", "kind", "threads")

    def __init__(
        self,
        kind: str,  # "ips", "crash" or "metrickit": the form it is written back in by default
        images: list[ReportImage],
        threads: list[Thread],
        arch: str = "",  # the process's architecture, for images whose own is not given
        document: Any = None,  # the reader's parsed form (the ips body, the text's lines)
        diagnostics: list[Diagnostic] | None = None,  # MetricKit's, in payload order
    ) -> None:
        self.kind, self.images, self.threads = kind, images, threads
        self.arch, self.document = arch, document
        self.diagnostics = diagnostics or []

    def frames(self) -> list[Frame]:
        return [frame for thread in self.threads for frame in thread.frames]


def image_key(image: ReportImage) -> str:
    """What tells an image apart across a batch: its UUID; without one, its name (a
    dSYM can be found for neither, so they come to the same)."""
    return image.uuid or f"{image.name} (no UUID)"


def needed_images(report: Report) -> dict[str, ReportImage]:
    """The report's images that frames not named yet point into, by image_key, in order:
    those `symbolicate` looks up, and `why` explains."""
    # The images' indexes first, in order: a report has many frames and few images.
    indexes = dict.fromkeys(
        frame.image
        for thread in report.threads
        for frame in thread.frames
        if not frame.named and frame.image is not None
    )
    needed: dict[str, ReportImage] = {}
    for index in indexes:
        image = report.images[index]
        needed.setdefault(image_key(image), image)
    return needed


def is_address(value: object) -> TypeGuard[int]:
    """Whether a JSON value can be an address or offset: an integer, not negative."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Seen:
    """A report's text as the checks see it: stripped of what comes before it and, when it
    opens a JSON object, split once into the `.ips` metadata line and what follows."""

    __slots__ = ("ips", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.ips: IpsParts | None = crashreport.split_ips(text) if text.startswith("{") else None

    @property
    def body(self) -> dict[str, Any] | None:
        """The JSON body, when there is one (not for text, nor a text report after the
        metadata line)."""
        return None if self.ips is None else self.ips.body
