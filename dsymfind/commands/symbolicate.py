"""`dsymfind symbolicate`: crash reports and addresses to names, inlined frames and lines.

Reports are read (symbolicate/formats.py), the dSYM of every image their frames need
is found or fetched once for the whole batch (symbolicate/dsyms.py), each image's
SymCache is opened or built (symbolicate/symcaches.py), and each report is written back
in its own form or as JSON. One bad report is its own error line; the others go on.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import NamedTuple

from dsymfind import atomic, permissions, settings
from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.errors import DsymfindError
from dsymfind.fetch import verdicts
from dsymfind.paths import CachePaths
from dsymfind.symbolicate import batches, dsyms, formats, outcomes, symcaches
from dsymfind.symbolicate.engine import ImageSymbols
from dsymfind.symbolicate.model import Report, ReportImage, Thread, image_key, needed_images

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from typing import TypeVar

    from dsymfind.symbolicate.context import Wanted
    from dsymfind.symbolicate.groups import Options as GroupOptions
    from dsymfind.symbolicate.workers import Lost

    T = TypeVar("T")

FOUND, MISSING, MISMATCH, SYSTEM = "found", "missing", "mismatch", "system"
APPLE_IMAGE = "an Apple system image the report gives no UUID for"
# A found image's status line says so when its own file's symbols name its frames.
SYMBOL_TABLE = "symbol table"
# An image that frames name but "Binary Images" lists without a UUID, or not at all: the
# status line names it in the UUID's place.
NO_UUID = "(no UUID)"
NO_UUID_REASON = "the report gives no UUID for it (not in its Binary Images), so no dSYM"
# An image's SymCache, why its dSYM has none, or None when it has no dSYM.
ImageTable = symcaches.SymCache | symcaches.UnusableDsym | None


class ReportsRequest(NamedTuple):
    reports: Sequence[str]
    form: str | None  # None: each report's own form
    out: str | None  # a file (one report) or a folder
    offline: bool
    crashed_only: bool  # else every thread, as Xcode symbolicates a report
    # Servers in backoff are asked too (the negative cache is never trusted here).
    ignore_negative_cache: bool = False
    source: Wanted | None = None  # --source-context and --source-map
    group: GroupOptions | None = None  # --group: the reports counted by signature, not written
    summary: str | None = None  # where the batch's JSON summary goes
    process: str | None = None  # a spindump's one process to symbolicate (name or pid)


class AddressesRequest(NamedTuple):
    addresses: Sequence[str]
    load_address: str
    uuid: str | None
    image: str | None  # a Mach-O file, instead of a UUID
    arch: str | None
    offline: bool
    ignore_negative_cache: bool = False


DETAILS = (
    "Reads .ips, .crash and MetricKit reports, sample output and spindumps (told apart "
    "by content; --process picks one process of a spindump) and writes each "
    "back in its own form, in Apple's text form (--format text), or as JSON. The dSYMs "
    "come from this "
    "machine, else the servers, each UUID once. With --uuid or --image, ADDR... are "
    "addresses, printed as atos -i does. With several reports each status line names "
    "its report and a summary line ends the run; an image left without a dSYM is said "
    "with why, in the word `dsymfind why` gives (absent, refused, unreachable, stub). "
    "Exit status 0 when every frame "
    "outside Apple's system images was symbolicated; 1 when a report, the "
    "configuration (credentials a store refused included) or the output could not be "
    "used; 2 when everything was written but some frames were left bare."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs", nargs="+", metavar="REPORT|ADDR", help="a report file, or a folder of them"
    )
    parser.add_argument(
        "--format",
        choices=formats.FORMATS,
        dest="form",
        help="the report's own form (the default), text (Apple's translated text form, as "
        "Xcode shows a report; crash is the same for a report not in that form) or JSON for "
        "scripts",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE|DIR", help="where to write (several reports: a folder)"
    )
    parser.add_argument("--offline", action="store_true", help="ask no server")
    parser.add_argument(
        "--ignore-negative-cache",
        action="store_true",
        help="ask even the servers that recently failed (UUIDs they recently lacked are "
        "always asked again)",
    )
    threads = parser.add_mutually_exclusive_group()
    threads.add_argument(
        "--crashed-only",
        action="store_true",
        help="only the crashed thread (and an .ips's last exception backtrace)",
    )
    threads.add_argument(
        "--all-threads", action="store_true", help="every thread: the default, kept for scripts"
    )
    batch = parser.add_argument_group("batches")
    batch.add_argument(
        "--summary",
        metavar="FILE",
        help="write JSON: each report's app, version, build, status, bare images and output",
    )
    image = parser.add_mutually_exclusive_group()
    image.add_argument("--uuid", metavar="UUID", help="the image of the addresses")
    image.add_argument("--image", metavar="FILE", help="a Mach-O file: the image of the addresses")
    parser.add_argument("--arch", metavar="ARCH", help="the slice of --image")
    parser.add_argument(
        "--load-address", metavar="ADDR", help="where the image was loaded (with --uuid/--image)"
    )
    parser.add_argument(
        "--source-context",
        type=int,
        metavar="N",
        help="N source lines either side of each app frame's line (at most 50), from the "
        "build's checkout or --source-map",
    )
    parser.add_argument(
        "--source-map",
        action="append",
        default=[],
        metavar="BUILD=LOCAL",
        help="read the sources the build named under BUILD from LOCAL (repeatable)",
    )
    parser.add_argument(
        "--group",
        action="store_true",
        help="count the reports by signature (how they ended, their top app frames): a "
        "table, or JSON with --format json",
    )
    parser.add_argument(
        "--group-frames",
        type=_positive,
        metavar="N",
        help="app frames in a --group signature (default 3)",
    )
    parser.add_argument(
        "--html", metavar="FILE", help="with --group: the groups as one self-contained page"
    )
    parser.add_argument(
        "--process",
        metavar="NAME",
        help="of a spindump or .hang holding many processes, the one (name or pid) to "
        "symbolicate and write (default: every process)",
    )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a number of frames: {text!r}")
    return int(text)


def _group_options(args: argparse.Namespace) -> GroupOptions | None:
    """--group's options, checked before anything is fetched."""
    if not args.group:
        if args.group_frames is not None or args.html is not None:
            raise DsymfindError("--group-frames and --html go with --group")
        return None
    from dsymfind.symbolicate import groups

    if args.form not in (None, formats.JSON):
        raise DsymfindError("--group writes a table, --format json or --html, not reports")
    frames = args.group_frames or groups.DEFAULT_FRAMES
    return groups.Options(frames, args.form or groups.TEXT, args.html)


