"""`dsymfind symbolicate`: crash reports and addresses to names, inlined frames and lines.

Reports are read (symbolicate/formats.py), the dSYM of every image their frames need
is found or fetched once for the whole batch (symbolicate/dsyms.py), each image's
SymCache is opened or built (symbolicate/symcaches.py), and each report is written back
in its own form or as JSON. One bad report is its own error line; the others go on.
"""

from __future__ import annotations

import os
import sys

from dsymfind import atomic, permissions, settings
from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.cache_layout import CacheLayout
from dsymfind.errors import DsymfindError
from dsymfind.symbolicate import dsyms, formats, output, symcaches
from dsymfind.symbolicate.engine import ImageSymbols
from dsymfind.symbolicate.model import Report, ReportImage
from dsymfind.tuples import Record
from dsymfind.uuids import normalize_uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

FOUND, MISSING, MISMATCH, SYSTEM = "found", "missing", "mismatch", "system"
# An image's SymCache, why its dSYM has none, or None when it has no dSYM.
ImageTable = symcaches.SymCache | symcaches.UnusableDsym | None


class ReportsRequest(Record):
    reports: Sequence[str]
    form: str | None  # None: each report's own form
    out: str | None  # a file (one report) or a folder
    offline: bool
    all_threads: bool
    # Servers in backoff are asked too (the negative cache is never trusted here).
    ignore_negative_cache: bool = False


class AddressesRequest(Record):
    addresses: Sequence[str]
    load_address: str
    uuid: str | None
    image: str | None  # a Mach-O file, instead of a UUID
    arch: str | None
    offline: bool
    ignore_negative_cache: bool = False


def symbolicate(request: ReportsRequest) -> int:
    """Exit 0 when every report was read and every frame outside Apple's system images
    (and not already named) was symbolicated; 1 otherwise, the output written all the same."""
    if len(request.reports) > 1 and request.out is None:
        raise DsymfindError("several reports need -o DIR, where each is written under its name")
    # main.py runs this verb with the garbage collector off.
    current = settings.load(os.environ)
    layout = CacheLayout(current["cache_dir"])
    permissions.secure_cache(layout.root)
    read = {path: _read(path, request.all_threads) for path in dict.fromkeys(request.reports)}
    reports = {path: report for path, report in read.items() if report is not None}
    images = _wanted_images(reports.values())
    engines, statuses = _open_images(layout, images, current, request)
    complete = all([_symbolicate(report, engines) for report in reports.values()])
    written = _write_all(reports, request, statuses)
    return 0 if complete and written and len(reports) == len(read) else 1


def _read(path: str, all_threads: bool) -> Report | None:
    try:
        report = formats.parse(crashreport.read_text(path))
    except CrashReportError as exc:
        message = str(exc) if str(exc).startswith(path) else f"{path}: {exc}"
        print(f"dsymfind: error: {message}", file=sys.stderr)
        return None
    if not all_threads:
        # The crashed thread is what a reader looks at first; a report that marks none
        # (MetricKit hang trees, a handwritten one) keeps them all.
        report.threads = [t for t in report.threads if t.crashed] or report.threads
    return report


def _wanted_images(reports: Iterable[Report]) -> dict[str, ReportImage]:
    """The images (by UUID, each once across reports) whose frames are to be looked up."""
    wanted: dict[str, ReportImage] = {}
    for report in reports:
        for frame in report.frames():
            if frame.named or frame.image is None:
                continue
            image = report.images[frame.image]
            if image.uuid is not None:
                wanted.setdefault(image.uuid, image)
    return wanted


def _open_images(
    layout: CacheLayout,
    images: dict[str, ReportImage],
    current: settings.Settings,
    request: ReportsRequest,
) -> tuple[dict[str, ImageSymbols], dict[str, str]]:
    found = dsyms.locate(
        {u: i.apple for u, i in images.items()},
        current,
        offline=request.offline,
        ignore_negative_cache=request.ignore_negative_cache,
    )
    dwarfs = {uuid: f.dwarf for uuid, f in found.items() if f.dwarf is not None}
    tables = symcaches.load_all(layout, dwarfs)
    engines: dict[str, ImageSymbols] = {}
    statuses: dict[str, str] = {}
    for uuid, image in images.items():
        status, detail = _open_image(uuid, image, found[uuid], tables.get(uuid), engines)
        statuses[uuid] = status
        line = f"{status:<8} {uuid}  {image.name}"
        print(f"{line}  {detail}" if status == FOUND else f"{line}: {detail}", file=sys.stderr)
    return engines, statuses


def _open_image(
    uuid: str,
    image: ReportImage,
    found: dsyms.Found,
    table: ImageTable,
    engines: dict[str, ImageSymbols],
) -> tuple[str, str]:
    """(status, the DWARF file or why there is none); the engine goes into `engines`."""
    if found.dwarf is None or table is None:
        if image.apple:
            return SYSTEM, "an Apple system image, not fetched"
        return MISSING, found.reason
    if isinstance(table, symcaches.UnusableDsym):
        return MISMATCH, str(table)
    engines[uuid] = ImageSymbols(table)
    return FOUND, found.dwarf


