"""`dsymfind uninstall`: its work is install's undoing, and lives beside it (install.py)."""

from __future__ import annotations

import argparse

from dsymfind.commands.install import uninstall


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="print the defaults/launchctl commands, run none"
    )


def run(args: argparse.Namespace) -> int:
    return uninstall(dry_run=args.dry_run)