def run(args: argparse.Namespace) -> int:
    """Reports, or with --uuid or --image addresses, whose other options need one of them."""
    source = None
    if args.source_context is not None or args.source_map:
        from dsymfind.symbolicate import context

        if args.uuid is not None or args.image is not None:
            raise DsymfindError("--source-context and --source-map go with reports")
        source = context.wanted(args.source_context, args.source_map)
    if args.uuid is None and args.image is None:
        if args.load_address is not None or args.arch is not None:
            raise DsymfindError("--load-address and --arch go with --uuid or --image")
        grouping = _group_options(args)
        return symbolicate(
            ReportsRequest(
                args.inputs,
                args.form,
                args.output,
                args.offline,
                args.crashed_only,
                ignore_negative_cache=args.ignore_negative_cache,
                source=source,
                group=grouping,
                summary=args.summary,
                process=args.process,
            )
        )
    if args.group:
        raise DsymfindError("--group goes with reports, not --uuid or --image")
    if args.load_address is None:
        raise DsymfindError("addresses need --load-address, where the image was loaded")
    return symbolicate_addresses(
        AddressesRequest(
            args.inputs,
            args.load_address,
            args.uuid,
            args.image,
            args.arch,
            args.offline,
            ignore_negative_cache=args.ignore_negative_cache,
        )
    )


