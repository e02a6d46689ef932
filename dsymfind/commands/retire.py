"""`dsymfind retire`: remove old builds from a store we publish to, and every object no
remaining build names, safely while CI keeps publishing (publish/retire.py)."""

from __future__ import annotations

import argparse

from dsymfind.commands.builds import the_build
from dsymfind.config_reader import parse_duration
from dsymfind.errors import DsymfindError
from dsymfind.progress import human_size
from dsymfind.publish import retire as retiring
from dsymfind.publish import store_choice

# A store refusing deletes refuses thousands alike: the first few say why.
FAILURES_SHOWN = 20

DETAILS = (
    "BUILD is an id, `VERSION (BUILD)`, a VERSION or a commit prefix, as `builds show` "
    "reads it. Records go first, then what no remaining build and no publish "
    "under way names; a transaction under _retired/ says who retired what "
    "(`dsymfind builds --retired`). See docs/retire.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("builds", nargs="*", metavar="BUILD", help="the builds to retire")
    store_choice.add_arguments(parser, required=True)
    parser.add_argument(
        "--older-than", metavar="DURATION", help="retire the builds published before (30d, 12h)"
    )
    parser.add_argument(
        "--keep-last", type=int, default=0, metavar="N", help="keep the newest N builds of each app"
    )
    parser.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="VERSION",
        help="keep every build of VERSION (repeatable)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would go (builds, objects, bytes)"
    )
    parser.add_argument(
        "--orphans",
        action="store_true",
        help="also remove objects no record names, older than --older-than",
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=retiring.DEFAULT_LEASE,
        metavar="SECONDS",
        help=f"how long publishers wait on this run at most (default {retiring.DEFAULT_LEASE:g})",
    )


def run(args: argparse.Namespace) -> int:
    if bool(args.builds) == (args.older_than is not None):
        raise DsymfindError("name the builds to retire, or give --older-than (not both)")
    if args.orphans and args.older_than is None:
        raise DsymfindError("--orphans needs --older-than: how old an unnamed object must be")
    if args.keep_last < 0 or args.lease <= 0:
        raise DsymfindError("--keep-last and --lease take a positive number")
    older = None if args.older_than is None else parse_duration("--older-than", args.older_than)
    given = store_choice.connection_flags(args.endpoint_url, args.region, args.profile)
    [(name, manager)] = store_choice.open_store(args.store, given)
    choice = retiring.Choice(
        names=[the_build([(name, manager)], build)[1].id for build in args.builds],
        older_than=older,
        keep_last=args.keep_last,
        keep_versions=args.keep,
    )
    outcome = retiring.retire(
        manager,
        choice,
        dry_run=args.dry_run,
        orphans_older_than=older if args.orphans else None,
        lease=args.lease,
    )
    _report(outcome, args.dry_run)
    return 1 if outcome.failures else 0


def _report(outcome: retiring.Outcome, dry_run: bool) -> None:
    plan = outcome.plan
    verb = "would retire" if dry_run else "retired"
    for build in plan.builds:
        print(f"{verb} {build.label}")
    if not plan.builds:
        print("no build to retire")
    kept = len(set(plan.keys) & plan.kept)
    removed = "would delete" if dry_run else "deleted"
    print(
        f"{removed} {len(plan.deleted)} objects ({human_size(plan.bytes)}); kept {kept} that "
        "another build or a publish under way names"
    )
    if outcome.orphans:
        size = human_size(sum(item.size for item in outcome.orphans))
        print(f"{removed} {len(outcome.orphans)} orphans ({size}): objects no record names")
    for key, why in outcome.failures[:FAILURES_SHOWN]:
        print(f"could not delete {key}: {why}")
    if len(outcome.failures) > FAILURES_SHOWN:
        print(f"... and {len(outcome.failures) - FAILURES_SHOWN} more could not be deleted")
    if outcome.transaction:
        print(f"transaction {outcome.transaction}")
