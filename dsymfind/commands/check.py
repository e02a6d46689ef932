"""`dsymfind check [--repair]`: verify every cache entry, link and leftover; repair on request."""

from __future__ import annotations

import os

from dsymfind import integrity, paths, permissions, settings


def check(*, repair: bool) -> int:
    """Exit 0 when the cache is valid (leftovers allowed), 1 while anything invalid remains."""
    current = settings.load(os.environ)
    layout = paths.CacheLayout(current["cache_dir"])
    problem = permissions.unsafe_reason(layout.root)
    if problem:
        print(f"invalid: {problem}; fix: chmod 700 {layout.root}")
        return 1
    checker = integrity.Checker(layout, stale_after=2 * current["download_timeout"])
    report = checker.run()
    remaining = 0
    for finding in report.findings:
        done = repair and finding.repair is not None
        if done:
            assert finding.repair is not None
            finding.repair()
        elif finding.kind == integrity.INVALID:
            remaining += 1
        print(f"{'repaired ' if done else ''}{finding.kind}: {finding.path}: {finding.reason}")
    print(
        f"{layout.root}: {report.entries} entries, {report.links} links checked; "
        f"{report.count(integrity.INVALID)} invalid, {report.count(integrity.LEFTOVER)} leftover"
        + (" (repaired)" if repair and report.findings else "")
    )
    return 1 if remaining else 0