def symbolicate(request: ReportsRequest) -> int:
    """The exit status of outcomes.py: 0 when every report was read and written and every
    frame outside Apple's system images (and not already named) was symbolicated; 1 when
    a report, the configuration or the output could not be used; 2 when all was written
    but some frames were left bare."""
    if len(request.reports) > 1 and request.out is None and request.group is None:
        raise DsymfindError("several reports need -o DIR, where each is written under its name")
    folders = batches.has_folder(request.reports)
    if folders and request.out is None:
        raise DsymfindError("a folder of reports needs -o DIR, where they are written")
    if request.summary is not None:
        batches.check_summary_path(request.summary)
    # main.py runs this verb with the garbage collector off.
    current = settings.load(os.environ)
    cache = CachePaths(current["cache_dir"])
    permissions.secure_cache(cache.root)
    inputs = batches.expand(request.reports, request.out)
    paths = [given.path for given in inputs]
    several = len(paths) > 1 or folders
    known = batches.identities(inputs)
    plan = Plan({i.path: i for i in inputs}, known, set(known.values()), folders, {})
    batch = Batch(request, plan, several, RunContext(cache, current))
    meter = batches.Meter(len(paths))
    count = 0
    if batch.shareable():
        # Only a batch written to a folder may be shared out: a report's run spares
        # the workers' pickle and selectors.
        from dsymfind.symbolicate import workers

        count = workers.count(len(paths))
    if count:
        batch.in_workers(paths, meter, count)
    else:
        batch.in_process(paths, meter)
    found = [_outcome(batch.results.get(path), path in batch.unwritten) for path in paths]
    summarized = request.summary is None or _summarize(request.summary, batch, found)
    if several:
        print(outcomes.summary(found), file=sys.stderr)
    return outcomes.exit_status(found) if summarized else outcomes.UNUSABLE


class Plan(NamedTuple):
    """A batch's inputs (by path), their files (no output may replace one), whether a
    folder is among them, and where each report was written (filled as they are)."""

    inputs: dict[str, batches.Input]
    identities: dict[str, tuple[int, int]]  # each input's device and inode, by its path
    real: set[tuple[int, int]]  # all of them
    folders: bool
    outputs: dict[str, str]


# What the summary calls each outcome.
SUMMARY_STATUS = {
    outcomes.COMPLETE: batches.COMPLETE,
    outcomes.BARE: batches.PARTIAL,
    outcomes.UNREADABLE: batches.UNREADABLE,
    outcomes.UNWRITTEN: batches.UNWRITTEN,
}


def _summarize(path: str, batch: Batch, found: list[outcomes.Outcome]) -> bool:
    """Write the --summary file; False (its one error line said) when it cannot be."""
    entries = []
    inputs, outputs = batch.plan.inputs, batch.plan.outputs
    for (report_path, given), outcome in zip(inputs.items(), found, strict=True):
        facts = batch.facts.get(report_path)
        identity: tuple[str | None, str | None, str | None] = (None, None, None)
        bare: list[batches.BareImage] = []
        if facts is not None and batch.opened is not None:
            identity = facts.identity
            statuses, verdicts = batch.opened.statuses, batch.opened.verdicts
            bare = batches.bare_images(facts.needed, statuses, verdicts)
        status = SUMMARY_STATUS[outcome.state]
        entries.append(batches.entry(given.path, identity, status, bare, outputs.get(report_path)))
    try:
        batches.write_summary(path, entries)
    except DsymfindError as exc:
        print(f"dsymfind: error: {exc}", file=sys.stderr)
        return False
    return True


def _outcome(bare: Bare | None, unwritten: bool) -> outcomes.Outcome:
    """What came of a report: `bare` is None for one that could not be read."""
    if bare is None:
        return outcomes.Outcome(outcomes.UNREADABLE)
    refused = bool(bare.refused)
    if unwritten:
        return outcomes.Outcome(outcomes.UNWRITTEN, refused)
    return outcomes.Outcome(outcomes.BARE if bare.frames else outcomes.COMPLETE, refused)


