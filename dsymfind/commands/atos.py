"""`dsymfind atos -o BINARY|DSYM|UUID [-arch ARCH] [-l LOAD | -s SLIDE | -offset] [ADDR...]`:
Apple's atos on any machine, so that scripts written for it run unchanged
(docs/symbolicate.md, "atos").

The image is resolved and read by symbolicate/atos.py, its SymCache opened or built as
`symbolicate` opens it. The verb imports no more than it needs: a dSYM on this machine
loads neither the report readers nor the download machinery.
"""

from __future__ import annotations

import argparse
import os
import sys

from dsymfind.errors import DsymfindError
from dsymfind.uuids import normalize_uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from dsymfind.symbolicate import atos

# The exit statuses (as `symbolicate`'s, symbolicate/outcomes.py).
ALL_NAMED, UNUSABLE, LEFT_BARE = 0, 1, 2

DETAILS = (
    "Options are spelled as Apple's atos spells them. ADDR... are the image's link-time "
    "addresses, hex with or without 0x; with -l, addresses in the image loaded there; with "
    "-s, in the image slid by SLIDE; with -offset, offsets into it. With no ADDR, "
    "addresses are read from stdin, whitespace-separated, each answered as it comes. -o "
    "names a Mach-O binary (its dSYM found here or on the servers, as lldb's helper finds "
    "it; else its own symbols), a dSYM bundle or its DWARF file, or a UUID. Each address "
    "prints `symbol (in image) (file:line)`, `symbol (in image) + offset` without line "
    "information, or the address itself when no symbol covers it; with -i, each inlined "
    "frame on its own line, innermost first. A bad address is said on stderr and the "
    "others are answered. Exit status 0 when every address was named, 2 when some were "
    "not, 1 when the image could not be used or an address was not one."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Apple's options are single-dash words: `-offset` must not read as a prefix of another.
    parser.allow_abbrev = False
    parser.add_argument(
        "-o", dest="image", required=True, metavar="BINARY|DSYM|UUID", help="the image"
    )
    parser.add_argument("-arch", metavar="ARCH", help="the slice of a universal -o file")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-l", dest="load", metavar="LOADADDR", help="where the image was loaded")
    where.add_argument("-s", dest="slide", metavar="SLIDE", help="how far the image slid")
    where.add_argument(
        "-offset", action="store_true", help="the addresses are offsets into the image"
    )
    parser.add_argument("-i", dest="inlines", action="store_true", help="every inlined frame")
    parser.add_argument(
        "-fullPath", dest="full_path", action="store_true", help="full source file paths"
    )
    parser.add_argument(
        "-d",
        dest="delimiter",
        default="\n",
        metavar="DELIMITER",
        help="between an address's inlined frames (-i), instead of a new line",
    )
    parser.add_argument("--offline", action="store_true", help="ask no server for a dSYM")
    parser.add_argument("addresses", nargs="*", metavar="ADDR", help="addresses to name")


def run(args: argparse.Namespace) -> int:
    from dsymfind import permissions, settings
    from dsymfind.paths import CachePaths
    from dsymfind.symbolicate import atos
    from dsymfind.symbolicate.engine import ImageSymbols

    where = _where(args)
    current = settings.load(os.environ)
    cache = CachePaths(current["cache_dir"])
    permissions.secure_cache(cache.root)
    is_file = os.path.exists(args.image)
    if not is_file and normalize_uuid(args.image) is None:
        raise DsymfindError(f"{args.image}: no such file, and not a UUID")
    image = atos.resolve(
        args.image if is_file else None,
        None if is_file else args.image,
        args.arch,
        current,
        offline=args.offline,
        arch_option="-arch",
    )
    engine = ImageSymbols(atos.table(cache, image))
    bad = bare = 0
    for word in args.addresses or _words(sys.stdin):
        try:
            address = atos.parse_address(word, hex_only=True)
        except DsymfindError as exc:
            print(f"dsymfind: error: {exc}", file=sys.stderr)
            bad += 1
            continue
        offset = atos.image_offset(address, where, image.text)
        symbols = engine.at(offset) if offset >= 0 else []
        said = atos.lines(
            image.name,
            address,
            offset,
            symbols,
            inlines=args.inlines,
            full_path=args.full_path,
        )
        print(args.delimiter.join(said), flush=not args.addresses)
        bare += not symbols
    if bad:
        return UNUSABLE
    return LEFT_BARE if bare else ALL_NAMED


def _where(args: argparse.Namespace) -> atos.Where:
    from dsymfind.symbolicate import atos

    if args.offset:
        return atos.Where(atos.OFFSET)
    if args.load is not None:
        return atos.Where(atos.LOAD, atos.parse_address(args.load, hex_only=True))
    if args.slide is not None:
        return atos.Where(atos.SLIDE, atos.parse_address(args.slide, hex_only=True))
    return atos.Where()


def _words(lines: Iterable[str]) -> Iterator[str]:
    """The whitespace-separated words of `lines`, each as soon as its line is read."""
    for line in lines:
        yield from line.split()
