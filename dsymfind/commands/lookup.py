"""`dsymfind lookup`: what the helper would answer, for a person at a terminal."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dsymfind import _plist, helper, settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", metavar="UUID|FILE", help="a UUID or a Mach-O file")
    parser.add_argument("--plist", action="store_true", help="print the helper's plist instead")


def run(args: argparse.Namespace) -> int:
    return lookup(args.targets, as_plist=args.plist)


def lookup(targets: Sequence[str], *, as_plist: bool) -> int:
    """Exit 0 when every target was found, 1 otherwise, with one line per miss on stderr."""
    current = settings.load(os.environ)
    document: helper.Document = {}
    missed = []
    for target in targets:
        request = helper.parse_request([target])
        found = helper.answer(request, current, deadline=None)
        if not found:
            missed.append(request.key)
        document.update(found)
    if as_plist:
        sys.stdout.buffer.write(_plist.render(document))
    else:
        _print_answers(document)
    if missed:
        from dsymfind.local_lookup import Lookup

        searched = Lookup(current).describe()
        for key in missed:
            print(f"dsymfind: {key}: not found (searched {searched})", file=sys.stderr)
    return 1 if missed else 0


def _print_answers(document: helper.Document) -> None:
    for uuid, values in document.items():
        print(uuid)
        for key, value in values.items():
            print(f"  {key}: {value}")
