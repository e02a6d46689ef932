"""`dsymForUUID`: the DebugSymbols shell-command helper.

The contract (docs/helper-contract.md): whatever argv and environment arrive,
print one XML plist on stdout, nothing on stderr, exit 0. The hit path (a remembered
answer) imports only built-ins and dsymfind's light modules; everything else loads on
a miss or an error.
"""

import sys
import time

from dsymfind import _bare_os, _plist, debugsymbols, paths, settings
from dsymfind.errors import DsymfindError
from dsymfind.uuids import normalize_uuid, uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import NoReturn

    from dsymfind.debugsymbols import Answer
    from dsymfind.local_lookup import Lookup

    Document = dict[str, Answer]

KNOWN_FLAGS = frozenset({"--ignoreNegativeCache", "--copyExecutable"})
# The only argv that makes the helper something else: the login agent's resident downloader
# (fetch/resident.py), started by launchd through this very launcher so that it runs on the
# helper's interpreter and import folders. No caller of a DebugSymbols helper sends it.
RESIDENT_AGENT_ARGS = ["--resident-downloader"]
# No longer string names a file: stat() refuses a path of PATH_MAX bytes or more (4096 on
# Linux, 1024 on macOS), and a string has at least as many bytes as characters.
MAX_PATH_CHARS = 4096


class Request:
    """What the caller asked for: a UUID, or a file whose slices' UUIDs to look up."""

    __slots__ = ("flags", "path", "uuid")

    def __init__(self, flags: frozenset[str], uuid: str | None, path: str | None) -> None:
        self.flags, self.uuid, self.path = flags, uuid, path

    @property
    def key(self) -> str:
        return self.uuid or self.path or ""


def main() -> "NoReturn":
    """The console entry point: answers, then ends the process at once (_end_process),
    with status 0 whatever happened (a Ctrl-C while writing, say)."""
    if sys.argv[1:] == RESIDENT_AGENT_ARGS:
        from dsymfind.fetch.downloader import serve_as_agent

        sys.exit(serve_as_agent(_bare_os.current_environ()))
    try:
        run()
    finally:
        _end_process()


def run() -> int:
    """Answers sys.argv on stdout, nothing else on it or on stderr; the exit status (0).
    Returns, unlike main."""
    started = time.monotonic()
    _silence_stray_output()
    _bare_os.umask(paths.PRIVATE_UMASK)
    document = respond(sys.argv[1:], _bare_os.current_environ(), started=started)
    _write_stdout(document)
    return 0


def respond(args: "Sequence[str]", env: "Mapping[str, str]", *, started: float) -> bytes:
    """The plist for `args`; never raises. The deadline counts from `started` (monotonic)."""
    key = args[-1] if args else ""
    try:
        request = parse_request(args)
        key = request.key
        if env.get(paths.CHAINED_RUN_ENV):
            raise DsymfindError(
                "run by a helper that dsymfind's own download chains to: not looked up again"
            )
        current = settings.load(env)
        return _plist.render(answer(request, current, deadline=started + current["timeout"]))
    except DsymfindError as exc:
        return _error_document(key, str(exc))
    except BaseException as exc:  # noqa: BLE001 - the contract: a plist and exit 0, whatever happened
        return _error_document(key, _report_internal_error(exc, env))


def parse_request(args: "Sequence[str]") -> Request:
    """Every caller's argv: known and unknown flags anywhere, a UUID or a (space-split) path.

    The last word that is not a flag is the key. LLDB splits a path with spaces into
    several words, and an unknown flag may carry a value, so a path is the longest
    tail of the words that names an existing file.
    """
    flags = frozenset(a for a in args if a in KNOWN_FLAGS)
    words = [a for a in args if not a.startswith("-")]
    if not words:
        raise DsymfindError("no UUID or file given")
    uuid = normalize_uuid(words[-1])
    if uuid is not None:
        return Request(flags, uuid, None)
    path = _longest_existing_tail(words)
    if path is None:
        raise DsymfindError(f"not a UUID or an existing file: {words[-1]!r}")
    return Request(flags, None, _bare_os.abspath(path))


def _longest_existing_tail(words: "Sequence[str]") -> str | None:
    """The longest tail of `words`, joined with spaces, that names an existing file.

    Only tails short enough to be a path are tried: argv may hold 1 MiB of words, and
    joining and stat-ing every tail of those is quadratic (minutes).
    """
    for start in range(_first_possible_start(words), len(words)):
        candidate = " ".join(words[start:])
        if _bare_os.exists(candidate):
            return candidate
    return None


