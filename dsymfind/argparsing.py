"""argparse as `dsymfind` uses it: a usage mistake is one stderr line, help is sized
without `shutil`. Imported only when a command line is parsed by argparse (main.py):
`dsymfind symbolicate` with plain words is read without it (symbolicate/arguments.py)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """Usage mistakes are bad input like any other: one stderr line, exit 1."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message} (see --help)\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # Every add_argument makes a formatter, and argparse's own asks `shutil` for the
        # terminal's width: `shutil` with the compression modules it loads cost a quick
        # command more than all its parsing.
        return argparse.HelpFormatter(prog=self.prog, width=_help_width())


def _help_width() -> int:
    """The width of help text: as argparse has it, the terminal's ($COLUMNS first) less 2."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
            columns = 0
    return (columns if columns > 0 else 80) - 2  # shutil's fallback


class AskTheFullParser(Exception):
    """A usage mistake met by the parser of one verb: the full parser tells it."""


class OneVerbParser(Parser):
    def error(self, message: str) -> NoReturn:
        raise AskTheFullParser
