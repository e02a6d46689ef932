"""Output for scripts (`--format json`) and for addresses (as `atos -i` prints them)."""

from __future__ import annotations

from dsymfind.symbolicate.ips import indented
from dsymfind.symbolicate.model import Frame, Report, ReportImage, image_key, is_address

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from dsymfind.symbolicate.engine import Located


def as_json(report: Report, statuses: dict[str, str], verdicts: dict[str, str]) -> str:
    """`{"images": [...], "diagnostics": [...], "threads": [...]}` (docs/symbolicate.md):
    addresses as integers, absent values as null."""
    images = [_image(i, statuses) | _verdict(i, verdicts) for i in _used(report)]
    diagnostics = [
        {
            "kind": d.kind,
            "index": d.position,
            "diagnosticMetaData": d.metadata,
            "timeStampBegin": d.begin,
            "timeStampEnd": d.end,
        }
        for d in report.diagnostics
    ]
    threads = [
        {
            "index": thread.index,
            "crashed": thread.crashed,
            "diagnostic": thread.diagnostic,
            "frames": [row for frame in thread.frames for row in _rows(report, frame)],
        }
        for thread in report.threads
    ]
    document = {"images": images, "diagnostics": diagnostics, "threads": threads}
    return indented(document) + "\n"


def _used(report: Report) -> list[ReportImage]:
    """The images frames point into, each once, in report order."""
    used = sorted({frame.image for frame in report.frames() if frame.image is not None})
    return [report.images[n] for n in used]


def _status(image: ReportImage, statuses: dict[str, str]) -> str | None:
    """What became of the image's dSYM; an Apple image whose frames the report already
    names was not looked up, and is `system` all the same."""
    looked_up = statuses.get(image_key(image))
    return looked_up or ("system" if image.apple else None)


def _image(image: ReportImage, statuses: dict[str, str]) -> dict[str, str | None]:
    status = _status(image, statuses)
    return {"uuid": image.uuid, "name": image.name, "arch": image.arch, "status": status}


def _verdict(image: ReportImage, verdicts: dict[str, str]) -> dict[str, str | None]:
    """`{"verdict": ...}` for an image left bare (fetch/verdicts.py); nothing for the others."""
    verdict = verdicts.get(image_key(image))
    return {} if verdict is None else {"verdict": verdict}


def _rows(report: Report, frame: Frame) -> list[dict[str, Any]]:
    image = None if frame.image is None else report.images[frame.image]
    address = frame.address
    if address is None and image is not None and image.base is not None:
        address = None if frame.offset is None else image.base + frame.offset
    common = {
        "image": None if image is None else image.name,
        "uuid": None if image is None else image.uuid,
        "address": address,
    }
    if not frame.symbols:
        return [{**common, **_unnamed(frame)}]
    return [_named(common, frame, located) for located in frame.symbols]


def _unnamed(frame: Frame) -> dict[str, Any]:
    """What the report itself says of a frame not looked up: a text line's name
    (`given`), a JSON frame's keys; null for what it does not say."""
    if frame.given is not None:
        return frame.given
    source = frame.source if isinstance(frame.source, dict) else {}
    symbol, offset = source.get("symbol"), source.get("symbolLocation")
    file, line = source.get("sourceFile"), source.get("sourceLine")
    return {
        "symbol": symbol if isinstance(symbol, str) else None,
        "offset": offset if is_address(offset) else None,
        "file": file if isinstance(file, str) else None,
        "line": line if is_address(line) else None,
        "inline": source.get("inline") is True,
    }


def _named(common: dict[str, Any], frame: Frame, located: Located) -> dict[str, Any]:
    """The row of `located`, one of the frame's entries, after the frame's `common` keys."""
    offset = None
    if located.start is not None and frame.offset is not None:
        offset = frame.offset - located.start
    row: dict[str, Any] = {
        **common,
        "symbol": located.symbol,
        "offset": offset,
        "file": located.file,
        "line": located.line,
        "inline": located.inline,
    }
    if located.context is not None:  # --source-context, and its file was read
        row["context"] = {"first": located.context.first, "lines": list(located.context.lines)}
    if located.symbol_table:  # a function and offset from the image's own symbols
        row["symbol_table"] = True
    return row