def _read(
    path: str, crashed_only: bool, form: str | None = None, process: str | None = None
) -> Report | None:
    """The report, None when it cannot be read or not written in `form`: said before
    anything is fetched for it."""
    try:
        text = crashreport.read_text_if_small(path)
        report = _large_hang(path) if text is None else formats.parse(text)
        if process is not None:
            from dsymfind.symbolicate import hangtext

            hangtext.pick(report, process)
        if form is not None:
            formats.check(report, form)
    except CrashReportError as exc:
        message = str(exc) if str(exc).startswith(path) else f"{path}: {exc}"
        print(f"dsymfind: error: {message}", file=sys.stderr)
        return None
    if crashed_only:
        report.threads = _crashed(report.threads)
    return report


def _large_hang(path: str) -> Report:
    """A sample or spindump larger than any crash report, read a line at a time."""
    from dsymfind.symbolicate import hangfiles

    report = hangfiles.read_path(path)
    if report is None:
        raise crashreport.too_large(path)
    return report


def _crashed(threads: list[Thread]) -> list[Thread]:
    """The crashed threads of each diagnostic (a report has one, MetricKit's several);
    all of one that marks none (a handwritten report, MetricKit's CPU and disk-write
    trees, which are no thread's)."""
    kept = []
    for diagnostic in dict.fromkeys(thread.diagnostic for thread in threads):
        own = [thread for thread in threads if thread.diagnostic == diagnostic]
        kept += [thread for thread in own if thread.crashed] or own
    return kept


class Facts(NamedTuple):
    """What the batch must know of a report read, before any is written: the images its
    frames need (by image_key), the names of all its images, its form, and its app,
    version and build as it states them (for the summary)."""

    needed: dict[str, ReportImage]
    names: frozenset[str]
    kind: str
    identity: tuple[str | None, str | None, str | None]


def _facts(report: Report) -> Facts:
    names = frozenset(image.name for image in report.images)
    return Facts(needed_images(report), names, report.kind, batches.identity(report))


def _wanted_images(facts: Iterable[Facts]) -> dict[str, ReportImage]:
    """The images (by image_key, each once across reports) whose frames are to be looked
    up; those without a UUID too, so that each is named in its status line."""
    wanted: dict[str, ReportImage] = {}
    for each in facts:
        for key, image in each.needed.items():
            wanted.setdefault(key, image)
    return wanted


class Opened(NamedTuple):
    """What the run found for each image (by image_key): its engine when found, its
    status and status line, the servers that refused our credentials for it, and why a
    missing one is (fetch/verdicts.py)."""

    engines: dict[str, ImageSymbols]  # by UUID
    statuses: dict[str, str]
    lines: dict[str, str]
    refused: dict[str, tuple[str, ...]]
    verdicts: dict[str, str]
    dwarfs: dict[str, str]  # the DWARF file of each engine's image, by UUID
    symbol_tables: set[str]  # the UUIDs whose engine reads the image's own symbol table


def _open_images(
    cache: CachePaths,
    images: dict[str, ReportImage],
    current: settings.Settings,
    request: ReportsRequest,
    stub_names: set[str],
) -> Opened:
    identified = [i.uuid for i in images.values() if i.uuid is not None]
    found = dsyms.locate(
        identified,
        current,
        offline=request.offline,
        ignore_negative_cache=request.ignore_negative_cache,
    )
    dwarfs = {uuid: f.dwarf for uuid, f in found.items() if f.dwarf is not None}
    own_tables = {uuid for uuid, f in found.items() if f.symbol_table}
    tables = symcaches.load_all(cache, dwarfs, own_tables)
    opened = Opened({}, {}, {}, {}, {}, {}, set())
    for key, image in images.items():
        status, detail = _open_image(image, found, tables, opened.engines)
        opened.statuses[key] = status
        said = f"{status:<8} "
        if status in (MISSING, SYSTEM) and image.uuid is not None:
            # An Apple image nobody has is bare too, for the same reasons (its symbol table
            # is fetched as a dSYM is); its frames alone do not make the exit status 2.
            opened.refused[key] = found[image.uuid].refused
            verdict = _verdict(image, found[image.uuid], stub_names)
            opened.verdicts[key] = verdict
            said = f"{status} ({verdict})  "
        line = f"{said}{image.uuid or NO_UUID}  {image.name}"
        opened.lines[key] = f"{line}  {detail}" if status == FOUND else f"{line}: {detail}"
    opened.dwarfs.update({uuid: dwarfs[uuid] for uuid in opened.engines})
    opened.symbol_tables.update(uuid for uuid in opened.engines if found[uuid].symbol_table)
    return opened