def _symbolicate(report: Report, engines: dict[str, ImageSymbols]) -> bool:
    """Look every frame up; whether each frame outside Apple's images now has a name."""
    complete = True
    for frame in report.frames():
        if frame.named:
            continue
        image = None if frame.image is None else report.images[frame.image]
        engine = None if image is None or image.uuid is None else engines.get(image.uuid)
        if engine is not None and frame.offset is not None:
            frame.symbols = engine.frame(frame.offset, frame.position)
        if not frame.symbols and not (image is not None and image.apple):
            complete = False
    return complete


def _write_all(
    reports: dict[str, Report], request: ReportsRequest, statuses: dict[str, str]
) -> bool:
    """Each report to stdout, `-o FILE` or `-o DIR/<its name>`; False when one failed."""
    to_folder = request.out is not None and (len(request.reports) > 1 or os.path.isdir(request.out))
    taken: set[str] = set()
    ok = True
    for path, report in reports.items():
        form = request.form or formats.default_format(report)
        try:
            text = formats.render(report, form, statuses)
        except (CrashReportError, RecursionError) as exc:
            # A body nested past what the writer can write is this report's error alone.
            reason = "nested too deeply to write" if isinstance(exc, RecursionError) else exc
            print(f"dsymfind: error: {path}: {reason}", file=sys.stderr)
            ok = False
            continue
        if request.out is None:
            sys.stdout.write(text)
            continue
        target = _target(request.out, path, form, taken) if to_folder else request.out
        try:
            _write_file(target, path, text)
        except DsymfindError as exc:  # this report's: the others are still written
            print(f"dsymfind: error: {path}: {exc}", file=sys.stderr)
            ok = False
    return ok


def _target(folder: str, report_path: str, form: str, taken: set[str]) -> str:
    """`folder/<the report's file name>` (`.json` added for JSON), never twice the same."""
    name = os.path.basename(report_path.rstrip("/")) or "report"
    if form == "json" and not name.endswith(".json"):
        name += ".json"
    stem, number = name, 1
    while name in taken:
        number += 1
        name = f"{stem}-{number}"
    taken.add(name)
    return os.path.join(folder, name)


def _write_file(target: str, source: str, text: str) -> None:
    """`text` into `target`, which must not be the report it was read from: `-o .` among
    the reports would replace them (the input is never lost)."""
    if os.path.exists(target) and os.path.samefile(target, source):
        raise DsymfindError(f"{target} is the report itself; write to another -o")
    try:
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        atomic.write_bytes(target, text.encode(), fsync=False)
    except OSError as exc:
        raise DsymfindError(f"cannot write {target}: {exc.strerror or exc}") from None


def symbolicate_addresses(request: AddressesRequest) -> int:
    """As `atos -i -l LOAD`: one line per frame; exit 1 when an address had no name."""
    load_address = _address(request.load_address)
    addresses = [_address(text) for text in request.addresses]
    current = settings.load(os.environ)
    layout = CacheLayout(current["cache_dir"])
    permissions.secure_cache(layout.root)
    uuid, dwarf, name = _image_of(request, current)
    engine = ImageSymbols(symcaches.load(layout, dwarf, uuid))
    complete = True
    for address in addresses:
        offset = address - load_address
        symbols = engine.at(offset) if offset >= 0 else []
        complete = complete and bool(symbols)
        print("\n".join(output.atos_lines(name, address, offset, symbols)))
    return 0 if complete else 1


def _address(text: str) -> int:
    try:
        value = int(text, 16 if text.lower().startswith("0x") else 10)
    except ValueError:
        raise DsymfindError(f"not an address: {text!r}") from None
    if value < 0 or value >= 1 << 64:
        raise DsymfindError(f"not an address: {text!r}")
    return value


def _image_of(request: AddressesRequest, current: settings.Settings) -> tuple[str, str, str]:
    """(UUID, the DWARF or Mach-O file to read, the image's name) of the request."""
    if request.image is not None:
        uuid, is_dsym = _slice_of(request.image, request.arch)
        if is_dsym:
            return uuid, request.image, os.path.basename(request.image)
    else:
        uuid = normalize_uuid(request.uuid or "") or ""
        if not uuid:
            raise DsymfindError(f"not a UUID: {request.uuid!r}")
    found = dsyms.locate(
        {uuid: False},
        current,
        offline=request.offline,
        ignore_negative_cache=request.ignore_negative_cache,
    )[uuid]
    if found.dwarf is not None:
        return uuid, found.dwarf, os.path.basename(request.image or found.dwarf)
    if request.image is not None:
        return uuid, request.image, os.path.basename(request.image)  # its own symbol table
    raise DsymfindError(f"no dSYM for {uuid}: {found.reason}")


def _slice_of(path: str, arch: str | None) -> tuple[str, bool]:
    """(UUID, whether it is a dSYM) of the slice of `path` that `arch` names."""
    from dsymfind.apple import macho

    slices = [s for s in macho.read_slices(path) if s.uuid is not None]
    chosen = [s for s in slices if arch is None or s.arch == arch]
    if len(chosen) != 1:
        have = ", ".join(s.arch for s in slices) or "none with a UUID"
        need = "no slice for --arch " + arch if arch else "several slices: give --arch"
        raise DsymfindError(f"{path}: {need} (it has {have})")
    found = chosen[0]
    assert found.uuid is not None
    return found.uuid, found.filetype_name == "MH_DSYM"
