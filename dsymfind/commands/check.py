"""`dsymfind check [--repair]`: verify every cache entry, link and leftover; repair on request."""

from __future__ import annotations

import os

from dsymfind import permissions, settings
from dsymfind.cache_layout import CacheLayout
from dsymfind.store import check as cache_check


def check(*, repair: bool) -> int:
    """Exit 0 when the cache is valid (leftovers allowed), 1 while anything invalid remains."""
    current = settings.load(os.environ)
    layout = CacheLayout(current["cache_dir"])
    problem = permissions.unsafe_reason(layout.root)
    if problem:
        print(f"invalid: {problem}; fix: chmod 700 {layout.root}")
        return 1
    checker = cache_check.Checker(
        layout, stale_after=2 * current["download_timeout"], repair=repair
    )
    report = checker.run()
    for finding in report.findings:
        print(
            f"{'repaired ' if finding.repaired else ''}{finding.kind}: {finding.path}: "
            f"{finding.reason}"
        )
    repaired = sum(1 for f in report.findings if f.repaired)
    print(
        f"{layout.root}: {report.entries} entries, {report.links} links checked; "
        f"{report.count(cache_check.INVALID)} invalid, "
        f"{report.count(cache_check.LEFTOVER)} leftover"
        + (f" ({repaired} repaired)" if repaired else "")
    )
    remaining = [f for f in report.findings if f.kind == cache_check.INVALID and not f.repaired]
    return 1 if remaining else 0
