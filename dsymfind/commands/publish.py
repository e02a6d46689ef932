"""`dsymfind publish`: put verified symbols into a store that every developer's helper
fetches from (a folder a web server serves, or an S3 bucket), create-only."""

from __future__ import annotations

import argparse
import contextlib
import enum
import functools
import itertools
import json
import os
import signal
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from dsymfind import settings, stores
from dsymfind.apple import products
from dsymfind.errors import DsymfindError
from dsymfind.progress import ByteMeter, Progress
from dsymfind.publish import build_record, completeness, keys, store_choice, system, xcode
from dsymfind.publish import recording as recording_
from dsymfind.publish.inputs import DWARF, Collected, Collector, Piece, still_matches
from dsymfind.publish.opened import OpenedFile
from dsymfind.stores import builds, layouts
from dsymfind.stores.writers import (
    CONFLICT,
    EXISTS,
    FAILED,
    PUBLISHED,
    WOULD_PUBLISH,
    Manager,
    Outcome,
    PublishError,
    Writer,
    WriterUnusable,
)
from dsymfind.vcs import provenance

# Exit status 1 when any object ended so (or any input was refused).
_BAD_STATES = (CONFLICT, FAILED)
# After Ctrl-C: 128 + SIGINT, what a shell reports for a command it interrupted.
INTERRUPTED = 130


@dataclass(frozen=True)
class Destination:
    target: Writer
    default_layout: str
    casing: str
    folder: str | None = None  # a folder target: never read back as an input


DETAILS = (
    "Every input is verified first; a universal file becomes one thin object per UUID. "
    "Create-only: a key holding the same bytes is `exists`, other bytes a `conflict` "
    "(left alone, exit status 1). A build record under _builds/ is written last "
    "(docs/builds.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a .dSYM, folder, .xcarchive, zip of dSYMs, DWARF file, PE file or PDB",
    )
    parser.add_argument(
        "--to",
        required=True,
        metavar="NAME|DIR|s3://BUCKET/PREFIX",
        help="a configured server's name, a folder, or an S3 location",
    )
    *others, last = keys.PUBLISHABLE
    parser.add_argument(
        "--layout",
        action="append",
        default=[],
        dest="layouts",
        metavar="LAYOUT",
        help=f"{', '.join(others)} or {last} (repeatable; "
        "default: the server's layout, else unified)",
    )
    parser.add_argument(
        "--executables",
        action="store_true",
        help="also publish the binaries under an .xcarchive's Products/ and named Mach-O binaries",
    )
    parser.add_argument(
        "--system",
        action="store_true",
        help="the PATHs are Xcode DeviceSupport folders or simulator runtimes: publish Apple's "
        "libraries under the executable keys, one build record of kind system per OS build",
    )
    parser.add_argument(
        "--source-root",
        metavar="DIR",
        help="the build's source root, recorded with its git commit and remote (default: "
        "the top of the git repository publish runs in, when the DWARF's paths lie below it)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would happen, write nothing"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--verbose", action="store_true", help="also each object's key, and the files skipped"
    )
    parser.add_argument(
        "--build-id",
        metavar="ID",
        help="the build's ID in the store (A-Z a-z 0-9 . _ -; default: the time and a random part)",
    )
    parser.add_argument(
        "--app-version",
        metavar="VERSION",
        help="the version to record (default: CFBundleShortVersionString of the inputs)",
    )
    parser.add_argument(
        "--build-number",
        metavar="BUILD",
        help="the build number to record (default: CFBundleVersion of the inputs)",
    )
    parser.add_argument(
        "--require-complete",
        action="store_true",
        help="exit 1 when an image an .xcarchive, .app, .ipa or build folder ships has no dSYM "
        "among the inputs or in the store (after publishing everything else)",
    )
    parser.add_argument(
        "--xcode",
        action="store_true",
        help="from an Xcode Run Script phase: the dSYM and app its build settings name; "
        "problems are the build's warnings, never its failure (unless --require-complete)",
    )
    store_choice.add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.system:
        _check_system_flags(args)
    if args.xcode:
        return _from_xcode(args)
    if not args.paths:
        raise DsymfindError("publish: name what to publish (PATH ...), or give --xcode")
    if args.system:
        return _run(args, args.paths, None)  # no app to check: Apple's images need no dSYM
    gate = completeness.Gate.of(args.paths, required=args.require_complete)
    # An .ipa is only checked: it holds no symbols to publish.
    return _run(args, [p for p in args.paths if not products.is_ipa(p)] or args.paths, gate)


