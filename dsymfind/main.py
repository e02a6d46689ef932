"""`dsymfind`: the admin command line. Parses, dispatches, applies the one error policy."""

from __future__ import annotations

import gc
import os
import sys

from dsymfind import __version__, processes
from dsymfind.commands import stdout
from dsymfind.errors import DsymfindError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from dsymfind.argparsing import Parser
    from dsymfind.symbolicate.arguments import SymbolicateWords

    Verbs = argparse._SubParsersAction[Parser]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every verb's parser, or only the one of `only`: building all fifteen costs more
    than a quick command's own work. A parser of one verb hands any usage mistake on to
    the full one, so messages and --help stay the same."""
    from dsymfind.argparsing import OneVerbParser, Parser

    parser_class = Parser if only is None else OneVerbParser
    parser = parser_class(
        prog="dsymfind",
        description="Find, fetch and verify dSYMs for lldb, crash symbolication and ReportCrash.",
        epilog="The debugger-facing helper is the separate command dsymForUUID. "
        "Start with `dsymfind install` and `dsymfind doctor`; `dsymfind COMMAND --help` "
        "explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"dsymfind {__version__}")
    verbs = parser.add_subparsers(
        dest="verb", metavar="COMMAND", required=True, parser_class=parser_class
    )
    for name, add_verb in _VERB_PARSERS.items():
        if only is None or name == only:
            add_verb(verbs)
    return parser


def parse(words: list[str]) -> argparse.Namespace:
    """`words` parsed by the parser of their first word's verb, when it is one."""
    from dsymfind.argparsing import AskTheFullParser

    if words and words[0] in HIDDEN_VERBS:
        return build_hidden_parser().parse_args(words)
    if words and words[0] in _VERB_PARSERS:
        try:
            return build_parser(words[0]).parse_args(words)
        except AskTheFullParser:
            pass
    return build_parser().parse_args(words)


HIDDEN_VERBS = (processes.DOWNLOAD_VERB, processes.REFRESH_VERB)


def build_hidden_parser() -> argparse.ArgumentParser:
    """How the helper starts its detached downloader and walker (processes.py).

    A parser of their own, used only when argv starts with one of them: on the public
    parser they would be listed in every "invalid choice" error.
    """
    from dsymfind.argparsing import Parser

    parser = Parser(prog="dsymfind")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=Parser)
    download = verbs.add_parser(processes.DOWNLOAD_VERB)
    download.add_argument("uuid")
    download.add_argument(processes.IGNORE_NEGATIVE_CACHE_FLAG, action="store_true")
    download.add_argument(processes.COPY_EXECUTABLE_FLAG, action="store_true")
    download.add_argument(processes.ANSWER_BY_FLAG, type=float)
    verbs.add_parser(processes.REFRESH_VERB).add_argument("root")
    return parser


def _verb(verbs: Verbs, name: str, summary: str, details: str = "") -> argparse.ArgumentParser:
    return verbs.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}.{' ' + details if details else ''}",
    )


def _install_parser(verbs: Verbs) -> None:
    install = _verb(
        verbs,
        "install",
        "register dsymForUUID with DebugSymbols and install the launchd agent",
        "Sets DBGShellCommands to the installed dsymForUUID, appends the cache's UUID tree "
        "to DBGFileMappedPaths, keeps Spotlight on, and loads a launchd agent that runs "
        "`dsymfind gc` daily. What it changes is backed up; `dsymfind uninstall` restores it.",
    )
    install.add_argument(
        "--link",
        action="store_true",
        help="also symlink /usr/local/bin/dsymForUUID (the path crashlog.py and xnu macros use)",
    )
    install.add_argument(
        "--dry-run", action="store_true", help="print the defaults/launchctl commands, run none"
    )


def _uninstall_parser(verbs: Verbs) -> None:
    uninstall = _verb(
        verbs,
        "uninstall",
        "restore the DebugSymbols settings install changed and remove the launchd agent",
    )
    uninstall.add_argument(
        "--dry-run", action="store_true", help="print the defaults/launchctl commands, run none"
    )


def _doctor_parser(verbs: Verbs) -> None:
    _verb(
        verbs,
        "doctor",
        "check configuration, cache, servers and registration, and say how to fix problems",
        "Exit status 0 when everything is in order, 1 when something needs fixing.",
    )