def _first_possible_start(words: "Sequence[str]") -> int:
    """Where the longest tail that fits in MAX_PATH_CHARS begins."""
    start, length = len(words), -1  # no space before the first word
    while start > 0:
        length += len(words[start - 1]) + 1
        if length > MAX_PATH_CHARS:
            break
        start -= 1
    return start


def answer(request: Request, current: "settings.Settings", *, deadline: float | None) -> "Document":
    """Local sources first; with a deadline, the servers behind them (None: local only)."""
    from dsymfind.local_lookup import Lookup
    from dsymfind.permissions import refuse_unsafe

    # The configured spelling may pass through a symlink: only the checked path is used.
    lookup = Lookup(current, deadline=deadline, cache_root=refuse_unsafe(current["cache_dir"]))
    try:
        if request.uuid is not None:
            found = _find(lookup, request, request.uuid, deadline)
            return {} if found is None else {request.uuid: _representable(found)}
        assert request.path is not None
        return _answer_file(lookup, request, request.path, deadline)
    finally:
        # Past here only the answer's rendering and writing: the removal's grace second
        # (cache/removal.py) covers them.
        lookup.let_go()


def _find(lookup: "Lookup", request: Request, uuid: str, deadline: float | None) -> "Answer | None":
    """The answer for `uuid`, its paths checked right before it is returned: by the lookup
    that found it (a remembered answer's stats, a new one's Mach-O read), or again after
    the miss path's wait."""
    found = lookup.find(uuid)  # a remembered answer first, then every local place
    copy_executable = "--copyExecutable" in request.flags or lookup.settings["copy_executables"]
    have_dsym = found is not None and debugsymbols.DSYM_PATH in found
    lacking = (
        found is None
        or (copy_executable and debugsymbols.SYMBOL_RICH_EXECUTABLE not in found)
        or (not have_dsym and _fetched_alone(lookup, found))
    )
    if lacking and deadline is not None and _worth_asking(lookup, request, uuid, have_dsym):
        found = _ask_servers(lookup, request, uuid, deadline, found, copy_executable)
    if found is None and (deadline is None or not lookup.settings["servers"]):
        # With servers, the downloader logs its own outcome; a negative-cache answer logs nothing.
        _logger(lookup.settings["log_file"]).info("%s: not found in %s", uuid, lookup.describe())
    return found


def _fetched_alone(lookup: "Lookup", found: "Answer | None") -> bool:
    """`found` is an executable the downloader fetched alone when no store had the dSYM:
    once that absence is forgotten (the negative cache's time), the dSYM is asked for
    again, so one published since wins. A system image recorded here has no dSYM to ask."""
    executable = None if found is None else found.get(debugsymbols.SYMBOL_RICH_EXECUTABLE)
    return isinstance(executable, str) and executable.startswith(lookup.cache.executables + "/")


def _ask_servers(
    lookup: "Lookup",
    request: Request,
    uuid: str,
    deadline: float,
    found: "Answer | None",
    copy_executable: bool,
) -> "Answer | None":
    """The miss path: what the servers bring by the deadline, else what was `found` here.

    `found` (a dSYM without its executable) is answered after a wait of up to the whole
    deadline: its entries are held against removal meanwhile, and its paths checked again
    before it is returned.
    """
    from dsymfind.fetch import miss

    if found is not None and not lookup.hold(found):
        found = None  # being removed, or gone: the servers may still have it
    try:
        fetched = miss.fetch_on_miss(
            lookup,
            uuid,
            deadline,
            ignore_negative_cache="--ignoreNegativeCache" in request.flags,
            copy_executable=copy_executable,
        )
    except DsymfindError:
        if found is None:
            raise
        fetched = None  # the dSYM answers even when its executable could not be had
    return _still_there(lookup, uuid, fetched or found)


def _still_there(lookup: "Lookup", uuid: str, found: "Answer | None") -> "Answer | None":
    """`found` when every path it names exists now; else what a local look finds now."""
    from dsymfind import answers

    if found is None or answers.missing(found) is None:
        return found
    found = lookup.find(uuid)
    return None if found is None or answers.missing(found) is not None else found