def _from_xcode(args: argparse.Namespace) -> int:
    """`--xcode`: Xcode's build settings name the inputs. Exit 0 whatever happens, each
    problem a `warning:` line, unless --require-complete (then `error:` lines, exit 1)."""
    prefix = xcode.ERROR if args.require_complete else xcode.WARNING
    found = xcode.inputs(os.environ)
    for warning in found.warnings:
        print(f"{prefix}dsymfind: {warning}")
    checked = [*found.dsyms, *([found.product] if found.product else [])]
    gate = completeness.Gate.of(checked, required=args.require_complete, prefix=prefix)
    status = 1
    if found.dsyms:
        try:
            status = _run(args, [*args.paths, *found.dsyms], gate)
        except DsymfindError as exc:
            print(f"{prefix}dsymfind: {exc}")
    if status != 0:
        print(f"{prefix}dsymfind publish did not publish everything: see the lines above")
    return status if args.require_complete else 0


def _run(args: argparse.Namespace, paths: Sequence[str], gate: completeness.Gate | None) -> int:
    return publish(
        paths,
        to=args.to,
        layout_names=args.layouts,
        executables=args.executables,
        dry_run=args.dry_run,
        as_json=args.json,
        connection=store_choice.connection_flags(args.endpoint_url, args.region, args.profile),
        source_root=args.source_root,
        verbose=args.verbose,
        naming=_Naming(args.build_id, args.app_version, args.build_number),
        gate=gate,
        system=args.system,
    )


# What an app's build has and an OS build's libraries do not: the OS build names itself.
_NOT_FOR_SYSTEM = (
    ("xcode", "--xcode"),
    ("executables", "--executables"),
    ("source_root", "--source-root"),
    ("app_version", "--app-version"),
    ("build_number", "--build-number"),
    ("require_complete", "--require-complete"),
)


def _check_system_flags(args: argparse.Namespace) -> None:
    for name, flag in _NOT_FOR_SYSTEM:
        if getattr(args, name):
            raise DsymfindError(f"{flag} does not go with --system: an OS build names itself")


def publish(
    paths: Sequence[str],
    *,
    to: str,
    layout_names: Sequence[str],
    executables: bool,
    dry_run: bool,
    as_json: bool,
    connection: Mapping[str, str],
    source_root: str | None = None,
    verbose: bool = False,
    naming: _Naming | None = None,
    gate: completeness.Gate | None = None,
    system: bool = False,
) -> int:
    """Exit 0 when every object is published or already there with the same bytes. A line
    per file (its name, UUID and architecture, then what happened); `verbose` adds each
    object's key and the files skipped. Ctrl-C stops it with a line saying how far it got,
    exit status INTERRUPTED; nothing partial stays in the store (Writer.put)."""
    shown = _Shown.JSON if as_json else _Shown.KEYS if verbose else _Shown.FILES
    naming = naming or _Naming()
    naming.check()
    started: list[_Run] = []
    try:
        with _interrupted_once():
            destination = _destination(to, settings.load(os.environ), connection)
            if not layout_names and not destination.default_layout:
                raise DsymfindError(f"--to {to}: a template server; name the layouts with --layout")
            chosen = keys.checked_layouts(list(layout_names) or [destination.default_layout])
            run = _Run(destination.target, dry_run=dry_run, shown=shown)
            if system:
                found = _published_system(
                    paths, destination, chosen, run, started=started.append, naming=naming, store=to
                )
            else:
                run, found = _published(
                    paths,
                    destination,
                    chosen,
                    run,
                    executables=executables,
                    source_root=source_root,
                    started=started.append,
                    naming=naming,
                    store=to,
                )
    except KeyboardInterrupt:
        print(_interrupted(started[0] if started else None), file=sys.stderr)
        return INTERRUPTED
    if as_json:
        json.dump(run.records + _unpublished(found), sys.stdout, indent=2)
        print()
    else:
        print(_summary(run.outcomes, found, dry_run=dry_run))
    incomplete = gate is not None and gate.report(
        destination.target, chosen[0], destination.casing, to_stderr=as_json
    )
    bad = found.refused or any(r["state"] in _BAD_STATES for r in run.records)
    return 1 if bad or incomplete else 0