def _index_parser(verbs: Verbs) -> None:
    index = _verb(
        verbs,
        "index",
        "publish local dSYM bundles (folders, Xcode archives, .zip files) in the cache",
        "Each bundle's DWARF files are verified with the Mach-O reader and linked into the "
        "cache's file-mapped UUID tree; zip files are unpacked into the cache first. "
        "Unchanged bundles are not read again. Default: Xcode's Archives and DerivedData.",
    )
    index.add_argument("paths", nargs="*", metavar="PATH", help="a folder, a .dSYM or a .zip")
    index.add_argument(
        "--source-map",
        action="append",
        default=[],
        metavar="BUILD=LOCAL",
        help="source path remapping written into new per-UUID plists (repeatable)",
    )


def _gc_parser(verbs: Verbs) -> None:
    gc = _verb(
        verbs,
        "gc",
        "evict least-recently-used downloads and remove dangling cache links",
        "Entries being downloaded or in use are skipped; nothing the cache did not create "
        "is touched. Defaults come from max_cache_size and max_unused_age in the config.",
    )
    gc.add_argument(
        "--max-size",
        metavar="SIZE",
        help="keep the cache under SIZE, e.g. 20GiB; 0 evicts every download not in use",
    )
    gc.add_argument("--max-age", metavar="DURATION", help="evict what was unused this long (30d)")
    gc.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")


def _check_parser(verbs: Verbs) -> None:
    check = _verb(
        verbs,
        "check",
        "verify every cache entry and link, and find what interrupted runs left",
        "Exit status 0 when the cache is valid (leftovers of interrupted runs are harmless: "
        "the next run for the same UUID clears them), 1 while anything invalid remains.",
    )
    check.add_argument(
        "--repair", action="store_true", help="remove what is invalid and clear the leftovers"
    )


def _status_parser(verbs: Verbs) -> None:
    status = _verb(
        verbs,
        "status",
        "show the cache: location, size, entries, negative cache and downloads in flight",
    )
    status.add_argument("--json", action="store_true", help="machine-readable output")


def _forget_parser(verbs: Verbs) -> None:
    forget = _verb(
        verbs,
        "forget",
        "drop the negative cache's entries of UUIDs, so that lookups ask the servers again",
        "With --all, every entry and every server's backoff. A Mach-O FILE stands for the "
        "UUIDs of all its slices. Exit status 0, whatever the negative cache held.",
    )
    forget.add_argument(
        "uuids",
        nargs="*",
        metavar="UUID|FILE",
        help="a UUID (in any case, dashed or not) or a Mach-O file",
    )
    forget.add_argument(
        "--all",
        action="store_true",
        dest="everything",
        help="every negative entry, and every server's backoff",
    )


def _fetch_parser(verbs: Verbs) -> None:
    fetch = _verb(
        verbs,
        "fetch",
        "fetch dSYMs from the configured servers in the foreground",
        "A Mach-O FILE stands for the UUIDs of all its slices. "
        "Exit status 0 when every UUID is in the cache afterwards.",
    )
    fetch.add_argument(
        "uuids",
        nargs="+",
        metavar="UUID|FILE",
        help="a UUID (in any case, dashed or not) or a Mach-O file",
    )
    _add_fetch_options(fetch)


def _prefetch_parser(verbs: Verbs) -> None:
    prefetch = _verb(
        verbs,
        "prefetch",
        "fetch the dSYM of every binary image in Apple crash reports",
        "Reads .ips (JSON) and classic .crash (text) reports, told apart by content, and "
        "fetches each UUID once, concurrently. Apple's system images (the OS's programs "
        "and libraries: under /System/, /usr/lib/, /usr/libexec/, /bin/, /sbin/, /usr/bin/, "
        "/usr/sbin/, /Library/Apple/, or in the dyld shared cache) are skipped and counted. "
        "Exit status 0 when every other image has its dSYM.",
    )
    prefetch.add_argument("reports", nargs="+", metavar="CRASHLOG", help="an .ips or .crash file")
    prefetch.add_argument(
        "--all",
        action="store_true",
        dest="include_apple",
        help="fetch Apple's system images too",
    )
    _add_fetch_options(prefetch)