def _verdict(image: ReportImage, found: dsyms.Found, stub_names: set[str]) -> str:
    """Why the image is bare, in the word `dsymfind why` would give (docs/why.md), from what
    the run saw: `why` also reads the build records, telling other-build and wrong-slice
    from absent."""
    return verdicts.STUB if image.name in stub_names else found.verdict


def _stub_names(facts: Iterable[Facts]) -> set[str]:
    """The names of images whose code is in a `NAME.debug.dylib` the report also loads: stub
    executables (Xcode's ENABLE_DEBUG_DYLIB), which need no dSYM."""
    suffix = verdicts.DEBUG_DYLIB_SUFFIX
    names = {name for each in facts for name in each.names}
    return {name[: -len(suffix)] for name in names if name.endswith(suffix)}


def _open_image(
    image: ReportImage,
    found: dict[str, dsyms.Found],
    tables: Mapping[str, ImageTable],
    engines: dict[str, ImageSymbols],
) -> tuple[str, str]:
    """(status, the DWARF file or why there is none); the engine goes into `engines`."""
    if image.uuid is None:
        return (SYSTEM, APPLE_IMAGE) if image.apple else (MISSING, NO_UUID_REASON)
    located = found[image.uuid]
    dwarf, table = located.dwarf, tables.get(image.uuid)
    if dwarf is None or table is None:
        return (SYSTEM if image.apple else MISSING), located.reason
    if isinstance(table, symcaches.UnusableDsym):
        return MISMATCH, str(table)
    engines[image.uuid] = ImageSymbols(table, symbol_table=located.symbol_table)
    return FOUND, f"{dwarf} ({SYMBOL_TABLE})" if located.symbol_table else dwarf


class Bare(NamedTuple):
    """A report's frames left bare (outside Apple's images), and the servers that refused
    our credentials for their images."""

    frames: int
    refused: tuple[str, ...]


def _symbolicated(
    path: str, report: Report, needed: Iterable[str], opened: Opened, several: bool
) -> Bare:
    """The report's frames looked up, the status lines of the images it needs (by
    image_key) said, each naming the report when there are several; what was left bare."""
    named = left = 0
    refused: dict[str, None] = {}
    images = report.images
    # Each image's engine found once, not once a frame: this loop runs for every frame.
    engines = [None if image.uuid is None else opened.engines.get(image.uuid) for image in images]
    for frame in report.frames():
        if frame.named:
            continue
        index = frame.image
        engine = None if index is None else engines[index]
        if engine is not None and frame.offset is not None:
            frame.symbols = engine.frame(frame.offset, frame.position)
        if frame.symbols:
            named += 1
        elif index is None or not images[index].apple:
            left += 1
            refusers = () if index is None else _refusers(images[index], opened)
            refused.update(dict.fromkeys(refusers))
    prefix = f"{path}: " if several else ""
    lines = [prefix + opened.lines[key] + "\n" for key in needed]
    # One write for the report's lines: stderr writes through, and a folder of reports
    # said line by line cost two system calls a line (40,000 for 1,000 reports).
    sys.stderr.write("".join(lines))
    if refused:
        _say_refused(path, named, left, tuple(refused))
    return Bare(left, tuple(refused))


def _refusers(image: ReportImage, opened: Opened) -> tuple[str, ...]:
    return opened.refused.get(image_key(image), ())


