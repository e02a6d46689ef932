"""`dsymfind index`: admit the dSYM bundles on this machine in the cache's UUID tree, and
record Apple's own images from DeviceSupport folders and simulator runtimes."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsymfind import permissions, settings
from dsymfind.apple import device_support
from dsymfind.apple.device_support import OSBuild
from dsymfind.cache.system_index import SystemIndexer, SystemReport
from dsymfind.errors import DsymfindError
from dsymfind.paths import CachePaths, home
from dsymfind.progress import Progress

if TYPE_CHECKING:
    from dsymfind.cache.index import Report

# Where Xcode keeps what it built: archives (Product > Archive) and DerivedData.
DEFAULT_FOLDERS = (
    os.path.join("Library", "Developer", "Xcode", "Archives"),
    os.path.join("Library", "Developer", "Xcode", "DerivedData"),
)


DETAILS = (
    "Each bundle's DWARF files are verified with the Mach-O reader and linked into the "
    "cache's file-mapped UUID tree; zip files are unpacked into the cache first. "
    "A DeviceSupport folder (or one OS build of it) or a simulator runtime is read as "
    "such: every slice of every Mach-O image in it is recorded in the cache's systems/ "
    "folder with its OS name, version and build, for the helper and symbolicate. "
    "Unchanged bundles and images are not read again. Default: Xcode's Archives and "
    "DerivedData, its DeviceSupport folders and the simulator runtimes."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a folder, a .dSYM, a .zip, a DeviceSupport folder or a simulator runtime",
    )
    parser.add_argument(
        "--source-map",
        action="append",
        default=[],
        metavar="BUILD=LOCAL",
        help="source path remapping written into new per-UUID plists (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    return index(args.paths, source_maps=args.source_map)


def index(paths: Sequence[str], *, source_maps: Sequence[str]) -> int:
    """Exit 0 when every bundle and image found was indexed, 1 when any was invalid, or
    when the PATHs named hold none (a script pointed at the wrong folder must fail, as
    publish does)."""
    maps = _source_maps(source_maps)  # a usage error before anything is read
    if paths:
        roots, system_roots = [], []
        for path in paths:
            full = os.path.abspath(os.path.expanduser(path))
            found = _os_builds(full)
            if found is None:
                roots.append(_checked_root(path))
            else:
                system_roots.append((full, found))
    else:
        roots, system_roots = _default_roots(), _default_system_roots()
    if not roots and not system_roots:
        print(
            "Nothing to index: no Xcode Archives, DerivedData or DeviceSupport folder and "
            "no simulator runtime here; name a PATH."
        )
        return 0
    current = settings.load(os.environ)
    permissions.secure_cache(current["cache_dir"])
    cache = CachePaths(current["cache_dir"])
    report = systems_report = None
    if roots:
        # Loaded for dSYMs only (zips, bundles, shadows: a fifth of a second of imports
        # that an index of DeviceSupport folders alone does not pay).
        from dsymfind.cache.index import Indexer

        indexer = Indexer(
            cache,
            source_maps=maps,
            max_unpacked_bytes=current["max_download_bytes"],
            progress=Progress(),
        )
        report = indexer.run(roots)
    if system_roots:
        builds = [b for _, found in system_roots for b in found]
        systems_report = SystemIndexer(cache, progress=Progress()).run(
            [root for root, _ in system_roots], builds
        )
    seen = (report.seen if report else 0) + (systems_report.images if systems_report else 0)
    if paths and not seen:
        lacking = "no .dSYM bundle, and no zip of dSYMs"
        if systems_report is not None:
            lacking = "no .dSYM bundle, no zip of dSYMs, and no Mach-O image in an OS build"
        raise DsymfindError(f"nothing to index under {', '.join(paths)}: {lacking}")
    print("Indexed " + ", ".join(roots + [root for root, _ in system_roots]))
    if report is not None:
        _print_report(report, current["cache_dir"])
    if systems_report is not None:
        _print_systems_report(systems_report, cache.systems)
    invalid = (report.invalid if report else []) + (
        systems_report.invalid if systems_report else []
    )
    return 1 if invalid else 0


def _source_maps(values: Sequence[str]) -> dict[str, str]:
    if not values:
        return {}
    from dsymfind.cache.index import parse_source_maps

    return parse_source_maps(list(values))


def _os_builds(path: str) -> list[OSBuild] | None:
    """The OS builds `path` holds when it is a DeviceSupport folder, one OS build or a
    simulator runtime; None for any other path (read as folders of dSYMs)."""
    try:
        return device_support.os_builds(path)
    except device_support.DeviceSupportError:
        return None


def _checked_root(path: str) -> str:
    """An absolute folder, .dSYM bundle or zip file; anything else is a usage error."""
    from dsymfind.apple import unpack

    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(full):
        return full
    if not os.path.exists(full):
        raise DsymfindError(f"{path}: no such file or folder")
    try:
        kind = unpack.sniff(full)
    except OSError as exc:
        raise DsymfindError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if kind != "zip":
        raise DsymfindError(f"{path}: not a folder, a .dSYM bundle or a .zip file")
    return full


def _default_roots() -> list[str]:
    user_home = home(os.environ)
    return [p for p in (os.path.join(user_home, d) for d in DEFAULT_FOLDERS) if os.path.isdir(p)]


def _default_system_roots() -> list[tuple[str, list[OSBuild]]]:
    """Xcode's DeviceSupport folders and the simulator runtimes that hold an OS build."""
    found = []
    for root in device_support.default_roots(home(os.environ)):
        builds = _os_builds(root)
        if builds:
            found.append((root, builds))
    return found


def _print_report(report: Report, cache_dir: str) -> None:
    print(
        f"{report.seen} bundles and zips seen: {report.new} new or changed, "
        f"{report.unchanged} unchanged, {len(report.invalid)} invalid; "
        f"{report.linked} UUIDs linked in {cache_dir}/uuids"
    )
    _print_findings(report.conflicts, report.invalid)


def _print_systems_report(report: SystemReport, systems_dir: str) -> None:
    print(
        f"{report.summary()}: {report.new} new or changed, {report.unchanged} unchanged, "
        f"{len(report.invalid)} invalid; {report.dropped} records of files gone or changed "
        f"dropped; records in {systems_dir}"
    )
    _print_findings(report.conflicts, report.invalid)


def _print_findings(conflicts: list[str], invalid: list[str]) -> None:
    for line in conflicts:
        print(f"conflict: {line}")
    for line in invalid:
        print(f"invalid: {line}")
