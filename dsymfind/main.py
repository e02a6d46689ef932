"""`dsymfind`: the admin command line. Parses, dispatches, applies the one error policy."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from dsymfind import __version__
from dsymfind.errors import DsymfindError
from dsymfind.spawn import DOWNLOAD_VERB


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are bad input like any other: one stderr line, exit 1."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dsymfind",
        description="Find, fetch and verify dSYMs for lldb, crash symbolication and ReportCrash.",
    )
    parser.add_argument("--version", action="version", version=f"dsymfind {__version__}")
    verbs = parser.add_subparsers(
        dest="verb", metavar="COMMAND", required=True, parser_class=_Parser
    )

    lookup = verbs.add_parser("lookup", help="answer like the dsymForUUID helper, for people")
    lookup.add_argument("targets", nargs="+", metavar="UUID|FILE", help="a UUID or a Mach-O file")
    lookup.add_argument("--plist", action="store_true", help="print the helper's plist instead")

    ident = verbs.add_parser("id", help="show a Mach-O file's slices, UUIDs and symbol-server keys")
    ident.add_argument("files", nargs="+", metavar="FILE")
    ident.add_argument("--json", action="store_true", help="machine-readable output")

    config = verbs.add_parser("config", help="show the effective configuration and its origins")
    config.add_argument("--json", action="store_true", help="machine-readable output")

    # Hidden: how the helper starts its detached downloader (spawn.py).
    download = verbs.add_parser(DOWNLOAD_VERB)
    download.add_argument("uuid")
    download.add_argument("--ignore-negative-cache", action="store_true")
    download.add_argument("--copy-executable", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except DsymfindError as exc:
        print(f"dsymfind: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: the details go to the log, the user gets one line
        from dsymfind.log import log_internal_error

        log_file = log_internal_error(exc, os.environ)
        print(f"dsymfind: internal error: {exc!r}; details in {log_file}", file=sys.stderr)
        return 1


def _download(args: argparse.Namespace) -> int:
    from dsymfind.downloader import run_download
    from dsymfind.uuids import normalize_uuid

    uuid = normalize_uuid(args.uuid)
    if uuid is None:
        raise DsymfindError(f"not a UUID: {args.uuid!r}")
    return run_download(
        uuid,
        os.environ,
        ignore_negative_cache=args.ignore_negative_cache,
        copy_executable=args.copy_executable,
    )


def _dispatch(args: argparse.Namespace) -> int:
    if args.verb == "lookup":
        from dsymfind.commands.lookup import lookup

        return lookup(args.targets, as_plist=args.plist)
    if args.verb == DOWNLOAD_VERB:
        return _download(args)
    if args.verb == "id":
        from dsymfind.commands.ident import ident

        return ident(args.files, as_json=args.json)
    from dsymfind.commands.config import show_config

    return show_config(as_json=args.json)