def _say_refused(path: str, named: int, left: int, servers: tuple[str, ...]) -> None:
    """One error line a log reader cannot miss: the report is (partly) unsymbolicated
    because a store would not take our credentials, which no retry will change."""
    what = "not symbolicated" if not named else f"{left} frames left bare"
    who = ", ".join(servers)
    print(
        f"dsymfind: error: {path}: {what}: {who} refused the credentials "
        "(`dsymfind doctor` checks them)",
        file=sys.stderr,
    )


class Written(NamedTuple):
    """What came of a report in the write loop: its frames left bare and where it went
    (None: nowhere, its error said)."""

    bare: Bare
    output: str | None


class RunContext(NamedTuple):
    """The run's cache and settings."""

    cache: CachePaths
    current: settings.Settings


class Settled(NamedTuple):
    """What the parent sends each worker between the rounds: what was found for the
    images (without the engines, which a worker opens from `dwarfs`) and where each report
    is written."""

    opened: Opened
    targets: dict[str, str | None]


class Batch:
    """The reports of a run: read, then the images they need found and opened once, then
    each looked up and written to stdout, `-o FILE` or `-o DIR/<its name>` (a folder's
    reports at their paths under it), in turn; a long batch by worker processes, each a
    share of the reports (symbolicate/workers.py)."""

    def __init__(self, request: ReportsRequest, plan: Plan, several: bool, run: RunContext) -> None:
        self.request, self.plan, self.several, self.run = request, plan, several, run
        self.to_folder = request.out is not None and (
            len(request.reports) > 1 or plan.folders or os.path.isdir(request.out)
        )
        self.reports: dict[str, Report] = {}  # read by this process, until written
        self.facts: dict[str, Facts] = {}
        self.opened: Opened | None = None
        self.targets: dict[str, str | None] = {}
        self.results: dict[str, Bare] = {}
        self.unwritten: set[str] = set()
        self.folders_made: set[str] = set()

    def shareable(self) -> bool:
        """Whether workers could share the reports out: each written to its own file, no
        step that needs them all in one process (groups, source files read once)."""
        request = self.request
        return self.to_folder and request.group is None and request.source is None

    def in_process(self, paths: Sequence[str], meter: batches.Meter) -> None:
        meter.phase("read", len(paths))
        for path in meter.each(paths):
            self.read_one(path)
        self._settle()
        opened = self.opened
        assert opened is not None
        request, reports = self.request, self.reports
        if request.source is not None or request.group is not None:
            # Every report looked up before any is written: the source files are read once
            # for the batch, and groups need them all.
            for path, report in reports.items():
                needed = self.facts[path].needed
                self.results[path] = _symbolicated(path, report, needed, opened, self.several)
        if request.source is not None:
            from dsymfind.symbolicate import context

            context.attach(reports.values(), request.source, self.run.current)
        meter.phase("written", len(reports))
        if request.group is not None:
            _write_groups(reports, request)
            return
        for path in meter.each(list(reports)):
            self._record(path, self._looked_up_and_written(path, reports.pop(path)))

    def in_workers(self, paths: Sequence[str], meter: batches.Meter, count: int) -> None:
        from dsymfind.symbolicate import workers

        with workers.Pool(paths, self.read_one, self.write_one, count) as pool:
            meter.phase("read", len(paths))
            for index, facts in _said(pool.first(), meter, lambda index: True):
                if isinstance(facts, workers.Lost):
                    _say_lost(paths[index], "read", facts)
                elif facts is not None:
                    self.facts[paths[index]] = facts
            pool.settle(self._settle())
            meter.phase("written", len(self.facts))
            read = self.facts
            for index, written in _said(pool.second(), meter, lambda index: paths[index] in read):
                path = paths[index]
                if isinstance(written, workers.Lost) and path in read:
                    _say_lost(path, "written", written)
                    self._record(path, Written(Bare(0, ()), None))
                elif isinstance(written, Written):
                    self._record(path, written)

    def read_one(self, path: str) -> Facts | None:
        """The report read and kept for its writing; what the batch must know of it, None
        when it could not be read (said on stderr)."""
        request = self.request
        report = _read(path, request.crashed_only, request.form, request.process)
        if report is None:
            return None
        self.reports[path] = report
        facts = self.facts[path] = _facts(report)
        return facts

    def _settle(self) -> Settled:
        """The images every report read needs, found and opened once, and every output's
        name, decided in input order (the same however the reports are shared out)."""
        run, facts = self.run, self.facts.values()
        wanted = _wanted_images(facts)
        self.opened = _open_images(run.cache, wanted, run.current, self.request, _stub_names(facts))
        taken: set[str] = set()
        request, plan = self.request, self.plan
        for path, each in self.facts.items():
            form = request.form or each.kind
            self.targets[path] = _output_of(
                request, plan, path, form, taken, to_folder=self.to_folder
            )
        return Settled(self.opened._replace(engines={}), self.targets)

    def write_one(self, path: str, settled: Settled) -> Written | None:
        """A worker's second round: the report looked up and written; None for one it
        could not read. Its first call opens its engines from what the parent sent."""
        report = self.reports.pop(path, None)
        if report is None:
            return None
        if self.opened is None:
            self._take(settled)
        return self._looked_up_and_written(path, report)

    def _looked_up_and_written(self, path: str, report: Report) -> Written:
        assert self.opened is not None
        bare = self.results.get(path)
        if bare is None:
            needed = self.facts[path].needed
            bare = _symbolicated(path, report, needed, self.opened, self.several)
        return Written(bare, self._written(path, report))

    def _take(self, settled: Settled) -> None:
        """A worker's engines, from the SymCaches the parent found (and built) for it."""
        opened = settled.opened
        tables = symcaches.load_all(self.run.cache, opened.dwarfs, opened.symbol_tables)
        engines = {
            uuid: ImageSymbols(table, symbol_table=uuid in opened.symbol_tables)
            for uuid, table in tables.items()
            if isinstance(table, symcaches.SymCache)
        }
        self.opened = opened._replace(engines=engines)
        self.targets = settled.targets

    def _record(self, path: str, written: Written) -> None:
        self.results.setdefault(path, written.bare)
        if written.output is None:
            self.unwritten.add(path)
        else:
            self.plan.outputs[path] = written.output

    def _written(self, path: str, report: Report) -> str | None:
        """Where the report went ("-": stdout); None when it could not be written."""
        assert self.opened is not None
        request, target = self.request, self.targets[path]
        form = request.form or formats.default_format(report)
        if form == report.kind and _read_by_lines(report):
            return (target or "-") if _write_by_lines(report, path, target) else None
        try:
            text = formats.render(report, form, self.opened.statuses, self.opened.verdicts)
        except (CrashReportError, RecursionError) as exc:
            # A body nested past what the writer can write is this report's error alone.
            reason = "nested too deeply to write" if isinstance(exc, RecursionError) else exc
            print(f"dsymfind: error: {path}: {reason}", file=sys.stderr)
            return None
        if target is None:
            sys.stdout.write(text)
            return "-"
        try:
            self._write_file(target, path, text)
        except DsymfindError as exc:  # this report's: the others are still written
            print(f"dsymfind: error: {path}: {exc}", file=sys.stderr)
            return None
        return target

    def _write_file(self, target: str, source: str, text: str) -> None:
        """`text` into `target`, which must not be a report of the batch: `-o .` among the
        reports would replace them (an input is never lost). One stat of the target."""
        try:
            status = os.stat(target)
        except OSError:
            status = None
        try:
            if status is not None:
                found = (status.st_dev, status.st_ino)
                source_identity = self.plan.identities.get(source)
                refusal = batches.refused_target(target, found, source_identity, self.plan.real)
                if refusal is not None:
                    raise DsymfindError(refusal)
                if stat.S_ISCHR(status.st_mode) or stat.S_ISFIFO(status.st_mode):
                    _write_stream(target, text)
                    return
            folder = os.path.dirname(target) or "."
            if folder not in self.folders_made:
                os.makedirs(folder, exist_ok=True)
                self.folders_made.add(folder)
            atomic.write_into_folder(target, text.encode())
        except OSError as exc:
            raise DsymfindError(f"cannot write {target}: {exc.strerror or exc}") from None


