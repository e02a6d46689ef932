"""`dsymfind gc`: evict least-recently-used downloads and remove dangling cache links."""

from __future__ import annotations

import os
import re
import time

from dsymfind import permissions, settings
from dsymfind.cache.gc import Collector, Result
from dsymfind.config_reader import parse_duration, parse_size
from dsymfind.errors import ConfigError
from dsymfind.paths import CachePaths
from dsymfind.progress import human_size


def gc(*, max_size: str | None, max_age: str | None, dry_run: bool) -> int:
    current = settings.load(os.environ)
    size_limit = current["max_cache_size"] if max_size is None else _size_limit(max_size)
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


# Zero, in any spelling parse_size reads: "0", "0.0", "0GiB".
_ZERO = re.compile(r"\s*0+(?:\.0+)?\s*([A-Za-z]*)\s*")


def _size_limit(text: str) -> int:
    """--max-size: a size, where 0 is the natural "evict every download".

    parse_size refuses 0 because in the config `max_cache_size = 0` means "no limit"; nobody
    types `--max-size 0` to mean that, so here it is taken at its word.
    """
    zero = _ZERO.fullmatch(text)
    if zero is not None and _is_size_unit(zero.group(1)):
        return 0
    return parse_size("--max-size", text)


def _is_size_unit(unit: str) -> bool:
    try:
        parse_size("--max-size", "1" + unit)
    except ConfigError:
        return False
    return True


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
    print(
        f"{verb.capitalize()} {len(result.removed)} entries ({human_size(result.freed)}), "
        f"{len(result.dangling) + len(result.stale_links)} dangling or stale links, "
        f"{len(result.records)} stale records, {len(result.partials)} stale partial downloads, "
        f"{len(result.symcaches)} SymCaches"
    )