def _worth_asking(lookup: "Lookup", request: Request, uuid: str, have_dsym: bool) -> bool:
    """Servers are configured and the negative cache does not say no already.

    Checked here, before the miss path is imported: LLDB asks about hundreds of UUIDs
    nobody has, and that answer must cost no more than a hit.
    """
    current = lookup.settings
    if not current["servers"]:
        return False
    if "--ignoreNegativeCache" in request.flags:
        return True
    from dsymfind import markers

    # Under the fingerprint of the store settings: what other settings wrote is not looked at.
    negative = lookup.cache.negative_marker(
        current["stores_fingerprint"], uuid_hex(uuid), executable=have_dsym
    )
    return not markers.fresh(negative, current["negative_cache_ttl"])


def _answer_file(
    lookup: "Lookup", request: Request, path: str, deadline: float | None
) -> "Document":
    """One entry per slice UUID of the file; the file itself is the rich executable.

    A slice that fails (or is still downloading at the deadline) gets its own DBGError;
    the others are answered all the same. A later slice may wait for its download, so
    each answer is held against removal once found, and all are checked again at the end.
    """
    from dsymfind.apple import macho

    document: Document = {}
    for piece in macho.read_slices(path):
        if piece.uuid is None:
            continue
        try:
            found = _find(lookup, request, piece.uuid, deadline)
        except DsymfindError as exc:
            document[piece.uuid] = _representable({debugsymbols.ERROR: f"dsymfind: {exc}"})
            continue
        if found is not None and deadline is not None and not lookup.hold(found):
            found = lookup.find(piece.uuid)  # being removed meanwhile: what is there now
        if found is not None:
            document[piece.uuid] = _with_executable(found, path)
    for uuid, found in list(document.items()):
        if debugsymbols.ERROR not in found:
            again = _still_there(lookup, uuid, found)
            if again is None:
                del document[uuid]
            elif again is not found:
                document[uuid] = _with_executable(again, path)
    return document


def _with_executable(found: "Answer", path: str) -> "Answer":
    found.setdefault(debugsymbols.SYMBOL_RICH_EXECUTABLE, path)
    return _representable(found)


def _representable(found: "Answer") -> "Answer":
    """An answer XML can carry; a path with control characters or bad UTF-8 cannot be."""
    bad = [key for key, value in found.items() if not _plist.representable(value)]
    if bad:
        return {debugsymbols.ERROR: f"dsymfind: {bad[0]} is a path that a plist cannot carry"}
    return found


def _error_document(key: str, message: str) -> bytes:
    safe_key = key if _plist.representable(key) else repr(key)
    safe_message = message if _plist.representable(message) else repr(message)
    return _plist.render({safe_key: {debugsymbols.ERROR: f"dsymfind: {safe_message}"}})


def _report_internal_error(exc: BaseException, env: "Mapping[str, str]") -> str:
    try:
        from dsymfind.log import log_internal_error

        where = f"details in {log_internal_error(exc, env)}"
    except BaseException:  # noqa: BLE001 - an unusable log must not break the answer
        where = "and the log is unusable"
    return f"internal error ({type(exc).__name__}); {where}"


def _logger(log_file: str):  # type: ignore[no-untyped-def]
    from dsymfind.log import get_logger

    return get_logger(log_file)


def _silence_stray_output() -> None:
    """Older LLDB merges stderr into the plist: point fd 2 at /dev/null before anything runs.

    Python's own stdout goes there too: the answer is written to fd 1 directly, and
    anything else printed (a library's warning, a stray debugging line) would follow the
    plist and spoil it."""
    try:
        devnull = _bare_os.open(_bare_os.devnull, _bare_os.O_WRONLY)
        _bare_os.dup2(devnull, 2)
        _bare_os.close(devnull)
    except OSError:
        _bare_os.close(2)
    sys.stderr = open(_bare_os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr


def _end_process() -> "NoReturn":
    """Exits with status 0 without the interpreter's teardown.

    The answer went out through raw writes to fd 1, and whatever else the helper writes
    (a remembered answer, a marker, a log line) is closed or flushed by the code that
    wrote it. What is left, freeing every module and object one by one, is about 2 ms
    of CPU, more than a remembered hit's own work, and serves nobody. Python's buffered
    stdout (stderr's file since run() began) is flushed first, in case anything wrote to it.
    """
    try:  # noqa: SIM105 - contextlib is not loaded on the hit path
        sys.stdout.flush()  # /dev/null's file (run), unless silencing failed first
    except Exception:  # noqa: BLE001, S110 - nothing left to flush; the status stays 0
        pass
    _bare_os._exit(0)


def _write_stdout(document: bytes) -> None:
    view = memoryview(document)
    try:
        while view:
            view = view[_bare_os.write(1, view) :]
    except OSError:
        pass  # nobody is reading: nothing left to do
