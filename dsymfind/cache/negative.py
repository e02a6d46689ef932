"""The negative cache's entries on disk: written through fetch/backoff.py, shown by `status`,
dropped by `forget`, swept by `gc` (docs/cache-format.md).

`negative/<FINGERPRINT>/<HEX>` (`<HEX>.executable` for an executable): every server that
the store settings of FINGERPRINT reach answered "not found" at its mtime; its content says
where each was asked. Files at the top, `negative/<HEX>` and the `negative/pdb-<h>` of PDB
keys, were written by versions before fingerprints: nobody reads them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import NamedTuple

from dsymfind import atomic, paths
from dsymfind.paths import CachePaths
from dsymfind.uuids import dashed

# What a marker says no server has.
DSYM, EXECUTABLE, PDB = "dSYM", "executable", "PDB key"
# An earlier version's marker for a server lacking a PDB key: `pdb-<h>`.
_PDB_PREFIX = "pdb-"
# A marker's content is a few hundred bytes; a larger file is not one we wrote.
CONTENT_MAX = 64 * 1024
# The content's shape: {"format": 1, "not_found": [where each server was asked, ...]}.
CONTENT_FORMAT = 1
_FINGERPRINT_DIGITS = frozenset("0123456789abcdef")
_HEX_DIGITS = frozenset("0123456789ABCDEF")


class Entry(NamedTuple):
    path: str
    what: str  # DSYM, EXECUTABLE or PDB
    uuid: str | None  # dashed; None for a PDB key
    # The store settings' fingerprint it was written under; None: an earlier version's
    # entry, read by nobody.
    fingerprint: str | None
    mtime: float

    def applies(self, fingerprint: str) -> bool:
        """Whether the store settings of `fingerprint` read this entry."""
        return self.fingerprint == fingerprint

    def age(self, now: float) -> float:
        return now - self.mtime

    def fresh(self, ttl: float, now: float) -> bool:
        return 0 <= self.age(now) < ttl


def record(marker: str, asked: list[str]) -> None:
    """Create or refresh `marker`, saying where each server was asked (`asked`, redacted as
    logs show it); best effort: a lost marker costs a request."""
    content = json.dumps({"format": CONTENT_FORMAT, "not_found": asked}, indent=1)
    with contextlib.suppress(OSError):
        atomic.write_bytes(marker, content.encode(), fsync=False, mode=0o600)


def not_found(entry: Entry) -> list[str]:
    """Where the servers were asked, as recorded; [] when the marker says nothing readable
    (an earlier version's markers are empty)."""
    try:
        data = json.loads(atomic.read_small_file(entry.path, CONTENT_MAX))
    except (OSError, ValueError, RecursionError):
        return []
    asked = data.get("not_found") if isinstance(data, dict) else None
    if not isinstance(asked, list):
        return []
    return [str(where) for where in asked]


def entries(cache: CachePaths) -> list[Entry]:
    """Every negative entry in the cache, newest first; a name we did not write is left out."""
    found = list(_entries(cache.negative))
    found.sort(key=lambda entry: entry.mtime, reverse=True)
    return found


def _entries(folder: str) -> Iterator[Entry]:
    for item in _scan(folder):
        if not item.is_dir(follow_symlinks=False):
            entry = _entry(item, fingerprint=None)
            if entry is not None:
                yield entry
        elif _is_fingerprint(item.name):
            for inner in _scan(item.path):
                entry = _entry(inner, fingerprint=item.name)
                if entry is not None:
                    yield entry


def _entry(item: os.DirEntry[str], *, fingerprint: str | None) -> Entry | None:
    """The entry a file of `negative/` (or of a fingerprint's folder in it) is."""
    if not item.is_file(follow_symlinks=False):
        return None
    try:
        mtime = item.stat(follow_symlinks=False).st_mtime
    except OSError:
        return None  # removed meanwhile (forget, another run)
    name = item.name
    if fingerprint is None and name.startswith(_PDB_PREFIX):
        if not _is_fingerprint(name.removeprefix(_PDB_PREFIX)):
            return None
        return Entry(item.path, PDB, None, None, mtime)
    hex_digits = name.removesuffix(paths.NEGATIVE_EXECUTABLE_SUFFIX)
    if len(hex_digits) != 32 or not _HEX_DIGITS.issuperset(hex_digits):
        return None  # a temporary file (`<name>.<pid>.tmp`) or not ours
    what = DSYM if hex_digits == name else EXECUTABLE
    return Entry(item.path, what, dashed(hex_digits), fingerprint, mtime)


def _scan(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as listing:
            return list(listing)
    except OSError:
        return []


def _is_fingerprint(name: str) -> bool:
    """A fingerprint, as paths.short_name spells one: 16 lowercase hex digits."""
    return len(name) == 16 and _FINGERPRINT_DIGITS.issuperset(name)


def drop(doomed: list[Entry]) -> list[Entry]:
    """Remove each entry; those this call removed (one gone meanwhile is not counted).

    Markers are plain files that writers replace whole, so removing one beside a running
    downloader or helper is safe: at worst a server is asked once more."""
    dropped = []
    for entry in doomed:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        dropped.append(entry)
    return dropped


def sweep(cache: CachePaths, ttl: float, now: float, *, dry_run: bool) -> list[Entry]:
    """`gc`: the entries nobody reads any more, an earlier version's and the expired, then
    the folders of fingerprints left empty. Another configuration's fresh entries stay: a
    helper started by lldb may see other settings (DSYMFIND_SERVERS) than gc does."""
    doomed = [e for e in entries(cache) if e.fingerprint is None or not e.fresh(ttl, now)]
    if dry_run:
        return doomed
    dropped = drop(doomed)
    for folder in folders(cache):
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only when empty: a marker written meanwhile keeps it
    return dropped


def folders(cache: CachePaths) -> list[str]:
    """The folders of the fingerprints in the negative cache."""
    return [
        item.path
        for item in _scan(cache.negative)
        if item.is_dir(follow_symlinks=False) and _is_fingerprint(item.name)
    ]