def _published(
    paths: Sequence[str],
    destination: Destination,
    layout_names: list[str],
    run: _Run,
    *,
    executables: bool,
    source_root: str | None,
    started: Callable[[_Run], None],
    naming: _Naming,
    store: str,
) -> tuple[_Run, Collected]:
    """The inputs found, verified and written, in a private work folder (thin slices,
    unpacked zips, plists) removed afterwards, then the build record; `started` is told of
    the run once its objects are planned."""
    with tempfile.TemporaryDirectory(prefix="dsymfind-publish-") as workdir:
        collector = _collector(workdir, destination, executables=executables)
        found = _collected(paths, collector, executables=executables)
        if run.shown == _Shown.KEYS:
            for where, why in found.skipped:
                print(f"skipped {where}: {why}")
        pieces = _with_sources(found.pieces, source_root)
        planned = keys.plan(pieces, layout_names, destination.casing)
        build_id = naming.build_id or builds.new_id()
        recording = _recording(destination.target, store, build_id, dry_run=run.dry_run)
        if recording is not None:
            recording.claim()
        try:
            if recording is not None:
                recording.begin(map(build_record.identity, pieces), (i.key for i in planned))
            started(run)
            run.all(planned, workdir)
            record = build_record.record(
                build_id,
                naming.applied(build_record.app_info(paths, pieces)),
                [os.path.abspath(p) for p in paths],
                _images(planned, run.records),
                run.records,
                _sources_of(pieces),
                os.environ,
            )
            if recording is not None:
                recording.settle(_keyed(planned), functools.partial(run.put_back, planned))
            run.record(record, recording)
        finally:
            if recording is not None:
                recording.close()
    return run, found


def _collector(workdir: str, destination: Destination, *, executables: bool) -> Collector:
    """The run's finder of inputs: its copies in `workdir`, the store itself never an input."""
    return Collector(
        workdir,
        executables=executables,
        max_unpacked_bytes=settings.load(os.environ)["max_download_bytes"],
        skip=destination.folder,
    )


def _published_system(
    paths: Sequence[str],
    destination: Destination,
    layout_names: list[str],
    run: _Run,
    *,
    started: Callable[[_Run], None],
    naming: _Naming,
    store: str,
) -> Collected:
    """`--system`: every image of every OS build under `paths`, verified and written as
    executables, then one build record per OS build (publish/system.py). Every OS build's
    ID is claimed and its intent written before the first object, as one run's are."""
    with tempfile.TemporaryDirectory(prefix="dsymfind-publish-") as workdir:
        collector = _collector(workdir, destination, executables=True)
        os_builds = system.collected([os.path.abspath(p) for p in paths], collector)
        found = _found(paths, collector.found, what="system image")
        if naming.build_id is not None and len(os_builds) > 1:
            raise DsymfindError(
                f"--build-id names one build; the paths hold {len(os_builds)} OS builds"
            )
        plans = [keys.plan(b.pieces, layout_names, destination.casing) for b in os_builds]
        recordings: list[recording_.Recording | None] = []
        try:
            for os_build, planned in zip(os_builds, plans, strict=True):
                build_id = naming.build_id or builds.new_id()
                recording = _recording(destination.target, store, build_id, dry_run=run.dry_run)
                recordings.append(recording)
                if recording is not None:
                    recording.claim()
                    recording.begin(
                        map(build_record.identity, os_build.pieces), (i.key for i in planned)
                    )
            started(run)
            run.all([item for planned in plans for item in planned], workdir)
            for os_build, planned, recording in zip(os_builds, plans, recordings, strict=True):
                keyed = {item.key for item in planned}
                record = build_record.system_record(
                    recording.build_id if recording is not None else builds.new_id(),
                    os_build.os_build,
                    _images(planned, run.records),
                    [r for r in run.records if r["key"] in keyed],
                    os.environ,
                )
                if recording is not None:
                    recording.settle(_keyed(planned), functools.partial(run.put_back, planned))
                    there = system.recorded_already(recording.manager, record)
                    if there is not None:
                        run.say(f"{os_build.os_build.label}: already recorded in {there}")
                        continue
                run.record(record, recording)
        finally:
            for recording in recordings:
                if recording is not None:
                    recording.close()
    return found


