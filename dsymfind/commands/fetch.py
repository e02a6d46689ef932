"""`dsymfind fetch`: fetch dSYMs by UUID, or for every slice of a Mach-O file, in the
foreground, with a progress line each."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from dsymfind import settings
from dsymfind.apple import macho
from dsymfind.errors import DsymfindError
from dsymfind.fetch import batch
from dsymfind.progress import Progress
from dsymfind.uuids import normalize_uuid

DETAILS = (
    "A Mach-O FILE stands for the UUIDs of all its slices. "
    "Exit status 0 when every UUID is in the cache afterwards."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "uuids",
        nargs="+",
        metavar="UUID|FILE",
        help="a UUID (in any case, dashed or not) or a Mach-O file",
    )
    add_fetch_options(parser)


def add_fetch_options(parser: argparse.ArgumentParser) -> None:
    """The options fetch shares with prefetch."""
    parser.add_argument(
        "--ignore-negative-cache",
        action="store_true",
        help="ask the servers again, even about UUIDs they recently lacked, and even those "
        "that recently failed",
    )
    parser.add_argument(
        "--executables",
        action="store_true",
        help="fetch each UUID's executable too (as the copy_executables setting does)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable results")


def run(args: argparse.Namespace) -> int:
    return fetch(
        args.uuids,
        ignore_negative_cache=args.ignore_negative_cache,
        as_json=args.json,
        executables=args.executables,
    )


def fetch(
    targets: Sequence[str], *, ignore_negative_cache: bool, as_json: bool, executables: bool
) -> int:
    """Exit 0 when every UUID is on this machine afterwards, 1 otherwise; `executables`
    (or the copy_executables setting) fetches their executables too."""
    wanted = uuids_of(targets)
    current = settings.load(os.environ)
    # The result lines are the output; with --json they give way to the JSON on stdout.
    progress = batch.live_progress(sys.stderr) if as_json else Progress(sys.stdout)
    results = batch.fetch_all(
        wanted,
        current,
        os.environ,
        ignore_negative_cache=ignore_negative_cache,
        progress=progress,
        executables=executables or current["copy_executables"],
    )
    if current["source_checkouts"]:
        _map_cached_sources(results, quiet=as_json)
    if as_json:
        json.dump([result.as_json() for result in results], sys.stdout, indent=2)
        print()
    return 0 if all(result.state == batch.FOUND for result in results) else 1


def _map_cached_sources(results: Sequence[batch.Result], *, quiet: bool) -> None:
    """The sources of dSYMs found in the cache without them (configured since, say),
    checked out and named now, as their download does for a new one; a line each."""
    from dsymfind.fetch import backoff
    from dsymfind.fetch.downloader import Download

    on_purpose = backoff.asking(on_purpose=True, ignore=False)
    for result in results:
        if result.state != batch.FOUND or result.fetched:
            continue
        try:
            download = Download(result.uuid, os.environ, on_purpose)
            said = download.map_cached_sources()
        except DsymfindError as exc:
            said = str(exc)
        if said is not None and not quiet:
            print(f"{result.uuid}  sources: {said}")


_UUID_CHARACTERS = frozenset("0123456789abcdefABCDEF-")


def uuids_of(targets: Sequence[str]) -> list[str]:
    """The UUIDs to fetch: each UUID given, and every slice's of each Mach-O file given, as
    `debuginfod-find` accepts a binary. Every target is read before anything is fetched,
    so the first that is neither stops everything."""
    wanted = []
    for text in targets:
        uuid = normalize_uuid(text)
        wanted.extend([uuid] if uuid is not None else _slice_uuids(text))
    return wanted


def _slice_uuids(path: str) -> list[str]:
    if not os.path.lexists(path) and set(path) <= _UUID_CHARACTERS:
        raise DsymfindError(f"not a UUID: {path!r}")  # a mistyped UUID, not a missing file
    try:
        slices = macho.read_slices(path)
    except macho.MachOError as exc:
        why = str(exc).removeprefix(f"{path}: ")  # the reader's message starts with the path
        raise DsymfindError(f"{path!r} is neither a UUID nor a Mach-O file: {why}") from None
    found = [piece.uuid for piece in slices if piece.uuid is not None]
    if not found:
        raise DsymfindError(f"{path}: no slice has a UUID (LC_UUID), so no dSYM can match it")
    return found


def normalized(uuids: Sequence[str]) -> list[str]:
    """Every UUID in its normal form; the first that is not a UUID stops everything."""
    wanted = []
    for text in uuids:
        uuid = normalize_uuid(text)
        if uuid is None:
            raise DsymfindError(f"not a UUID: {text!r}")
        wanted.append(uuid)
    return wanted
