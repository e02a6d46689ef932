"""`dsymfind check [--repair]`: verify every cache entry, link and leftover; repair on request."""

from __future__ import annotations

import argparse
import os

from dsymfind import permissions, settings
from dsymfind.cache import check as cache_check
from dsymfind.local_lookup import Lookup
from dsymfind.paths import CachePaths

DETAILS = (
    "Exit status 0 when the cache is valid (leftovers of interrupted runs are harmless: "
    "the next run for the same UUID clears them), 1 while anything invalid remains."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repair", action="store_true", help="remove what is invalid and clear the leftovers"
    )


def run(args: argparse.Namespace) -> int:
    return check(repair=args.repair)


def check(*, repair: bool) -> int:
    """Exit 0 when the cache is valid (leftovers allowed), 1 while anything invalid remains."""
    current = settings.load(os.environ)
    cache = CachePaths(current["cache_dir"])
    # Folders another user owns or may write: what is in them may be theirs, and a repair
    # acting there could be redirected. Only the owner can fix that; nothing is judged.
    unsafe = unsafe_folders(cache.root)
    if unsafe:
        for what, fix in unsafe:
            print(f"invalid: {what}; fix: {fix}")
        return 1
    if repair:
        permissions.secure_umask()  # what a repair makes (tree folders) is private too
    from dsymfind.symbolicate.symcaches import TABLES

    checker = cache_check.Checker(
        cache,
        stale_after=2 * current["download_timeout"],
        repair=repair,
        origins=Lookup(current).origins(),
        symcaches=TABLES,
    )
    report = checker.run()
    for finding in report.findings:
        print(
            f"{'repaired ' if finding.repaired else ''}{finding.kind}: {finding.path}: "
            f"{finding.reason}"
        )
    repaired = sum(1 for f in report.findings if f.repaired)
    print(
        f"{cache.root}: {report.entries} entries, {report.links} links checked; "
        f"{report.count(cache_check.INVALID)} invalid, "
        f"{report.count(cache_check.LEFTOVER)} leftover"
        + (f" ({repaired} repaired)" if repaired else "")
    )
    remaining = [f for f in report.findings if f.kind == cache_check.INVALID and not f.repaired]
    return 1 if remaining else 0


def unsafe_folders(root: str) -> list[tuple[str, str]]:
    """The cache's folders others own or may write, with fixes: the root and the folders above
    it first, then any inside (symlinks in the place of its folders are check's to repair)."""
    problem = permissions.unsafe(root)
    if problem is not None:
        return [problem]
    return [found for _, found, is_link in permissions.folder_problems(root) if not is_link]