@dataclass(frozen=True)
class _Naming:
    """What the command line says of the build, over what the inputs say."""

    build_id: str | None = None
    version: str | None = None
    build: str | None = None

    def check(self) -> None:
        """DsymfindError for what no record may hold, before anything is written."""
        if self.build_id is not None:
            builds.check_id(self.build_id)
        for flag, value in (("--app-version", self.version), ("--build-number", self.build)):
            if value is not None and len(value) > builds.MAX_TEXT:
                raise DsymfindError(f"{flag}: longer than {builds.MAX_TEXT} characters")

    def applied(self, info: build_record.AppInfo) -> build_record.AppInfo:
        return info._replace(
            version=info.version if self.version is None else self.version,
            build=info.build if self.build is None else self.build,
        )


def _recording(
    target: Writer, store: str, build_id: str, *, dry_run: bool
) -> recording_.Recording | None:
    """The run's bookkeeping in the store; None for a dry run (it writes nothing) and a store
    that keeps no records."""
    if dry_run or not hasattr(target, "listed"):
        return None
    return recording_.Recording(cast("Manager", target), store, build_id)


def _images(planned: list[keys.Planned], records: list[dict[str, object]]) -> list[builds.Image]:
    """The record's images: each file whose every object is in the store (published, or
    there with the same bytes), under its first key, once."""
    states = {r["key"]: r for r in records}
    images: dict[tuple[str, str], builds.Image] = {}
    for piece, items in _by_piece(planned):
        done = [states.get(item.key) for item in items]
        if not all(r is not None and r["state"] in _IN_PLACE for r in done):
            continue
        main, first = items[0], done[0]
        assert first is not None
        size = first["size"]
        image = build_record.image_of(piece, main.key, size if isinstance(size, int) else 0)
        images.setdefault((image.uuid, image.key), image)
    return list(images.values())


# An object a record may name: in the store, or (a dry run) that would be.
_IN_PLACE = (PUBLISHED, EXISTS, WOULD_PUBLISH)


def _keyed(planned: list[keys.Planned]) -> list[tuple[str, str]]:
    """Every key of the run with the UUID (or store ID) of its file."""
    return [(item.key, build_record.identity(item.piece)) for item in planned]


def _collected(paths: Sequence[str], collector: Collector, *, executables: bool) -> Collected:
    """Every input found and verified; the refused ones said on stderr. Finding nothing to
    publish is an error: a CI step pointed at the wrong folder must fail."""
    for path in paths:
        collector.add(os.path.abspath(path))
    return _found(paths, collector.found, executables=executables)


def _found(
    paths: Sequence[str], found: Collected, *, executables: bool = True, what: str = ""
) -> Collected:
    """The refused inputs said on stderr; DsymfindError when nothing is left to publish."""
    for where, why in found.refused:
        print(f"dsymfind: refused {where}: {why}", file=sys.stderr)
    if not found.pieces:
        raise DsymfindError(_nothing_to_publish(paths, found, executables=executables, what=what))
    return found


