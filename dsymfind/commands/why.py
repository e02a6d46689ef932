"""`dsymfind why UUID|REPORT...`: why an image has no dSYM here, with the evidence store by
store (docs/why.md).

Each store is asked for the UUID's dSYM as a fetch asks it, downloading nothing
(fetch/diagnosis.py); the build records of the stores that keep them (stores/builds.py)
tell a report from a build that was never published (`other-build`) and a dSYM of another
architecture (`wrong-slice`) from an image nobody published (`absent`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from dsymfind import debugsymbols, settings, stores
from dsymfind.apple import crashreport
from dsymfind.errors import DsymfindError
from dsymfind.fetch import diagnosis
from dsymfind.fetch.diagnosis import Answer
from dsymfind.fetch.verdicts import (
    ABSENT,
    DEBUG_DYLIB_SUFFIX,
    FOUND,
    OTHER_BUILD,
    REFUSED,
    STUB,
    UNREACHABLE,
    WRONG_SLICE,
)
from dsymfind.local_lookup import Lookup
from dsymfind.publish import store_choice
from dsymfind.stores import builds, layouts
from dsymfind.stores.base import Server
from dsymfind.stores.writers import Manager
from dsymfind.symbolicate import formats
from dsymfind.symbolicate.model import Report, needed_images
from dsymfind.uuids import dashed, normalize_uuid, uuid_hex

# Where a dSYM found on this machine is, in the evidence's store column.
THIS_MACHINE = "this machine"
# The evidence line that says the negative cache holds the UUID (the stores were asked).
NEGATIVE_CACHE = "negative cache"
# Build records read per store, newest first: a record is one GET, and a report's image
# comes from a recent build; older ones are not worth a minute of requests.
MAX_RECORDS = 500
UNKNOWN_NAME = "?"
NOTHING_BARE = "every image its frames need has its dSYM on this machine, or is Apple's"

DETAILS = (
    "For a report, its images that need a dSYM and have none on this machine. Verdicts: "
    "found, absent, refused, unreachable, other-build, wrong-slice, stub (docs/why.md). "
    "Nothing is downloaded, and neither the negative cache nor backoff is read as an "
    "answer or written. Exit status 0 when every image's dSYM was found (or it is a stub, "
    "which needs none), 1 otherwise or when an input could not be read."
)


class Image(NamedTuple):
    uuid: str  # dashed, upper case
    name: str  # UNKNOWN_NAME when neither the input nor a record names it
    arch: str  # "" when unknown
    stub: bool = False
    from_report: bool = False  # a report's image (else a UUID given, or a binary's slice)


class Verdict(NamedTuple):
    image: Image
    verdict: str
    explanation: str
    stores: list[Answer]

    def as_json(self) -> dict[str, object]:
        return {
            "uuid": self.image.uuid,
            "name": self.image.name,
            "arch": self.image.arch or None,
            "verdict": self.verdict,
            "explanation": self.explanation,
            "stores": [answer._asdict() for answer in self.stores],
        }

    def lines(self) -> list[str]:
        head = f"{self.image.uuid} {self.image.name}: {self.verdict} — {self.explanation}"
        return [head] + [f"    {a.store}: {a.verdict}: {a.detail}" for a in self.stores]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="UUID|REPORT|FILE",
        help="a UUID, a crash report, or a Mach-O file (each slice's UUID)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable results")
    store_choice.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    current = settings.load(os.environ)
    given = store_choice.connection_flags(args.endpoint_url, args.region, args.profile)
    lookup = Lookup(current)
    images, bad = _images(args.inputs, lookup)
    servers = _servers(args.store, current, given)
    records = _records(args.store, given, current) if images else _Records([], [])
    verdicts = _verdicts(images, servers, records, current, lookup)
    if args.json:
        json.dump([v.as_json() for v in verdicts], sys.stdout, indent=2)
        print()
    else:
        for verdict in verdicts:
            print("\n".join(verdict.lines()))
    everything_found = all(v.verdict in (FOUND, STUB) for v in verdicts)
    return 0 if everything_found and not bad else 1


def _images(inputs: Sequence[str], lookup: Lookup) -> tuple[list[Image], int]:
    """The images asked about, each once, and how many inputs could not be read (each
    said on stderr)."""
    images: dict[str, Image] = {}
    bad = 0
    for text in inputs:
        try:
            found = _images_of(text, lookup)
        except DsymfindError as exc:
            print(f"dsymfind: error: {exc}", file=sys.stderr)
            bad += 1
            continue
        if not found:
            print(f"dsymfind: {text}: no image left bare: {NOTHING_BARE}", file=sys.stderr)
        for image in found:
            images.setdefault(image.uuid, image)
    return list(images.values()), bad


def _images_of(text: str, lookup: Lookup) -> list[Image]:
    uuid = normalize_uuid(text)
    if uuid is not None:
        return [Image(uuid, UNKNOWN_NAME, "")]
    if not os.path.exists(text):
        raise DsymfindError(f"{text}: neither a UUID nor a file")
    binary = _slices_of(text)
    if binary:
        return binary
    try:
        report = formats.parse(crashreport.read_text(text))
    except crashreport.CrashReportError as exc:
        raise DsymfindError(str(exc) if str(exc).startswith(text) else f"{text}: {exc}") from None
    return _bare(report, lookup)


def _slices_of(path: str) -> list[Image]:
    """Each slice of a Mach-O file (an app's executable, a framework's binary) with a UUID;
    nothing when it is not one (a report, then)."""
    from dsymfind.apple import macho, products

    try:
        slices = macho.read_slices(path)
    except (macho.MachOError, OSError):
        return []
    name = os.path.basename(path)
    return [
        Image(piece.uuid, name, piece.arch, products.is_debug_dylib_stub(path, piece))
        for piece in slices
        if piece.uuid is not None and piece.filetype_name != "MH_DSYM"
    ]


def _bare(report: Report, lookup: Lookup) -> list[Image]:
    """The report's images symbolicate would look for and not find on this machine: those
    its unnamed frames point into, outside Apple's, with a UUID."""
    names = {image.name for image in report.images}
    bare = []
    for image in needed_images(report).values():
        if image.uuid is None or image.apple or _found_here(lookup, image.uuid) is not None:
            continue
        stub = image.name + DEBUG_DYLIB_SUFFIX in names
        bare.append(Image(image.uuid, image.name, image.arch or report.arch, stub, True))
    return bare


