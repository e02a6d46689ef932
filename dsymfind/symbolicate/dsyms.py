"""Which dSYM each image's UUID has, through the helper's own machinery.

Local trees, search paths and the cache first (local_lookup.py); then, for what is
missing, the configured servers (all of them, S3 included) through fetch/batch.py: the
downloader's own code, with its verification and locks, each UUID once for the whole
batch, several at a time. Run on purpose, it asks again about UUIDs the negative cache
holds (a crash report often arrives before its build's publish); `ignore_negative_cache`
asks servers in backoff too. `offline` asks no server, and Apple's system images are
never fetched (their symbols come from Apple, not the team's servers).
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

from dsymfind import debugsymbols
from dsymfind.errors import DsymfindError
from dsymfind.fetch import verdicts
from dsymfind.local_lookup import Lookup

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from dsymfind.fetch import batch
    from dsymfind.settings import Settings


class Found(NamedTuple):
    dwarf: str | None  # the DWARF file (DBGDSYMPath); None when there is none
    reason: str  # why there is none ("" when found)
    refused: tuple[str, ...] = ()  # the servers that refused our credentials for it
    # Why there is none, in one word of fetch/verdicts.py ("" when found).
    verdict: str = ""


def locate(
    wanted: Mapping[str, bool],
    current: Settings,
    *,
    offline: bool,
    ignore_negative_cache: bool = False,
) -> dict[str, Found]:
    """For each UUID (mapped to whether it is an Apple system image), its dSYM."""
    lookup = Lookup(current)
    found = {uuid: _local(lookup, uuid) for uuid in wanted}
    fetched = [u for u, apple in wanted.items() if not (found[u].dwarf or apple or offline)]
    if fetched:
        # The downloads' code (and its filelock) costs a tenth of a second to import: a
        # report whose dSYMs are all here has no need of it.
        from dsymfind.fetch import batch

        results = batch.fetch_all(
            fetched,
            current,
            os.environ,
            ignore_negative_cache=ignore_negative_cache,
            progress=batch.live_progress(sys.stderr),
        )
        found.update({r.uuid: _fetched(r) for r in results})
    return found


def _fetched(result: batch.Result) -> Found:
    from dsymfind.fetch import batch  # loaded already: locate's batch ran

    if result.path:
        return Found(result.path, "")
    if result.refused:
        verdict = verdicts.REFUSED
    elif result.state == batch.FAILED and result.message != batch.NO_SERVER:
        verdict = verdicts.UNREACHABLE
    else:
        verdict = verdicts.ABSENT
    return Found(None, result.message, result.refused, verdict)


def _local(lookup: Lookup, uuid: str) -> Found:
    try:
        answer = lookup.find(uuid)
    except DsymfindError as exc:
        return Found(None, str(exc), verdict=verdicts.ABSENT)
    if answer is None:
        return Found(None, "not on this machine", verdict=verdicts.ABSENT)
    return Found(answer[debugsymbols.DSYM_PATH], "")
