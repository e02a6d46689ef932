"""`dsymfind index`: admit the dSYM bundles on this machine in the cache's UUID tree."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from dsymfind import permissions, settings
from dsymfind.apple import unpack
from dsymfind.cache.index import Indexer, Report, parse_source_maps
from dsymfind.errors import DsymfindError
from dsymfind.paths import CachePaths, home
from dsymfind.progress import Progress

# Where Xcode keeps what it built: archives (Product > Archive) and DerivedData.
DEFAULT_FOLDERS = (
    os.path.join("Library", "Developer", "Xcode", "Archives"),
    os.path.join("Library", "Developer", "Xcode", "DerivedData"),
)


DETAILS = (
    "Each bundle's DWARF files are verified with the Mach-O reader and linked into the "
    "cache's file-mapped UUID tree; zip files are unpacked into the cache first. "
    "Unchanged bundles are not read again. Default: Xcode's Archives and DerivedData."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help="a folder, a .dSYM or a .zip")
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
    """Exit 0 when every bundle found was indexed, 1 when any was invalid, or when the
    PATHs named hold none (a script pointed at the wrong folder must fail, as publish does)."""
    maps = parse_source_maps(list(source_maps))
    roots = [_checked_root(p) for p in paths] if paths else _default_roots()
    if not roots:
        print("Nothing to index: no Xcode Archives or DerivedData folder here; name a PATH.")
        return 0
    current = settings.load(os.environ)
    permissions.secure_cache(current["cache_dir"])
    indexer = Indexer(
        CachePaths(current["cache_dir"]),
        source_maps=maps,
        max_unpacked_bytes=current["max_download_bytes"],
        progress=Progress(),
    )
    report = indexer.run(roots)
    if paths and not report.seen:
        raise DsymfindError(
            f"nothing to index under {', '.join(paths)}: no .dSYM bundle, and no zip of dSYMs"
        )
    _print_report(roots, report, current["cache_dir"])
    return 1 if report.invalid else 0


def _checked_root(path: str) -> str:
    """An absolute folder, .dSYM bundle or zip file; anything else is a usage error."""
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


def _print_report(roots: list[str], report: Report, cache_dir: str) -> None:
    print("Indexed " + ", ".join(roots))
    print(
        f"{report.seen} bundles and zips seen: {report.new} new or changed, "
        f"{report.unchanged} unchanged, {len(report.invalid)} invalid; "
        f"{report.linked} UUIDs linked in {cache_dir}/uuids"
    )
    for line in report.conflicts:
        print(f"conflict: {line}")
    for line in report.invalid:
        print(f"invalid: {line}")
