"""`dsymfind`: the admin command line. A lazy registry of verbs, the dispatcher, and the one
error policy.

A verb is one module, `commands/<verb>.py`, declaring its arguments (`add_arguments`,
with an optional `DETAILS` for its --help) and doing its work (`run`), plus one line
below. The registry names modules rather than importing them: `dsymfind --help` and a
usage mistake import none, and a verb run imports only its own.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys

from dsymfind import __version__, processes
from dsymfind.commands import stdout
from dsymfind.errors import DsymfindError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import NoReturn, Protocol

    class Command(Protocol):
        """What a verb's module provides."""

        def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

        def run(self, args: argparse.Namespace) -> int: ...


# The public verbs, in the order --help lists them: name -> (module, summary).
COMMANDS: dict[str, tuple[str, str]] = {
    "install": (
        "dsymfind.commands.install",
        "register dsymForUUID with DebugSymbols and install the launchd agent",
    ),
    "uninstall": (
        "dsymfind.commands.uninstall",
        "restore the DebugSymbols settings install changed and remove the launchd agent",
    ),
    "doctor": (
        "dsymfind.commands.doctor",
        "check configuration, cache, servers and registration, and say how to fix problems",
    ),
    "index": (
        "dsymfind.commands.index",
        "publish local dSYM bundles (folders, Xcode archives, .zip files) in the cache",
    ),
    "gc": (
        "dsymfind.commands.gc",
        "evict least-recently-used downloads and remove dangling cache links",
    ),
    "check": (
        "dsymfind.commands.check",
        "verify every cache entry and link, and find what interrupted runs left",
    ),
    "publish": (
        "dsymfind.commands.publish",
        "publish dSYMs, PE files and PDBs into a symbol store (a folder or an S3 bucket)",
    ),
    "builds": (
        "dsymfind.commands.builds",
        "list the builds a store holds, show one build's images, find the builds of a UUID",
    ),
    "check-build": (
        "dsymfind.commands.check_build",
        "say whether every image a build ships has its dSYM",
    ),
    "retire": (
        "dsymfind.commands.retire",
        "remove old builds from a store, and every object no remaining build names",
    ),
    "status": (
        "dsymfind.commands.status",
        "show the cache: location, size, entries, negative cache and downloads in flight",
    ),
    "forget": (
        "dsymfind.commands.forget",
        "drop the negative cache's entries of UUIDs, so that lookups ask the servers again",
    ),
    "fetch": (
        "dsymfind.commands.fetch",
        "fetch dSYMs from the configured servers in the foreground",
    ),
    "prefetch": (
        "dsymfind.commands.prefetch",
        "fetch the dSYM of every binary image in Apple crash reports",
    ),
    "symbolicate": (
        "dsymfind.commands.symbolicate",
        "turn crash reports or addresses into function names, inlined frames and source lines",
    ),
    "atos": ("dsymfind.commands.atos", "name addresses of one image as Apple's atos does"),
    "why": (
        "dsymfind.commands.why",
        "say why an image (a UUID, or a report's bare ones) has no dSYM, store by store",
    ),
    "lookup": ("dsymfind.commands.lookup", "answer like the dsymForUUID helper, for people"),
    "id": (
        "dsymfind.commands.id",
        "show the identity of a Mach-O, PE or PDB file or a .dSYM bundle, and its server keys",
    ),
    "pdb": (
        "dsymfind.commands.pdb",
        "find or fetch the matching PDB of Windows executables and DLLs",
    ),
    "sources": (
        "dsymfind.commands.sources",
        "show where a cached dSYM's sources are checked out for lldb, or why they are not",
    ),
    "config": (
        "dsymfind.commands.config",
        "show the effective configuration and its origins",
    ),
}

# How the helper starts its detached downloader and walker (processes.py). Parsed by a
# parser of their own, only when argv starts with one of them: on the public parser they
# would be listed in every "invalid choice" error. No summary: no one reads their help.
HIDDEN_COMMANDS: dict[str, tuple[str, str]] = {
    processes.DOWNLOAD_VERB: ("dsymfind.commands.download", ""),
    processes.REFRESH_VERB: ("dsymfind.commands.refresh", ""),
}


def _untranslated(message: str) -> str:
    return message


def _untranslated_plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