def _found_here(lookup: Lookup, uuid: str) -> str | None:
    """The dSYM's DWARF file on this machine (cache, tree, search paths), if any."""
    try:
        answer = lookup.find(uuid)
    except DsymfindError:
        return None
    return None if answer is None else answer[debugsymbols.DSYM_PATH]


def _servers(store: str | None, current: settings.Settings, given: dict[str, str]) -> list[Server]:
    """The stores to ask: every configured server, or the one `--store` names."""
    if store is None:
        return list(current["servers"])
    location = store_choice.locate(store, current, given)
    if location.server is not None:
        server = location.server.copy()
        server["settings"] = location.settings
        return [server]
    scheme = stores.scheme_of(location.url)
    return [
        Server(
            name=location.name,
            url=location.url,
            kind=scheme,
            # "": asked under every layout publish writes (fetch/diagnosis.py).
            layout=stores.kind_for(scheme).DEFAULT_LAYOUT or "",
            casing=layouts.CASINGS[0],
            headers={},
            template="",
            allow_scripts=False,
            settings=location.settings,
        )
    ]


class _Records(NamedTuple):
    """The build records read, each with its store's name, and why a store's could not be."""

    found: list[tuple[str, builds.Record]]
    problems: list[Answer]


def _records(store: str | None, given: dict[str, str], current: settings.Settings) -> _Records:
    try:
        managers = store_choice.open_store(store, given, current=current)
    except DsymfindError as exc:  # a store that cannot be listed (HTTP) keeps no records
        return _Records([], [Answer(store or "", ABSENT, f"no build records read: {exc}")])
    found: list[tuple[str, builds.Record]] = []
    problems = []
    for name, manager in managers:
        try:
            found += [(name, record) for record in _read_records(manager)]
        except (DsymfindError, OSError) as exc:
            problems.append(Answer(name, UNREACHABLE, f"its build records: {exc}"))
    return _Records(found, problems)


def _read_records(manager: Manager) -> Iterable[builds.Record]:
    summaries, _ = builds.list_summaries(manager)
    for summary in summaries[:MAX_RECORDS]:
        try:
            record = builds.read_record(manager, summary.key)
        except builds.BadRecord:
            continue  # `dsymfind builds` names it
        if record is not None:
            yield record


def _verdicts(
    images: list[Image],
    servers: list[Server],
    records: _Records,
    current: settings.Settings,
    lookup: Lookup,
) -> list[Verdict]:
    """Each image's verdict: a stub needs no dSYM, one on this machine is found; the stores
    are asked about the others all at once."""
    images = [_named(image, records) for image in images]
    here = {image.uuid: _found_here(lookup, image.uuid) for image in images if not image.stub}
    unknown = [uuid for uuid, path in here.items() if path is None]
    answers = diagnosis.ask_all(servers, unknown, os.environ, current)
    verdicts = []
    for image in images:
        path = here.get(image.uuid)
        if image.stub:
            verdicts.append(Verdict(image, STUB, _stub_text(image), []))
        elif path is not None:
            verdicts.append(Verdict(image, FOUND, f"on {THIS_MACHINE}: {path}", []))
        else:
            note = diagnosis.negative_note(image.uuid, current)
            said = ([Answer(NEGATIVE_CACHE, ABSENT, note)] if note else []) + answers[image.uuid]
            verdicts.append(_rolled_up(image, said, records))
    return verdicts


