"""`dsymfind check-build`: whether every image a build ships has its dSYM, before release."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence

from dsymfind.publish import completeness, store_choice

DETAILS = (
    "Reads an .xcarchive, an .app, an .ipa or a build folder, and for every slice of every "
    "Mach-O it ships (executables, frameworks, app extensions, App Clips, watch apps, XPC "
    "services, dylibs) says where its dSYM is: `inputs` (an archive's dSYMs/, the dSYMs beside "
    "an .app, the .dSYM bundles named), `store` (already in --store: one check per UUID), "
    "`stub` (an Xcode 16 debug-dylib stub, which needs none) or `missing`, with the likeliest "
    "reason (a vendor binary without a dSYM, a stale dSYM of another build). Exit status 0 "
    "when nothing is missing, 1 otherwise."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="an .xcarchive, .app, .ipa or build folder, and any .dSYM bundles to count",
    )
    parser.add_argument(
        "--store",
        metavar="STORE",
        help="also look in this store: a configured server's name, a folder, or an S3 location",
    )
    store_choice.add_connection_arguments(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    given = store_choice.connection_flags(args.endpoint_url, args.region, args.profile)
    return check_build(args.paths, store=args.store, given=given, as_json=args.json)


def check_build(
    paths: Sequence[str], *, store: str | None, given: Mapping[str, str], as_json: bool
) -> int:
    """Exit 0 when every image has its dSYM (or is a stub) and every file could be read."""
    present = completeness.store_present(store, given) if store is not None else None
    result = completeness.check(paths, present)
    for problem in result.problems:
        print(f"dsymfind: {problem}", file=sys.stderr)
    if as_json:
        json.dump(result.as_dict(), sys.stdout, indent=2)
        print()
    else:
        for image in result.images:
            print(completeness.line(image))
        print(completeness.summary(result))
    return 0 if result.complete else 1