def _symbolicate_parser(verbs: Verbs) -> None:
    symbolicate = _verb(
        verbs,
        "symbolicate",
        "turn crash reports or addresses into function names, inlined frames and source lines",
        "Reads .ips, .crash and MetricKit reports (told apart by content) and writes each "
        "back in its own form, or as JSON. The dSYMs come from this "
        "machine, else the servers, each UUID once. With --uuid or --image, ADDR... are "
        "addresses, printed as atos -i does. With several reports each status line names "
        "its report and a summary line ends the run. Exit status 0 when every frame "
        "outside Apple's system images was symbolicated; 1 when a report, the "
        "configuration (credentials a store refused included) or the output could not be "
        "used; 2 when everything was written but some frames were left bare.",
    )
    symbolicate.add_argument("inputs", nargs="+", metavar="REPORT|ADDR", help="a report file")
    symbolicate.add_argument(
        "--format",
        choices=("ips", "crash", "metrickit", "json"),
        dest="form",
        help="the report's own form (the default) or JSON for scripts",
    )
    symbolicate.add_argument(
        "-o", "--output", metavar="FILE|DIR", help="where to write (several reports: a folder)"
    )
    symbolicate.add_argument("--offline", action="store_true", help="ask no server")
    symbolicate.add_argument(
        "--ignore-negative-cache",
        action="store_true",
        help="ask even the servers that recently failed (UUIDs they recently lacked are "
        "always asked again)",
    )
    threads = symbolicate.add_mutually_exclusive_group()
    threads.add_argument(
        "--crashed-only",
        action="store_true",
        help="only the crashed thread (and an .ips's last exception backtrace)",
    )
    threads.add_argument(
        "--all-threads", action="store_true", help="every thread: the default, kept for scripts"
    )
    image = symbolicate.add_mutually_exclusive_group()
    image.add_argument("--uuid", metavar="UUID", help="the image of the addresses")
    image.add_argument("--image", metavar="FILE", help="a Mach-O file: the image of the addresses")
    symbolicate.add_argument("--arch", metavar="ARCH", help="the slice of --image")
    symbolicate.add_argument(
        "--load-address", metavar="ADDR", help="where the image was loaded (with --uuid/--image)"
    )


def _publish_parser(verbs: Verbs) -> None:
    publish = _verb(
        verbs,
        "publish",
        "publish dSYMs, PE files and PDBs into a symbol store (a folder or an S3 bucket)",
        "Every input is verified first; a universal file becomes one thin object per UUID. "
        "Create-only: a key holding the same bytes is `exists`, other bytes a `conflict` "
        "(left alone, exit status 1). A manifest under _manifests/ is written last.",
    )
    publish.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a .dSYM, folder, .xcarchive, zip of dSYMs, DWARF file, PE file or PDB",
    )
    publish.add_argument(
        "--to",
        required=True,
        metavar="NAME|DIR|s3://BUCKET/PREFIX",
        help="a configured server's name, a folder, or an S3 location",
    )
    publish.add_argument(
        "--layout",
        action="append",
        default=[],
        dest="layouts",
        metavar="LAYOUT",
        help="native, symstore, symstore_index2, ssqp or unified (repeatable; "
        "default: the server's layout, else unified)",
    )
    publish.add_argument(
        "--executables",
        action="store_true",
        help="also publish the binaries under an .xcarchive's Products/ and named Mach-O binaries",
    )
    publish.add_argument(
        "--source-root",
        metavar="DIR",
        help="the build's source root, recorded with its git commit and remote (default: "
        "the top of the git repository publish runs in, when the DWARF's paths lie below it)",
    )
    publish.add_argument(
        "--dry-run", action="store_true", help="say what would happen, write nothing"
    )
    publish.add_argument("--json", action="store_true", help="machine-readable output")
    publish.add_argument(
        "--verbose", action="store_true", help="also each object's key, and the files skipped"
    )
    publish.add_argument("--endpoint-url", metavar="URL", help="S3: the engine's URL (not AWS)")
    publish.add_argument("--region", metavar="REGION", help="S3: the bucket's region")
    publish.add_argument("--profile", metavar="PROFILE", help="S3: an AWS configuration profile")


def _lookup_parser(verbs: Verbs) -> None:
    lookup = _verb(verbs, "lookup", "answer like the dsymForUUID helper, for people")
    lookup.add_argument("targets", nargs="+", metavar="UUID|FILE", help="a UUID or a Mach-O file")
    lookup.add_argument("--plist", action="store_true", help="print the helper's plist instead")


