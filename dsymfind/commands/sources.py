"""`dsymfind sources UUID`: the source mapping of a cached dSYM, or why it has none."""

from __future__ import annotations

import os

from dsymfind import checkouts, debugsymbols, git, provenance, settings
from dsymfind.apple import bundle
from dsymfind.cache_layout import CacheLayout
from dsymfind.commands.fetch import normalized
from dsymfind.errors import DsymfindError
from dsymfind.local_lookup import Lookup
from dsymfind.provenance import SourceRecord

# A handful of quick git runs at most, for the reasons and the note.
_GIT_BUDGET = 4 * git.QUICK_TIMEOUT


def sources(uuid_text: str) -> int:
    """Exit 0 with a mapping, 1 without (and why)."""
    (uuid,) = normalized([uuid_text])
    current = settings.load(os.environ)
    answer = Lookup(current).find(uuid)
    if answer is None:
        raise DsymfindError(f"{uuid} is not in the cache; `dsymfind fetch {uuid}` fetches it")
    bundle_dir = bundle.bundle_of(answer[debugsymbols.DSYM_PATH])
    values = {} if bundle_dir is None else _uuid_plist(bundle_dir, uuid)
    record = provenance.checked(values.get(debugsymbols.SOURCE_CONTROL))
    build, local = answer.get(debugsymbols.BUILD_SOURCE_PATH), answer.get(debugsymbols.SOURCE_PATH)
    deadline = checkouts.Deadline(_GIT_BUDGET)
    if build is None or local is None:
        print(f"no source mapping for {uuid}: {_why_none(record, values, current, deadline)}")
        return 1
    print(f"build root: {build}")
    if record is not None:
        print(f"commit: {_described(record)}")
    print(f"source: {local}")
    note = _drift(local, record, CacheLayout(current["cache_dir"]), deadline)
    if note is not None:
        print(f"note: {note}")
    print(f"lldb: settings set target.source-map {build} {local}")
    return 0


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
    record: SourceRecord | None,
    values: dict[str, object],
    current: settings.Settings,
    deadline: checkouts.Deadline,
) -> str:
    if record is None:
        return (
            "the store recorded no build commit for it (publish it from the build's git "
            "clone, or with --source-root)"
        )
    named = values.get(debugsymbols.SOURCE_PATH)
    if isinstance(named, str) and not os.path.isdir(named):
        return f"{named}, where its sources were, no longer exists"
    clones = current["source_checkouts"]
    if checkouts.matching_clone(record, clones, deadline) is None:
        return checkouts.no_clone_reason(record, clones)
    return (
        f"a clone has commit {record.commit[:12]}'s remote, but no checkout was made (see the log)"
    )


def _drift(
    local: str, record: SourceRecord | None, layout: CacheLayout, deadline: checkouts.Deadline
) -> str | None:
    """The user's clone, used as it was, may since have moved on from the build's commit."""
    if record is None or local.startswith(layout.sources + os.sep):
        return None
    try:
        now = git.head(local, timeout=deadline.left(git.QUICK_TIMEOUT))
    except git.GitError:
        return None
    if now == record.commit:
        return None
    return f"{local} is now at {now[:12]}, not the build's commit: lines may differ"