@contextlib.contextmanager
def _interrupted_once() -> Iterator[None]:
    """The first Ctrl-C interrupts the run (KeyboardInterrupt); later ones are ignored, so
    that the cleanup it sets off (a temp file removed, a multipart upload aborted once its
    parts in flight are answered, the work folder removed) is never cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals: then Python's default stands
        return

    def first(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted(run: _Run | None) -> str:
    """What an interrupted run says: how many of its files it published, and how many it did
    not (files already there are neither)."""
    if run is None:
        return "interrupted before anything was published (nothing was written)"
    states = Counter(outcome.state for outcome in run.outcomes)
    left = run.files - run.finished + sum(states[s] for s in (WOULD_PUBLISH, CONFLICT, FAILED))
    return f"interrupted: {states[PUBLISHED]} published, {left} not (nothing partial was left)"


class _Shown(enum.Enum):
    FILES = "a line per file"
    KEYS = "a line per file, then one per object with its key"
    JSON = "nothing as it goes; the records at the end"


class _Run:
    """Writes the planned objects in order, a file's objects together, and says what became
    of each file (`outcomes`, a line each) and of each object (`records`, for --json and the
    build record)."""

    def __init__(self, target: Writer, *, dry_run: bool, shown: _Shown) -> None:
        self.target = target
        self.workdir = ""  # where plists are spilled, during `all`
        self.dry_run = dry_run
        self.shown = shown
        self.records: list[dict[str, object]] = []
        self.outcomes: list[Outcome] = []  # one per file
        self._spilled = 0
        self._written: dict[str, str] = {}  # key -> SHA-256 this run already handled
        # Pieces whose file failed: their plist and metadata would describe nothing.
        self._failed: set[int] = set()
        self._progress = Progress()
        self._meter = ByteMeter(self._progress, "publish", 0)
        self.files = 0  # in the plan
        self.finished = 0  # of those, every object handled
        self._sizes: dict[int, int] = {}  # each planned object's bytes, by id
        self._handled = 0  # the bytes of the objects handled so far

    def all(self, planned: list[keys.Planned], workdir: str) -> None:
        self.workdir = workdir
        by_piece = list(_by_piece(planned))
        self.files = len(by_piece)
        self._sizes = {id(item): _size_of(item) for item in planned}
        self._meter = ByteMeter(self._progress, "publish", sum(self._sizes.values()))
        try:
            for piece, items in by_piece:
                self._meter.doing = piece.label
                self._piece(piece, items)
        finally:
            self._progress.close()

    def _piece(self, piece: Piece, items: list[keys.Planned]) -> None:
        """A file's objects, then its line: its outcome over them all."""
        handled = [(item.key, outcome) for item in items if (outcome := self._one(item))]
        self.finished += 1
        if not handled:
            return  # every object was another input's, with the same bytes
        outcome = _overall([outcome for _, outcome in handled])
        self.outcomes.append(outcome)
        if self.shown != _Shown.JSON:
            self._progress.emit(f"{piece.label}: {_said(outcome)}", sys.stdout)
        if self.shown == _Shown.KEYS:
            for key, each in handled:
                self._progress.emit(f"  {each.state} {key}{_tail(each)}", sys.stdout)

    def _one(self, item: keys.Planned) -> Outcome | None:
        """The object handled, and its bytes counted as done whatever became of it."""
        outcome = self._object(item)
        self._handled += self._sizes[id(item)]
        self._meter.reach(self._handled)
        return outcome

    def _object(self, item: keys.Planned) -> Outcome | None:
        """The object written or checked, and recorded; None when there was nothing to do."""
        if item.path is None:
            if id(item.piece) in self._failed:
                return None
            body = self._open(self._spill(item), item.key, item.piece)
        else:
            body = self._open(item.path, item.key, item.piece, verify=True)
        if isinstance(body, Outcome):
            self._failed.add(id(item.piece))
            return body
        body.on_sent = self._meter.add
        with body:
            earlier = self._written.get(item.key)
            if earlier == body.sha256:
                return None  # the same bytes under the same key again (symstore and ssqp agree)
            if earlier is not None:
                outcome = Outcome(CONFLICT, "another input of this run has other bytes for it")
            else:
                self._written[item.key] = body.sha256
                outcome = self._write(item.key, body)
        if item.advisory and outcome.state == CONFLICT:
            outcome = Outcome(EXISTS, "other metadata there, kept")
        if outcome.state == FAILED:
            self._failed.add(id(item.piece))
        self.records.append(_record(item.key, outcome, item.piece, body.size, body.sha256))
        return outcome

    def _open(
        self, path: str, key: str, piece: Piece, *, verify: bool = False
    ) -> OpenedFile | Outcome:
        """The file open for checking, hashing and writing; else the failure (recorded) when
        it is no longer what was verified."""
        if verify:
            check, verified = functools.partial(still_matches, piece), piece.verified
        else:
            check, verified = None, None
        try:
            return OpenedFile(path, check, verified)
        except PublishError as exc:
            failed = Outcome(FAILED, str(exc))
            self.records.append(_record(key, failed, piece, 0, ""))
            return failed

    def _write(self, key: str, body: OpenedFile) -> Outcome:
        try:
            if self.dry_run:
                return self.target.check(key, body.sha256)
            return self.target.put(key, body)
        except WriterUnusable:
            raise
        except PublishError as exc:
            return Outcome(FAILED, str(exc))

    def say(self, line: str) -> None:
        """A line of the result (stdout), unless the result is --json."""
        if self.shown != _Shown.JSON:
            print(line)

    def record(self, record: builds.Record, recording: recording_.Recording | None) -> None:
        """The build record written last (said, for a dry run); none when no file is in the
        store whole, as a record must name only what is there."""
        if not record.images:
            return
        if recording is None:
            if self.dry_run and self.shown != _Shown.JSON:
                print(f"would write build record {record.key}")
            return
        key = recording.finish(record)
        if self.shown != _Shown.JSON:
            print(f"build record {key}")

    def put_back(self, planned: list[keys.Planned], key: str) -> None:
        """An object of this run that a retire deleted meanwhile, written again."""
        item = next(item for item in planned if item.key == key)
        path = self._spill(item) if item.path is None else item.path
        body = self._open(path, key, item.piece, verify=item.path is not None)
        if isinstance(body, Outcome):
            return
        with body:
            if self.target.check(key, body.sha256).state == WOULD_PUBLISH:
                self.target.put(key, body)

    def _spill(self, item: keys.Planned) -> str:
        """A plist's bytes as a file, so every target writes from a path."""
        assert item.data is not None
        self._spilled += 1
        path = os.path.join(self.workdir, f"plist-{self._spilled}")
        with open(path, "wb") as f:
            f.write(item.data)
        return path