def _id_parser(verbs: Verbs) -> None:
    ident = _verb(
        verbs,
        "id",
        "show the identity of a Mach-O, PE or PDB file or a .dSYM bundle, and its server keys",
    )
    ident.add_argument("files", nargs="+", metavar="FILE", help="a file, or a .dSYM bundle")
    ident.add_argument("--json", action="store_true", help="machine-readable output")


def _pdb_parser(verbs: Verbs) -> None:
    pdb = _verb(
        verbs,
        "pdb",
        "find or fetch the matching PDB of Windows executables and DLLs",
        "Prints one PDB path per FILE. Exit status 0 when all are found, 1 otherwise.",
    )
    pdb.add_argument("files", nargs="+", metavar="FILE", help="a PE file (.exe, .dll)")
    pdb.add_argument(
        "--symbol-path",
        metavar="PATH",
        help="srv*DOWNSTREAM*URL;cache*DIR;DIR... (default: symbol_path, then _NT_SYMBOL_PATH)",
    )
    pdb.add_argument(
        "--ignore-negative-cache",
        action="store_true",
        help="ask the servers again, even those that recently lacked the PDB or failed",
    )


def _sources_parser(verbs: Verbs) -> None:
    shown = _verb(
        verbs,
        "sources",
        "show where a cached dSYM's sources are checked out for lldb, or why they are not",
        "Exit status 0 with a mapping, 1 without.",
    )
    shown.add_argument("uuid", metavar="UUID")


def _config_parser(verbs: Verbs) -> None:
    config = _verb(verbs, "config", "show the effective configuration and its origins")
    config.add_argument("--json", action="store_true", help="machine-readable output")


def _add_fetch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ignore-negative-cache",
        action="store_true",
        help="ask the servers again, even about UUIDs they recently lacked, and even those "
        "that recently failed",
    )
    parser.add_argument(
        "--executables",
        action="store_true",
        help="fetch each UUID's executable too (as the copy_executables setting does)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable results")


# The public verbs, in the order --help lists them.
_VERB_PARSERS: dict[str, Callable[[Verbs], None]] = {
    "install": _install_parser,
    "uninstall": _uninstall_parser,
    "doctor": _doctor_parser,
    "index": _index_parser,
    "gc": _gc_parser,
    "check": _check_parser,
    "publish": _publish_parser,
    "status": _status_parser,
    "forget": _forget_parser,
    "fetch": _fetch_parser,
    "prefetch": _prefetch_parser,
    "symbolicate": _symbolicate_parser,
    "lookup": _lookup_parser,
    "id": _id_parser,
    "pdb": _pdb_parser,
    "sources": _sources_parser,
    "config": _config_parser,
}


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)

    def guarded() -> int:
        # Every verb's stdout, --help's and --version's too: see commands/stdout.py.
        return stdout.run_guarded(lambda: _parsed_and_run(words))

    return _without_collector(guarded) if words[:1] == ["symbolicate"] else guarded()


def _parsed_and_run(words: list[str]) -> int:
    if words[:1] == ["symbolicate"]:
        return _symbolicate_words(words)
    args = parse(words)
    return _run(lambda: _dispatch(args))


def _symbolicate_words(words: list[str]) -> int:
    from dsymfind.symbolicate import arguments

    plain = arguments.read(words)
    if plain is not None:
        return _run(lambda: _symbolicate(plain))
    args = parse(words)
    return _run(lambda: _dispatch(args))