# argparse passes its own words ("usage:", "options", its errors) through gettext's
# default catalog, as every other message of dsymfind is English: kept in English too.
# Each lookup reads the locale variables, imports `locale` and looks for catalog
# files: a twentieth of an atos run, for words no catalog of dsymfind's translates.
argparse._ = _untranslated  # type: ignore[attr-defined]
argparse.ngettext = _untranslated_plural  # type: ignore[attr-defined]


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


def command(module: str) -> Command:
    """The verb module named `module`, imported now."""
    __import__(module)
    return sys.modules[module]


def build_parser(only: str | None = None, *, listed: bool = True) -> argparse.ArgumentParser:
    """The public parser: the arguments of the verb `only` alone ("" for none), or of
    every verb when None; the other verbs by name and summary unless `listed` is False.
    A message names the other verbs (--help, "invalid choice") only when no verb came
    first, and importing every verb's module costs more than a quick command's own work."""
    parser = Parser(
        prog="dsymfind",
        description="Find, fetch and verify dSYMs for lldb, crash symbolication and ReportCrash.",
        epilog="The debugger-facing helper is the separate command dsymForUUID. "
        "Start with `dsymfind install` and `dsymfind doctor`; `dsymfind COMMAND --help` "
        "explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"dsymfind {__version__}")
    _add_verbs(parser, COMMANDS, only, listed=listed, metavar="COMMAND")
    return parser


def build_hidden_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of the hidden verbs (HIDDEN_COMMANDS). Its usage names them all."""
    parser = Parser(prog="dsymfind")
    _add_verbs(parser, HIDDEN_COMMANDS, only, listed=True)
    return parser


def _add_verbs(
    parser: argparse.ArgumentParser,
    registry: dict[str, tuple[str, str]],
    only: str | None,
    *,
    listed: bool,
    metavar: str | None = None,
) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar=metavar, required=True, parser_class=Parser)
    for name, (module, summary) in registry.items():
        if only is None or name == only:
            verb = command(module)
            description = _description(summary, getattr(verb, "DETAILS", ""))
            verb.add_arguments(
                verbs.add_parser(name, help=summary or None, description=description)
            )
        elif listed:
            # Never parses a word (a verb named is `only`): its own --help is not needed.
            verbs.add_parser(name, help=summary or None, add_help=False)


def _description(summary: str, details: str) -> str | None:
    """A verb's --help text: its summary as a sentence, then its module's DETAILS."""
    if not summary:
        return None
    return f"{summary[0].upper()}{summary[1:]}.{' ' + details if details else ''}"


def parse(words: list[str]) -> argparse.Namespace:
    """`words` parsed, with the arguments of the verb they name alone."""
    if words and words[0] in HIDDEN_COMMANDS:
        return build_hidden_parser(words[0]).parse_args(words)
    if words and words[0] in COMMANDS:
        # Every word after it is the verb's, and the top-level usage names no verb: the
        # other verbs would appear in no message.
        return build_parser(words[0], listed=False).parse_args(words)
    named = next((word for word in words if word in COMMANDS), "")
    return build_parser(named).parse_args(words)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)

    def guarded() -> int:
        # Every verb's stdout, --help's and --version's too: see commands/stdout.py.
        return stdout.run_guarded(lambda: _parsed_and_run(words))

    return _without_collector(guarded) if words[:1] in (["symbolicate"], ["atos"]) else guarded()


def _parsed_and_run(words: list[str]) -> int:
    args = parse(words)
    module = {**COMMANDS, **HIDDEN_COMMANDS}[args.verb][0]
    return _run(lambda: command(module).run(args))


def _without_collector(run: Callable[[], int]) -> int:
    """`run` run with the garbage collector off, then back as it was (for a caller in
    the same process). A report is tens of thousands of parsed JSON objects and frames,
    none in a reference cycle, and the verb's modules are imported first: the collector's
    passes over them cost a run more than its report's reading; an atos run is mostly
    those imports."""
    collecting = gc.isenabled()
    gc.disable()
    # As the interpreter ends, its collector passes twice over every object still alive
    # (the modules', none of them garbage): 3 ms, a tenth of an atos run. Frozen, they
    # are not traversed, and are freed by their reference counts as modules are cleared.
    atexit.unregister(gc.freeze)  # registered once, however many runs a process makes
    atexit.register(gc.freeze)
    try:
        return run()
    finally:
        if collecting:
            gc.enable()


def _run(run: Callable[[], int]) -> int:
    """The command's exit status, under the one error policy (stdout's in commands/stdout.py)."""
    try:
        return run()
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