def _size_of(item: keys.Planned) -> int:
    """The bytes of a planned object, as far as can be known before it is opened."""
    if item.data is not None:
        return len(item.data)
    try:
        return os.stat(item.path or "").st_size
    except OSError:
        return 0  # its turn will say why it cannot be read


def _by_piece(planned: list[keys.Planned]) -> Iterator[tuple[Piece, list[keys.Planned]]]:
    """The planned objects file by file (keys.plan keeps each file's together)."""
    for _, group in itertools.groupby(planned, key=lambda item: id(item.piece)):
        items = list(group)
        yield items[0].piece, items


# What a file's line says when its objects ended differently: the first of these.
_PRECEDENCE = (FAILED, CONFLICT, PUBLISHED, WOULD_PUBLISH, EXISTS)


def _overall(outcomes: list[Outcome]) -> Outcome:
    """A file's outcome: its worst object's (with why), else whether anything was written."""
    return min(outcomes, key=lambda outcome: _PRECEDENCE.index(outcome.state))


def _said(outcome: Outcome) -> str:
    return outcome.state + _tail(outcome)


def _tail(outcome: Outcome) -> str:
    return f": {outcome.message}" if outcome.message else ""


def _with_sources(pieces: list[Piece], source_root: str | None) -> list[Piece]:
    """Each DWARF file with where its build was made (vcs/provenance.py); an executable with
    its dSYM's record, since the unified layout's one `meta` serves both."""
    recorder = provenance.BuildSources(
        source_root, lambda text: print(f"dsymfind: warning: {text}", file=sys.stderr)
    )
    records = {
        piece.uuid: recorder.record_for(piece.path, piece.uuid)
        for piece in pieces
        if piece.kind == DWARF and piece.uuid is not None
    }
    return [replace(piece, source=records.get(piece.uuid or "")) for piece in pieces]


