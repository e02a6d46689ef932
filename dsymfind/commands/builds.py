"""`dsymfind builds`: the builds a store holds, newest first, one build's images, the builds
that carry a UUID, and what retiring removed (docs/builds.md).

The list comes from the keys of the build records alone (one listing request per 1,000
builds on S3); `show` reads one record. Records are untrusted: one that cannot be read is
named on stderr and skipped."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence

from dsymfind import uuids
from dsymfind.errors import DsymfindError
from dsymfind.progress import human_size
from dsymfind.publish import store_choice
from dsymfind.stores import builds
from dsymfind.stores.writers import Manager

DETAILS = (
    "STORE is a configured server's name, a folder or an S3 location; without --store, "
    "every configured folder and S3 server. BUILD is a build ID, `VERSION (BUILD)`, a "
    "VERSION (its newest build) or a commit prefix of 7 or more hex digits."
)
# A commit prefix shorter than this names too many commits to be meant as one.
MIN_COMMIT_PREFIX = 7
_COMMIT_PREFIX = re.compile(r"[0-9a-fA-F]{7,40}")
_VERSION_AND_BUILD = re.compile(r"(.*) \((.*)\)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _options(parser, None)
    parser.add_argument(
        "--retired", action="store_true", help="what each retire removed, newest first"
    )
    parser.add_argument(
        "--kind",
        choices=builds.RECORD_KINDS,
        help="only builds of this kind: an app's, or an OS build's libraries (publish --system)",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    show = actions.add_parser("show", help="one build's images", description="One build's images.")
    show.add_argument("build", metavar="BUILD", help="an ID, `VERSION (BUILD)`, VERSION or commit")
    _options(show, argparse.SUPPRESS)
    find = actions.add_parser(
        "find", help="the builds that carry a UUID", description="The builds carrying a UUID."
    )
    find.add_argument("uuid", metavar="UUID", help="a UUID (any case, dashed or not)")
    _options(find, argparse.SUPPRESS)


def _options(parser: argparse.ArgumentParser, default: object) -> None:
    """--store, --json and the connection flags, on the list and on each action (where they
    keep what was given before the action's name)."""
    store_choice.add_arguments(parser, default=default)
    parser.add_argument(
        "--json", action="store_true", default=default, help="machine-readable output"
    )


def run(args: argparse.Namespace) -> int:
    given = store_choice.connection_flags(args.endpoint_url, args.region, args.profile)
    chosen = store_choice.open_store(args.store, given)
    if not chosen:
        raise DsymfindError("no store to list: name one with --store (a folder or S3 store)")
    if args.action == "show":
        return show(chosen, args.build, as_json=args.json)
    if args.action == "find":
        return find(chosen, args.uuid, as_json=args.json)
    if args.retired:
        return retired(chosen, as_json=args.json)
    return listing(chosen, as_json=args.json, kind=args.kind)


Chosen = Sequence[tuple[str, Manager]]


def listing(chosen: Chosen, *, as_json: bool, kind: str | None = None) -> int:
    """Every store's builds (of `kind`, when given), newest first; exit 0."""
    found = [
        (name, summary)
        for name, summaries in _summaries(chosen)
        for summary in summaries
        if kind is None or summary.kind == kind
    ]
    if as_json:
        _dump([{"store": name, **_summary_json(summary)} for name, summary in found])
        return 0
    _table(found, len(chosen) > 1)
    return 0


def show(chosen: Chosen, build: str, *, as_json: bool) -> int:
    name, summary = the_build(chosen, build)
    manager = dict(chosen)[name]
    record = builds.read_record(manager, summary.key)
    if record is None:
        raise DsymfindError(f"build {summary.id} in {name}: its record is gone (retired?)")
    if as_json:
        _dump(json.loads(builds.encode_record(record)))
        return 0
    for line in _described(record):
        print(line)
    return 0


def find(chosen: Chosen, uuid: str, *, as_json: bool) -> int:
    """The builds carrying `uuid`, newest first; exit 1 when none does."""
    wanted = _hex(uuid)
    found: list[tuple[str, builds.Summary]] = []
    for name, manager in chosen:
        ids = set(builds.builds_naming(manager, wanted))
        if ids:
            summaries, _ = builds.list_summaries(manager)
            found += [(name, s) for s in summaries if s.id in ids]
    if as_json:
        _dump([{"store": name, **_summary_json(summary)} for name, summary in found])
    elif found:
        _table(found, len(chosen) > 1, with_id=True)
    if not found:
        stores = ", ".join(name for name, _ in chosen)
        print(f"dsymfind: no build in {stores} carries {uuid}", file=sys.stderr)
        return 1
    return 0


def retired(chosen: Chosen, *, as_json: bool) -> int:
    """Every store's retire transactions, newest first; exit 0."""
    found = []
    for name, manager in chosen:
        transactions, skipped = builds.list_transactions(manager)
        _warn(name, skipped)
        found += [(name, transaction) for transaction in transactions]
    if as_json:
        _dump([{"store": name, **_transaction_json(t)} for name, t in found])
        return 0
    for name, transaction in found:
        prefix = f"{name}: " if len(chosen) > 1 else ""
        gone = ", ".join(_named(b.version, b.build, b.app) for b in transaction.builds)
        size = human_size(transaction.bytes)
        print(
            f"{prefix}{_when(transaction.when)}  {transaction.who}  "
            f"{len(transaction.builds)} builds, {transaction.objects} objects, {size}"
            + (" (dry run)" if transaction.dry_run else "")
            + (f": {gone}" if gone else "")
        )
    return 0


def _summaries(chosen: Chosen) -> list[tuple[str, list[builds.Summary]]]:
    found = []
    for name, manager in chosen:
        summaries, skipped = builds.list_summaries(manager)
        _warn(name, skipped)
        found.append((name, summaries))
    return found


def _warn(store: str, skipped: list[tuple[str, str]]) -> None:
    for _, why in skipped:
        print(f"dsymfind: warning: {store}: skipped {why}", file=sys.stderr)


def the_build(chosen: Chosen, build: str) -> tuple[str, builds.Summary]:
    """The build `build` names among every store's; DsymfindError when none or several."""
    every = [(name, s) for name, summaries in _summaries(chosen) for s in summaries]
    for matches in (_by_id, _by_version_and_build, _by_version, _by_commit):
        found = [(name, s) for name, s in every if matches(build, s)]
        if found:
            return _newest_of_one(build, found)
    stores = ", ".join(name for name, _ in chosen)
    raise DsymfindError(f"no build {build!r} in {stores}")


def _by_id(build: str, summary: builds.Summary) -> bool:
    return summary.id == build


def _by_version_and_build(build: str, summary: builds.Summary) -> bool:
    both = _VERSION_AND_BUILD.fullmatch(build)
    return both is not None and (summary.version, summary.build) == both.groups()


def _by_version(build: str, summary: builds.Summary) -> bool:
    return summary.version == build


def _by_commit(build: str, summary: builds.Summary) -> bool:
    prefix = build.lower()
    return _COMMIT_PREFIX.fullmatch(build) is not None and summary.commit.startswith(prefix)


def _newest_of_one(
    build: str, found: list[tuple[str, builds.Summary]]
) -> tuple[str, builds.Summary]:
    """The newest match when they are one app's at one commit (the same build published
    again), else DsymfindError naming them."""
    if len({(name, s.app, s.commit) for name, s in found}) == 1 or len(found) == 1:
        return found[0]
    named = "; ".join(f"{s.id}: {_line(s)}" for _, s in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    raise DsymfindError(f"{build!r} matches several builds ({named}{more}); name one by its ID")


def _hex(text: str) -> str:
    """A UUID's 32 hex digits, or a PE's or PDB's store ID, upper-cased."""
    normalized = uuids.normalize_uuid(text)
    hex_digits = uuids.uuid_hex(normalized) if normalized else text.strip().upper()
    try:
        return builds.check_hex(hex_digits)
    except DsymfindError:
        raise DsymfindError(f"{text!r} is not a UUID") from None


def _table(
    found: list[tuple[str, builds.Summary]], by_store: bool, *, with_id: bool = False
) -> None:
    """A line per build, in aligned columns; the store first when there are several."""
    rows = [
        ((name,) if by_store else ()) + _columns(summary) + ((summary.id,) if with_id else ())
        for name, summary in found
    ]
    for line in _aligned(rows):
        print(line)


def _columns(summary: builds.Summary) -> tuple[str, ...]:
    """`VERSION (BUILD)`, app (or OS), kind, date, commit, `N images`, size."""
    images = f"{summary.images} image" + ("" if summary.images == 1 else "s")
    return (
        _named(summary.version, summary.build, ""),
        summary.app or "-",
        summary.kind,
        _date(summary.published_iso),
        summary.commit[:12] or "-",
        images,
        human_size(summary.bytes),
    )


def _line(summary: builds.Summary) -> str:
    return "  ".join(_columns(summary))


def _named(version: str, build: str, app: str) -> str:
    text = f"{version or '?'} ({build or '?'})"
    return f"{app} {text}" if app else text


def _date(iso: str) -> str:
    """`2026-12-02T13:26:13Z` as `2026-12-02 13:26 UTC`, without parsing: a listing says
    thousands."""
    return f"{iso[:10]} {iso[11:16]} UTC"


def _when(text: str) -> str:
    """A record's ISO time (any zone: it is untrusted) as `_date` says it."""
    return _date(builds.iso(builds.parse_time(text, "time")))


def _described(record: builds.Record) -> list[str]:
    head = [
        f"{_named(record.version, record.build, record.app)}  {record.bundle_id or '-'}",
        f"kind       {record.kind}",
        f"id         {record.id}",
        f"published  {_when(record.published_at)} on {record.host}",
        f"commit     {record.commit or '-'}" + (" (dirty)" if record.dirty else ""),
    ]
    if record.remote:
        head.append(f"remote     {record.remote}")
    if record.ci is not None:
        head.append(f"ci         {record.ci.system} {record.ci.run} {record.ci.url or ''}".rstrip())
    size = human_size(sum(image.size for image in record.images))
    head.append(f"images     {len(record.images)}, {size}")
    rows = [
        (image.name, image.uuid, image.arch or "-", image.kind, human_size(image.size), image.key)
        + ((image.install_path,) if record.kind == builds.SYSTEM else ())
        for image in record.images
    ]
    return head + _aligned(rows, "  ")


def _aligned(rows: Sequence[tuple[str, ...]], indent: str = "") -> list[str]:
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _summary_json(summary: builds.Summary) -> dict[str, object]:
    return {
        "id": summary.id,
        "kind": summary.kind,
        "app": summary.app,
        "version": summary.version,
        "build": summary.build,
        "published_at": summary.published_iso,
        "commit": summary.commit,
        "images": summary.images,
        "bytes": summary.bytes,
        "key": summary.key,
    }


def _transaction_json(transaction: builds.Transaction) -> dict[str, object]:
    return {**transaction._asdict(), "builds": [b._asdict() for b in transaction.builds]}


def _dump(value: object) -> None:
    json.dump(value, sys.stdout, indent=2)
    print()
