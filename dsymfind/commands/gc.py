"""`dsymfind gc`: evict least-recently-used downloads and remove dangling cache links."""

from __future__ import annotations

import argparse
import os
import time

from dsymfind import permissions, settings
from dsymfind.cache.gc import Collector, Result
from dsymfind.config_reader import parse_duration, parse_size
from dsymfind.paths import CachePaths
from dsymfind.progress import human_size

DETAILS = (
    "Entries being downloaded or in use are skipped; nothing the cache did not create "
    "is touched. Defaults come from max_cache_size and max_unused_age in the config."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-size",
        metavar="SIZE",
        help="keep the cache under SIZE, e.g. 20GiB; 0 evicts every download not in use",
    )
    parser.add_argument(
        "--max-age", metavar="DURATION", help="evict what was unused this long (30d)"
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")


def run(args: argparse.Namespace) -> int:
    return gc(max_size=args.max_size, max_age=args.max_age, dry_run=args.dry_run)


def gc(*, max_size: str | None, max_age: str | None, dry_run: bool) -> int:
    current = settings.load(os.environ)
    size_limit = (
        current["max_cache_size"]
        if max_size is None
        else parse_size("--max-size", max_size, zero=True)  # 0: evict every download
    )
    age_limit = (
        current["max_unused_age"] if max_age is None else parse_duration("--max-age", max_age)
    )
    if not dry_run or os.path.lexists(current["cache_dir"]):
        permissions.secure_cache(current["cache_dir"])  # a dry run creates nothing
    from dsymfind.symbolicate.symcaches import current_version

    collector = Collector(
        CachePaths(current["cache_dir"]),
        max_size=size_limit,
        max_age=age_limit,
        dry_run=dry_run,
        symcache_version=current_version(),
    )
    result = collector.run()
    _print_result(result, dry_run)
    evicted = [entry.path for entry, _ in result.removed]
    _collect_worktrees(CachePaths(current["cache_dir"]), dry_run, evicted)
    _sweep_negative_cache(CachePaths(current["cache_dir"]), current, dry_run)
    return 0


def _sweep_negative_cache(cache: CachePaths, current: settings.Settings, dry_run: bool) -> None:
    """Negative entries nobody reads any more: expired, or an earlier version's."""
    from dsymfind.cache import negative

    swept = negative.sweep(cache, current["negative_cache_ttl"], time.time(), dry_run=dry_run)
    if swept:
        verb = "would remove" if dry_run else "removed"
        print(f"{verb} {len(swept)} negative-cache entries: expired, or of an earlier version")


def _collect_worktrees(cache: CachePaths, dry_run: bool, evicted: list[str]) -> None:
    """After the entries: the worktrees of evicted dSYMs go in the same run (in a dry run,
    those the evicted entries would no longer name), then the cache's clones they were
    made from."""
    from dsymfind.vcs import checkouts

    collected = checkouts.collect(cache, dry_run=dry_run, leaving=evicted)
    clones = checkouts.collect_clones(cache, dry_run=dry_run, removing=collected.removed)
    verb = "would remove" if dry_run else "removed"
    for what, done in (("worktree", collected), ("clone", clones)):
        for folder in done.removed:
            print(f"{verb} {what} {folder}")
        for folder, why in done.kept:
            print(f"kept {what} {folder}: {why}")


def _print_result(result: Result, dry_run: bool) -> None:
    verb = "would remove" if dry_run else "removed"
    for entry, reason in result.removed:
        print(f"{verb} {entry.path} ({human_size(entry.size)}, {reason})")
    for entry in result.busy:
        print(f"kept {entry.path}: in use or being downloaded")
    for link in result.dangling:
        print(f"{verb} dangling link {link}")
    for link in result.stale_links:
        print(f"{verb} stale link {link}: its file no longer carries that UUID")
    for record in result.records:
        print(f"{verb} stale download record {record}")
    for partial in result.partials:
        print(f"{verb} stale partial download {partial}")
    for table in result.symcaches:
        print(f"{verb} SymCache {table}: rebuilt from its dSYM when next needed")
    for record in result.systems:
        print(f"{verb} system image record {record}: its file is gone")
    print(
        f"{verb.capitalize()} {len(result.removed)} entries ({human_size(result.freed)}), "
        f"{len(result.dangling) + len(result.stale_links)} dangling or stale links, "
        f"{len(result.records)} stale records, {len(result.partials)} stale partial downloads, "
        f"{len(result.symcaches)} SymCaches, {len(result.systems)} system image records"
    )
