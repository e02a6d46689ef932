"""Which dSYM each image's UUID has, through the helper's own machinery.

Local trees, search paths and the cache first (local_lookup.py); then, for what is
missing, the configured servers (all of them, S3 included) through fetch/batch.py: the
downloader's own code, with its verification and locks, each UUID once for the whole
batch, several at a time. Run on purpose, it asks again about UUIDs the negative cache
holds (a crash report often arrives before its build's publish); `ignore_negative_cache`
asks servers in backoff too. `offline` asks no server.

An image without a dSYM may still have its own file, whose symbol table names functions
(no files, no lines): an Apple library `dsymfind index` recorded from a DeviceSupport
folder (cache/systems.py), or one the downloader fetched alone from a store's executable
keys, where `publish --system` puts them (docs/system-symbols.md). Such a file is found as
the helper answers it, as its DBGSymbolRichExecutable, and marked `symbol_table`.
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
    from collections.abc import Collection

    from dsymfind.fetch import batch
    from dsymfind.settings import Settings


class Found(NamedTuple):
    dwarf: str | None  # the DWARF file (DBGDSYMPath); None when there is none
    reason: str  # why there is none ("" when found)
    refused: tuple[str, ...] = ()  # the servers that refused our credentials for it
    # Why there is none, in one word of fetch/verdicts.py ("" when found).
    verdict: str = ""
    # `dwarf` is the image's own file, no dSYM: its symbol table names the functions.
    symbol_table: bool = False


def locate(
    wanted: Collection[str],
    current: Settings,
    *,
    offline: bool,
    ignore_negative_cache: bool = False,
) -> dict[str, Found]:
    """For each UUID, its dSYM, else its image's file with a symbol table."""
    lookup = Lookup(current)
    found = {uuid: _local(lookup, uuid) for uuid in wanted}
    fetched = [] if offline else [uuid for uuid in wanted if not found[uuid].dwarf]
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
        return Found(result.path, "", symbol_table=result.symbol_table)
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
    dwarf = answer.get(debugsymbols.DSYM_PATH)
    if dwarf is not None:
        return Found(dwarf, "")
    return Found(answer[debugsymbols.SYMBOL_RICH_EXECUTABLE], "", symbol_table=True)
