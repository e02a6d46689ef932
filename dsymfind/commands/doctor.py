"""`dsymfind doctor`: what is wrong with this setup, and the fix for each problem."""

from __future__ import annotations

import os

from dsymfind import health


def doctor() -> int:
    """Exit 1 when anything failed; warnings alone leave it 0."""
    failed = False
    for finding in health.examine(os.environ):
        print(f"{finding.level:<5} {finding.subject}: {finding.text}", flush=True)
        if finding.fix and finding.level != health.OK:
            print(f"      fix: {finding.fix}")
        failed |= finding.level == health.FAIL
    return 1 if failed else 0
