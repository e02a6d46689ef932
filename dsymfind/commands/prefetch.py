"""`dsymfind prefetch`: fetch the dSYM of every binary image named in Apple crash reports."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dsymfind import settings
from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError, Image
from dsymfind.commands.fetch import add_fetch_options
from dsymfind.fetch import batch
from dsymfind.fetch.batch import FAILED, FOUND, NOT_FOUND, Result

DETAILS = (
    "Reads .ips (JSON) and classic .crash (text) reports, told apart by content, and "
    "fetches each UUID once, concurrently. Apple's system images (the OS's programs "
    "and libraries: under /System/, /usr/lib/, /usr/libexec/, /bin/, /sbin/, /usr/bin/, "
    "/usr/sbin/, /Library/Apple/, or in the dyld shared cache) are skipped and counted. "
    "Exit status 0 when every other image has its dSYM."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reports", nargs="+", metavar="CRASHLOG", help="an .ips or .crash file")
    parser.add_argument(
        "--all",
        action="store_true",
        dest="include_apple",
        help="fetch Apple's system images too",
    )
    add_fetch_options(parser)


def run(args: argparse.Namespace) -> int:
    return prefetch(
        args.reports,
        ignore_negative_cache=args.ignore_negative_cache,
        as_json=args.json,
        include_apple=args.include_apple,
        executables=args.executables,
    )


def prefetch(
    reports: Sequence[str],
    *,
    ignore_negative_cache: bool,
    as_json: bool,
    include_apple: bool,
    executables: bool = False,
) -> int:
    """Exit 0 when every report was read and every image not skipped has its dSYM here.

    Apple's system images are skipped unless `include_apple`: their symbols come from
    Apple (Xcode's device support), seldom from the user's servers, so asking for them
    would mostly add misses.
    """
    current = settings.load(os.environ)
    rows, images = _read_reports(reports)
    skipped = [] if include_apple else [image for image in images.values() if image.apple]
    wanted = [uuid for uuid, image in images.items() if include_apple or not image.apple]
    results = batch.fetch_all(
        wanted,
        current,
        os.environ,
        ignore_negative_cache=ignore_negative_cache,
        progress=batch.live_progress(sys.stderr),
        executables=executables or current["copy_executables"],
    )
    if as_json:
        _print_json(rows, results, images, skipped)
    else:
        _print_summary(rows, results, images, len(skipped))
    unread = any("error" in row for row in rows)
    return 1 if unread or any(result.state != FOUND for result in results) else 0


def _read_reports(reports: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, Image]]:
    """A row per report, and the images by UUID across reports: each is fetched once.

    A report that cannot be read is named on stderr; the others are still read.
    """
    images: dict[str, Image] = {}
    rows: list[dict[str, Any]] = []
    for path in reports:
        try:
            found = crashreport.read(path)
        except CrashReportError as exc:
            print(f"dsymfind: {exc}", file=sys.stderr)
            rows.append({"report": path, "error": str(exc)})
            continue
        rows.append({"report": path, "images": len(found)})
        for image in found:
            images.setdefault(image.uuid, image)
    return rows, images


def _print_json(
    rows: list[dict[str, Any]],
    results: list[Result],
    images: dict[str, Image],
    skipped: list[Image],
) -> None:
    described = [
        {
            **result.as_json(),
            "name": images[result.uuid].name,
            "arch": images[result.uuid].arch,
            "already_local": not result.fetched,
        }
        for result in results
    ]
    apple = [{"uuid": i.uuid, "name": i.name, "arch": i.arch, "path": i.path} for i in skipped]
    json.dump({"reports": rows, "images": described, "apple_skipped": apple}, sys.stdout, indent=2)
    print()


def _print_summary(
    rows: list[dict[str, Any]], results: list[Result], images: dict[str, Image], skipped: int
) -> None:
    read = sum(1 for row in rows if "error" not in row)
    print(f"{read} of {len(rows)} reports read, {len(images)} images with a UUID")
    found = [r for r in results if r.state == FOUND]
    local = sum(1 for r in found if not r.fetched)
    print(f"found: {len(found)} ({local} already here, {len(found) - local} fetched)")
    _print_group(found, images, lambda r: r.path or "")
    for state, label in ((NOT_FOUND, "not found"), (FAILED, "failed")):
        group = [r for r in results if r.state == state]
        if group:
            print(f"{label}: {len(group)}")
            _print_group(group, images, lambda r: r.message)
    if skipped:
        noun = "image" if skipped == 1 else "images"
        print(f"{skipped} Apple system {noun} skipped (--all includes them)")


def _print_group(
    results: list[Result], images: dict[str, Image], detail: Callable[[Result], str]
) -> None:
    width = max((len(images[r.uuid].name) for r in results), default=0)
    for result in results:
        print(f"  {images[result.uuid].name:<{width}}  {result.uuid}  {detail(result)}".rstrip())
