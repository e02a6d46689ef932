"""`dsymfind forget`: drop what the negative cache says of some UUIDs, or all it says and
every server's backoff, so that the next lookup asks the servers again."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence

from dsymfind import permissions, settings
from dsymfind.cache import negative
from dsymfind.errors import DsymfindError
from dsymfind.fetch.backoff import duration
from dsymfind.paths import TEMP_SUFFIX, CachePaths, short_name
from dsymfind.stores.base import redact

DETAILS = (
    "With --all, every entry and every server's backoff. A Mach-O FILE stands for the "
    "UUIDs of all its slices. Exit status 0, whatever the negative cache held."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "uuids",
        nargs="*",
        metavar="UUID|FILE",
        help="a UUID (in any case, dashed or not) or a Mach-O file",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="everything",
        help="every negative entry, and every server's backoff",
    )


def run(args: argparse.Namespace) -> int:
    return forget(args.uuids, everything=args.everything)


def forget(targets: Sequence[str], *, everything: bool) -> int:
    """Print what was dropped; exit 0 (a UUID the negative cache does not hold included)."""
    if everything == bool(targets):
        raise DsymfindError("give the UUIDs to forget, or --all (not both)")
    uuids = [] if everything else _uuids(targets)
    current = settings.load(os.environ)
    if not os.path.lexists(current["cache_dir"]):
        print("nothing to forget: the cache has not been made yet")
        return 0
    cache = CachePaths(permissions.secure_cache(current["cache_dir"]))
    if everything:
        _forget_everything(cache, current)
    else:
        _forget_uuids(cache, current, uuids)
    return 0


def _uuids(targets: Sequence[str]) -> list[str]:
    """Each UUID given, and every slice's of each Mach-O file given, as `fetch` reads them."""
    from dsymfind.commands.fetch import uuids_of  # with the download code: not for --all

    return list(dict.fromkeys(uuids_of(targets)))


def _forget_uuids(cache: CachePaths, current: settings.Settings, uuids: list[str]) -> None:
    held = negative.entries(cache)
    now = time.time()
    for uuid in uuids:
        # Described before they go: the content says where the servers were asked.
        said = {entry: _described(entry, current, now) for entry in held if entry.uuid == uuid}
        dropped = negative.drop(list(said))
        for entry in dropped:
            print(f"{uuid}: forgot {said[entry]}")
        if not dropped:
            print(f"{uuid}: not in the negative cache")


def _described(entry: negative.Entry, current: settings.Settings, now: float) -> str:
    """What the entry said, how long ago, and where the servers were asked."""
    said = f"no server has its {entry.what} ({duration(entry.age(now))} ago"
    if not entry.applies(current["stores_fingerprint"]):
        return said + ", learned under other store settings or by an earlier version)"
    if not entry.fresh(current["negative_cache_ttl"], now):
        return said + ", expired)"
    asked = negative.not_found(entry)
    return said + (f"; not on {', '.join(asked)})" if asked else ")")


def _forget_everything(cache: CachePaths, current: settings.Settings) -> None:
    dropped = negative.drop(negative.entries(cache))
    counts = {
        what: sum(1 for entry in dropped if entry.what == what)
        for what in (negative.DSYM, negative.EXECUTABLE, negative.PDB)
    }
    held = ", ".join(_counted(count, what) for what, count in counts.items() if count)
    print(f"forgot {_counted(len(dropped), 'negative entry')}" + (f" ({held})" if held else ""))
    names = {short_name(server["url"]): server for server in current["servers"]}
    unknown = 0
    for path in _backoff_markers(cache):
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue  # the server delivered meanwhile
        server = names.get(os.path.basename(path))
        if server is None:
            unknown += 1
            continue
        print(f"forgot the backoff of {server['name']} ({redact(server['url'])})")
    if unknown:
        print(f"forgot the backoff of {_counted(unknown, 'server')} no longer configured")


def _counted(count: int, noun: str) -> str:
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'}"


def _backoff_markers(cache: CachePaths) -> list[str]:
    """Every server's backoff marker; a writer's temporary file is its own to finish."""
    try:
        names = sorted(os.listdir(cache.failing_servers))
    except OSError:
        return []
    return [
        os.path.join(cache.failing_servers, name)
        for name in names
        if not name.endswith(TEMP_SUFFIX)
        and os.path.isfile(os.path.join(cache.failing_servers, name))
    ]