def _without_collector(command: Callable[[], int]) -> int:
    """`command` run with the garbage collector off, then back as it was (for a caller in
    the same process). A report is tens of thousands of parsed JSON objects and frames,
    none in a reference cycle, and the verb's modules are imported first: the collector's
    passes over them cost a run more than its report's reading."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return command()
    finally:
        if collecting:
            gc.enable()


def _run(command: Callable[[], int]) -> int:
    """The command's exit status, under the one error policy (stdout's in commands/stdout.py)."""
    try:
        return command()
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
    from dsymfind.commands.background import download

    return download(
        args.uuid,
        ignore_negative_cache=args.ignore_negative_cache,
        copy_executable=args.copy_executable,
        answer_by=args.answer_by,
    )


# Each verb: a typed call of its command, whose module is imported only when it runs.


def _install(args: argparse.Namespace) -> int:
    from dsymfind.commands.install import install

    return install(link=args.link, dry_run=args.dry_run)


def _uninstall(args: argparse.Namespace) -> int:
    from dsymfind.commands.install import uninstall

    return uninstall(dry_run=args.dry_run)


def _doctor(args: argparse.Namespace) -> int:
    from dsymfind.commands.doctor import doctor

    return doctor()


def _index(args: argparse.Namespace) -> int:
    from dsymfind.commands.index import index

    return index(args.paths, source_maps=args.source_map)


def _publish(args: argparse.Namespace) -> int:
    from dsymfind.commands.publish import publish

    given = {"endpoint_url": args.endpoint_url, "region": args.region, "profile": args.profile}
    return publish(
        args.paths,
        to=args.to,
        layout_names=args.layouts,
        executables=args.executables,
        dry_run=args.dry_run,
        as_json=args.json,
        connection={key: value for key, value in given.items() if value is not None},
        source_root=args.source_root,
        verbose=args.verbose,
    )


def _gc(args: argparse.Namespace) -> int:
    from dsymfind.commands.gc import gc

    return gc(max_size=args.max_size, max_age=args.max_age, dry_run=args.dry_run)


def _check(args: argparse.Namespace) -> int:
    from dsymfind.commands.check import check

    return check(repair=args.repair)


def _status(args: argparse.Namespace) -> int:
    from dsymfind.commands.status import status

    return status(as_json=args.json)


def _forget(args: argparse.Namespace) -> int:
    from dsymfind.commands.forget import forget

    return forget(args.uuids, everything=args.everything)


def _fetch(args: argparse.Namespace) -> int:
    from dsymfind.commands.fetch import fetch

    return fetch(
        args.uuids,
        ignore_negative_cache=args.ignore_negative_cache,
        as_json=args.json,
        executables=args.executables,
    )


def _prefetch(args: argparse.Namespace) -> int:
    from dsymfind.commands.prefetch import prefetch

    return prefetch(
        args.reports,
        ignore_negative_cache=args.ignore_negative_cache,
        as_json=args.json,
        include_apple=args.include_apple,
        executables=args.executables,
    )


def _symbolicate(args: argparse.Namespace | SymbolicateWords) -> int:
    from dsymfind.commands import symbolicate as command

    if args.uuid is None and args.image is None:
        if args.load_address is not None or args.arch is not None:
            raise DsymfindError("--load-address and --arch go with --uuid or --image")
        request = command.ReportsRequest(
            args.inputs,
            args.form,
            args.output,
            args.offline,
            args.crashed_only,
            ignore_negative_cache=args.ignore_negative_cache,
        )
        return command.symbolicate(request)
    if args.load_address is None:
        raise DsymfindError("addresses need --load-address, where the image was loaded")
    return command.symbolicate_addresses(
        command.AddressesRequest(
            args.inputs,
            args.load_address,
            args.uuid,
            args.image,
            args.arch,
            args.offline,
            ignore_negative_cache=args.ignore_negative_cache,
        )
    )


def _lookup(args: argparse.Namespace) -> int:
    from dsymfind.commands.lookup import lookup

    return lookup(args.targets, as_plist=args.plist)


def _id(args: argparse.Namespace) -> int:
    from dsymfind.commands.id import ident

    return ident(args.files, as_json=args.json)


def _pdb(args: argparse.Namespace) -> int:
    from dsymfind.commands.pdb import pdb

    return pdb(
        args.files, symbol_path=args.symbol_path, ignore_negative_cache=args.ignore_negative_cache
    )


def _sources(args: argparse.Namespace) -> int:
    from dsymfind.commands.sources import sources

    return sources(args.uuid)


def _config(args: argparse.Namespace) -> int:
    from dsymfind.commands.config import show_config

    return show_config(as_json=args.json)


def _refresh(args: argparse.Namespace) -> int:
    from dsymfind.commands.background import refresh_search_path

    return refresh_search_path(args.root)


_VERBS: dict[str, Callable[[argparse.Namespace], int]] = {
    "install": _install,
    "uninstall": _uninstall,
    "doctor": _doctor,
    "index": _index,
    "publish": _publish,
    "gc": _gc,
    "check": _check,
    "status": _status,
    "forget": _forget,
    "fetch": _fetch,
    "prefetch": _prefetch,
    "symbolicate": _symbolicate,
    "lookup": _lookup,
    "id": _id,
    "pdb": _pdb,
    "config": _config,
    "sources": _sources,
    processes.DOWNLOAD_VERB: _download,
    processes.REFRESH_VERB: _refresh,
}


def _dispatch(args: argparse.Namespace) -> int:
    return _VERBS[args.verb](args)
