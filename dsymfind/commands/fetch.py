"""`dsymfind fetch`: fetch dSYMs by UUID in the foreground, with a progress line each."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from dsymfind import settings
from dsymfind.errors import DsymfindError
from dsymfind.fetch import batch
from dsymfind.progress import Progress
from dsymfind.uuids import normalize_uuid


def fetch(uuids: Sequence[str], *, ignore_negative_cache: bool, as_json: bool) -> int:
    """Exit 0 when every UUID is on this machine afterwards, 1 otherwise."""
    wanted = normalized(uuids)
    current = settings.load(os.environ)
    # The result lines are the output; with --json they give way to the JSON on stdout.
    progress = batch.live_progress(sys.stderr) if as_json else Progress(sys.stdout)
    results = batch.fetch_all(
        wanted, current, os.environ, ignore_negative_cache=ignore_negative_cache, progress=progress
    )
    if as_json:
        json.dump([result.as_json() for result in results], sys.stdout, indent=2)
        print()
    return 0 if all(result.state == batch.FOUND for result in results) else 1


def normalized(uuids: Sequence[str]) -> list[str]:
    """Every UUID in its normal form; the first that is not a UUID stops everything."""
    wanted = []
    for text in uuids:
        uuid = normalize_uuid(text)
        if uuid is None:
            raise DsymfindError(f"not a UUID: {text!r}")
        wanted.append(uuid)
    return wanted
