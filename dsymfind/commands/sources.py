"""`dsymfind sources UUID`: the source mapping of a cached dSYM, or why it has none.

A dSYM the cache holds without its mapping although its store recorded the build's commit
(`source_checkouts` configured after it was fetched, a failed or removed checkout) gets
its checkout now, as its download would have made it."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from dsymfind import debugsymbols, settings
from dsymfind.apple import bundle
from dsymfind.commands.fetch import normalized
from dsymfind.errors import DsymfindError
from dsymfind.local_lookup import Lookup
from dsymfind.paths import CachePaths
from dsymfind.vcs import checkouts, git, provenance
from dsymfind.vcs.provenance import SourceRecord

if TYPE_CHECKING:
    from dsymfind.debugsymbols import Answer


DETAILS = "Exit status 0 with a mapping, 1 without."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("uuid", metavar="UUID")


def run(args: argparse.Namespace) -> int:
    return sources(args.uuid)


def sources(uuid_text: str) -> int:
    """Exit 0 with a mapping, 1 without (and why)."""
    (uuid,) = normalized([uuid_text])
    current = settings.load(os.environ)
    answer = _cached(current, uuid)
    said = None
    if not _mapped(answer):
        from dsymfind.fetch import backoff
        from dsymfind.fetch.downloader import Download

        on_purpose = backoff.asking(on_purpose=True, ignore=False)
        said = Download(uuid, os.environ, on_purpose).map_cached_sources()
        answer = _cached(current, uuid)
    bundle_dir = bundle.bundle_of(answer[debugsymbols.DSYM_PATH])
    values = {} if bundle_dir is None else _uuid_plist(bundle_dir, uuid)
    record = provenance.checked(values.get(debugsymbols.SOURCE_CONTROL))
    build, local = answer.get(debugsymbols.BUILD_SOURCE_PATH), answer.get(debugsymbols.SOURCE_PATH)
    if build is None or local is None:
        print(f"no source mapping for {uuid}: {said or _why_none(record, values, current)}")
        return 1
    print(f"build root: {build}")
    if record is not None:
        print(f"commit: {_described(record)}")
    print(f"source: {local}")
    note = _drift(local, record, CachePaths(current["cache_dir"]))
    if note is not None:
        print(f"note: {note}")
    print(f"lldb: settings set target.source-map {build} {local}")
    return 0


def _cached(current: settings.Settings, uuid: str) -> Answer:
    answer = Lookup(current).find(uuid)
    if answer is None:
        raise DsymfindError(f"{uuid} is not in the cache; `dsymfind fetch {uuid}` fetches it")
    return answer


def _mapped(answer: Answer) -> bool:
    return debugsymbols.BUILD_SOURCE_PATH in answer and debugsymbols.SOURCE_PATH in answer


def _uuid_plist(bundle_dir: str, uuid: str) -> dict[str, object]:
    """The per-UUID plist, which says where the sources are and at which commit they were
    built: one that cannot be read is an error here (UnreadablePlist names it), where the
    lookup just went on without it."""
    try:
        found = bundle.uuid_plist_data(bundle_dir, uuid)
    except OSError as exc:
        where = bundle.uuid_plist_path(bundle_dir, uuid)
        raise DsymfindError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    return {} if found is None else found[1]


def _described(record: SourceRecord) -> str:
    text = record.commit + (f" of {record.remote}" if record.remote else "")
    return text + (" (built with changes to tracked files)" if record.dirty else "")


def _why_none(
    record: SourceRecord | None, values: dict[str, object], current: settings.Settings
) -> str:
    """Why a dSYM the cache could not map (not its own bundle, say) has no mapping."""
    if record is None:
        return (
            "the store recorded no build commit for it (publish it from the build's git "
            "clone, or with `dsymfind publish --source-root`)"
        )
    named = values.get(debugsymbols.SOURCE_PATH)
    if isinstance(named, str) and not os.path.isdir(named):
        return f"{named}, where its sources were, no longer exists"
    if not current["source_checkouts"]:
        return checkouts.no_clone_reason(record, [])
    return "its bundle is not one the cache made, so the cache does not map it"


def _drift(local: str, record: SourceRecord | None, cache: CachePaths) -> str | None:
    """The user's clone, used as it was, may since have moved on from the build's commit."""
    if record is None or local.startswith(cache.checkouts + os.sep):
        return None
    try:
        now = git.head(local)
    except git.GitError:
        return None
    if now == record.commit:
        return None
    return f"{local} is now at {now[:12]}, not the build's commit: lines may differ"