def _named(image: Image, records: _Records) -> Image:
    """The image with the name and arch a record gives its UUID, when the input gave none."""
    if image.name != UNKNOWN_NAME:
        return image
    wanted = uuid_hex(image.uuid)
    for _, record in records.found:
        for published in record.images:
            if published.uuid == wanted:
                return image._replace(name=published.name, arch=image.arch or published.arch)
    return image


def _stub_text(image: Image) -> str:
    return (
        "a stub executable (Xcode's ENABLE_DEBUG_DYLIB): it needs no dSYM; its code is in "
        f"{image.name}{DEBUG_DYLIB_SUFFIX}, whose dSYM does"
    )


def _rolled_up(image: Image, evidence: list[Answer], records: _Records) -> Verdict:
    """The image's verdict: found anywhere wins; then a store that could not say (it may
    hold it); then what the build records explain; else absent."""
    for verdict in (FOUND, REFUSED, UNREACHABLE):
        said = [answer for answer in evidence if answer.verdict == verdict]
        if said:
            return Verdict(image, verdict, _summary(verdict, said), evidence)
    asked = [a.store for a in evidence if a.verdict == ABSENT and a.store != NEGATIVE_CACHE]
    explained = _explained(image, records)
    evidence = evidence + records.problems + explained
    if explained:
        return Verdict(image, explained[0].verdict, explained[0].detail, evidence)
    return Verdict(image, ABSENT, _absent_text(image, asked), evidence)


def _summary(verdict: str, said: list[Answer]) -> str:
    names = ", ".join(answer.store for answer in said)
    if verdict == FOUND:
        return f"{said[0].store} has it at {said[0].detail}"
    if verdict == REFUSED:
        return f"{names} refused the credentials, so whether it has it is unknown"
    return f"{names} did not answer, so whether it has it is unknown"


def _absent_text(image: Image, asked: list[str]) -> str:
    if not asked:
        return "no store to ask (configure one, or name one with --store)"
    return (
        f"no store has it ({', '.join(asked)} asked), and no build record names "
        f"another {image.name}"
    )


def _explained(image: Image, records: _Records) -> list[Answer]:
    """What the records say: a build that published this very UUID (whose dSYM has since
    gone, or never arrived: `absent`, said first); else of images of the same name, the
    same image from another build (other-build), or a dSYM of another architecture only
    (wrong-slice)."""
    wanted = uuid_hex(image.uuid)
    naming: list[Answer] = []
    other_build: list[Answer] = []
    other_arch: list[Answer] = []
    for store, record in records.found:
        build = f"{record.version} ({record.build})"
        if record.kind == builds.SYSTEM:
            build = f"{record.app} {build}"
        for published in record.images:
            if published.uuid == wanted and record.kind == builds.SYSTEM:
                naming.append(Answer(store, ABSENT, _system_image(build, published)))
            elif published.uuid == wanted:
                text = f"build {build}'s record names it ({published.key}), but no store has it"
                naming.append(Answer(store, ABSENT, text))
            elif published.name != image.name:
                continue
            elif image.arch and published.arch and published.arch != image.arch:
                other_arch.append(Answer(store, WRONG_SLICE, _wrong_slice(image, build, published)))
            else:
                other_build.append(
                    Answer(store, OTHER_BUILD, _other_build(image, build, published))
                )
    return naming + other_build + other_arch


def _system_image(build: str, published: builds.Image) -> str:
    return (
        f"Apple's {published.install_path or published.name} of {build}: Apple ships no "
        f"dSYM for it; its symbol table names its frames, published at {published.key} "
        "(publish --system)"
    )


def _wrong_slice(image: Image, build: str, published: builds.Image) -> str:
    return (
        f"{image.name} in {build} has a dSYM for {published.arch} ({dashed(published.uuid)}); "
        f"this image is {image.arch}: the {image.arch} slice was not published"
    )


def _other_build(image: Image, build: str, published: builds.Image) -> str:
    whose = "this report's" if image.from_report else "this one"
    return (
        f"{image.name} in {build} is {dashed(published.uuid)}; {whose} is {image.uuid}: "
        f"the {'report' if image.from_report else 'image'} comes from a build that was never "
        "published"
    )