def _said(
    results: Iterable[tuple[int, str, T]], meter: batches.Meter, counted: Callable[[int], bool]
) -> Iterator[tuple[int, T]]:
    """Each input's result, what its worker said for it said first; a step of the meter for
    each input `counted` (in the second round, the reports that were read)."""
    for index, said, result in results:
        meter.hide()
        sys.stderr.write(said)
        yield index, result
        if counted(index):
            meter.step()
    meter.hide()


def _say_lost(path: str, what: str, lost: Lost) -> None:
    print(
        f"dsymfind: error: {path}: not {what}: the process that had it ended ({lost.how})",
        file=sys.stderr,
    )


def _output_of(
    request: ReportsRequest, plan: Plan, path: str, form: str, taken: set[str], *, to_folder: bool
) -> str | None:
    """Where the report at `path` is written: None for stdout, `-o FILE`, or its name (a
    folder's reports: their paths) under `-o DIR`."""
    if request.out is None:
        return None
    if not to_folder:
        return request.out
    return batches.target(request.out, plan.inputs[path], form, taken)


def _write_groups(reports: dict[str, Report], request: ReportsRequest) -> set[str]:
    """The reports' groups to stdout, `-o FILE` and the --html page; none is unwritten."""
    from dsymfind.symbolicate import groups

    options = request.group
    assert options is not None
    found = [entry for path, report in reports.items() for entry in groups.entries(path, report)]
    text = groups.write(groups.group(found, options.frames), options, request.out)
    if text is not None:
        sys.stdout.write(text)
    return set()