def _sources_of(pieces: list[Piece]) -> list[dict[str, object]]:
    """The build record's `sources`: each DWARF file's UUID with its record."""
    return [
        {"uuid": piece.uuid, **piece.source.as_dict()}
        for piece in pieces
        if piece.kind == DWARF and piece.source is not None
    ]


def _nothing_to_publish(
    paths: Sequence[str], found: Collected, *, executables: bool, what: str = ""
) -> str:
    """Why a run found no piece: a CI step pointed at the wrong folder must fail."""
    message = f"nothing to publish under {', '.join(paths)}"
    if what:
        return message + f" (no {what} that could be read)"
    if found.skipped:
        message += f" ({len(found.skipped)} files skipped, none a dSYM, PE or PDB file"
        message += ")" if executables else "; --executables publishes binaries)"
    return message


def _summary(outcomes: list[Outcome], found: Collected, *, dry_run: bool) -> str:
    """The last line of a run: how many files ended in each state (the lines above), how
    many were skipped and refused."""
    states = Counter(outcome.state for outcome in outcomes)
    written = WOULD_PUBLISH if dry_run else PUBLISHED
    counts = [
        (written, states[written]),
        (EXISTS, states[EXISTS]),
        ("skipped", len(found.skipped)),
        ("refused", len(found.refused)),
        ("conflicts", states[CONFLICT]),
    ]
    if states[FAILED]:
        counts.append((FAILED, states[FAILED]))
    return "summary: " + ", ".join(f"{count} {state}" for state, count in counts)


def _unpublished(found: Collected) -> list[dict[str, object]]:
    """Skipped and refused files as --json records: no key, the reason as the message."""
    return [
        {**_record(None, Outcome(state, why), None, None, None), "file": where}
        for state, files in (("skipped", found.skipped), ("refused", found.refused))
        for where, why in files
    ]


def _record(
    key: str | None, outcome: Outcome, piece: Piece | None, size: int | None, sha256: str | None
) -> dict[str, object]:
    """An object's --json record and build record entry: `file` is where it came from,
    `name`, `uuid` and `arch` what its line says (`uuid` and `arch` null for PE and PDB
    files)."""
    return {
        "key": key,
        "state": outcome.state,
        "file": "" if piece is None else piece.origin,
        "name": None if piece is None else piece.shown_name,
        "uuid": None if piece is None else piece.uuid,
        "arch": None if piece is None else piece.arch,
        "size": size,
        "sha256": sha256,
        "message": outcome.message,
    }


def _destination(to: str, current: settings.Settings, given: Mapping[str, str]) -> Destination:
    """`--to`: a configured server's name, a store's URL (s3://BUCKET/PREFIX, ...), or a
    folder (publish/store_choice.py)."""
    location = store_choice.locate(to, current, given, "--to")
    target = store_choice.open_writer(location)
    if location.server is not None:
        server = location.server
        # No default for a template server: checked_layouts names it unless --layout is given.
        layout = "" if server["layout"] == layouts.TEMPLATE else server["layout"]
        casing = server["casing"]
    else:
        kind = stores.kind_for(stores.scheme_of(location.url))
        layout, casing = kind.DEFAULT_LAYOUT or layouts.DEFAULT, "default"
    return Destination(target, layout, casing, folder=target.local_root)