def _read_by_lines(report: Report) -> bool:
    """A sample or spindump too large to read whole (_large_hang): written a line at a time."""
    if report.kind not in ("sample", "spindump"):
        return False  # the others never are: their writers are not even imported
    from dsymfind.symbolicate import hangtext

    return hangtext.from_file(report)


def _write_by_lines(report: Report, source: str, target: str | None) -> bool:
    """The report into `target` (stdout when None), a line at a time; False when it could
    not be written (said on stderr)."""
    from dsymfind.symbolicate import hangtext

    try:
        if target is None:
            hangtext.write_out(report, sys.stdout)
            return True
        if os.path.exists(target) and os.path.samefile(target, source):
            raise DsymfindError(f"{target} is the report itself; write to another -o")
        hangtext.write_file(report, target, replace=not _is_a_stream(target))
    except (CrashReportError, DsymfindError) as exc:
        print(f"dsymfind: error: {source}: {exc}", file=sys.stderr)
        return False
    except OSError as exc:
        print(
            f"dsymfind: error: {source}: cannot write {target}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return False
    return True


def _write_stream(target: str, text: str) -> None:
    """A device or a pipe (-o /dev/null, -o /dev/stderr, a FIFO) is written to, as a
    shell's `>` does: a rename would put a file in its place."""
    with open(target, "wb") as stream:
        stream.write(text.encode())


def _is_a_stream(target: str) -> bool:
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def symbolicate_addresses(request: AddressesRequest) -> int:
    """As `atos -i -l LOAD`: one line per frame; exit 2 when an address had no name."""
    from dsymfind.symbolicate import atos  # addresses only: a report's run spares it

    load_address = atos.parse_address(request.load_address)
    addresses = [atos.parse_address(text) for text in request.addresses]
    current = settings.load(os.environ)
    cache = CachePaths(current["cache_dir"])
    permissions.secure_cache(cache.root)
    image = atos.resolve(
        request.image,
        request.uuid,
        request.arch,
        current,
        offline=request.offline,
        ignore_negative_cache=request.ignore_negative_cache,
    )
    engine = ImageSymbols(atos.table(cache, image))
    complete = True
    for address in addresses:
        offset = address - load_address
        symbols = engine.at(offset) if offset >= 0 else []
        complete = complete and bool(symbols)
        print("\n".join(atos.lines(image.name, address, offset, symbols)))
    return outcomes.ALL_COMPLETE if complete else outcomes.FRAMES_LEFT_BARE
