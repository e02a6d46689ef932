"""Another `dsymForUUID`, chained: `url = "command:/path/to/their/dsymForUUID [ARG...]"`.

A team's own helper (and whatever it reaches) keeps answering behind dsymfind: on a miss
the downloader runs it as LLDB runs the DBGShellCommands string, split on spaces without
quoting, `[program, *its arguments, *flags, UUID]`, never through a shell, with stdin
closed, stderr swallowed and stdout read up to ANSWER_MAX_BYTES. It runs in a process
group of its own, killed at the download deadline or on cancel.

Its answer names files on this machine. They are not copied: the fetcher verifies the
file named (fetch/fetcher.py) and the downloader links it in the cache's UUID tree in
place, as `dsymfind index` links a user's bundle, so the next lookup never runs the
helper again. An empty answer, or an entry holding only DBGError, is NotFound (the
negative cache may remember it); an answer that is not a plist, or names a file that is
missing, not a regular file or outside a .dSYM bundle, is WrongAnswer and linked nowhere.
"""

from __future__ import annotations

import os
import selectors
import stat
import subprocess
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dsymfind import debugsymbols, paths, processes
from dsymfind.errors import ConfigError, DsymfindError
from dsymfind.stores import layouts
from dsymfind.stores.base import Fetched, NotFound, Options, Terms, TransferError
from dsymfind.uuids import dashed, normalize_uuid

if TYPE_CHECKING:
    from dsymfind.stores.transfer import Session

SCHEME = "command"
# How a server's url of this kind is written, for messages.
URL_FORMS = ("command:/PATH/TO/dsymForUUID [ARG...]",)
SETTING_KEYS: tuple[str, ...] = ()
# A run is asked again from the start: there is nothing to continue.
RESUMABLE = False
# The key is the UUID's path in a file-mapped tree (the executable's with `.app`): the
# layout every kind understands, from which the UUID is read back (uuid_of_key).
DEFAULT_LAYOUT = layouts.NATIVE
CREDENTIALS_FIX = "run the helper by hand with a UUID and read what it prints"
# What `doctor` advises when a probe fails.
FAILURE_FIX = CREDENTIALS_FIX
# A plist answer for one UUID is a few hundred bytes; a helper printing more is broken.
ANSWER_MAX_BYTES = 1 << 20
# How often a run still going looks at the cancel flag: a cancelled candidate ends soon.
CANCEL_POLL = 0.1
# What DebugSymbols passes for the executable, and for an answer nobody may remember.
COPY_EXECUTABLE_FLAG = "--copyExecutable"
IGNORE_NEGATIVE_CACHE_FLAG = "--ignoreNegativeCache"
# A file dsymfind's own helper is started from holds this (its launcher, the console
# script): chaining to it would run it from itself, without end.
_OWN_HELPER_MARK = b"dsymfind.helper"
_HEAD_BYTES = 4096
_EXECUTABLE_SUFFIX = ".app"


class WrongAnswer(TransferError):
    """The helper answered, but not with a usable file: logged, never linked."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def check_location(where: str, url: str) -> str:
    words = words_of(url)
    if not words or not os.path.isabs(words[0]):
        raise ConfigError(f"{where}: a command: URL names a program by its absolute path: {url!r}")
    return location_of(words)


def location_of(words: list[str]) -> str:
    """The one spelling of the location running `words`: spaces between them are not kept."""
    return f"{SCHEME}:{' '.join(words)}"


def default_name(url: str) -> str:
    return program_of(url)


def read_settings(where: str, table: Mapping[str, object]) -> dict[str, object]:
    return {}


def open_reader(location: str, session: Session, options: Options) -> CommandReader:
    words = words_of(location)
    if is_own_helper(words[0]):
        raise DsymfindError(f"{words[0]} is dsymfind's own helper: chaining to it would loop")
    return CommandReader(location, words, options.ignore_negative_cache)


def words_of(location: str) -> list[str]:
    """The program a `command:` location names (the scheme's case aside) and its own
    arguments: the words LLDB would run, split on spaces without quoting."""
    return split_as_lldb_does(location.partition(":")[2])


def split_as_lldb_does(command_line: str) -> list[str]:
    """A DBGShellCommands string as LLDB runs it: words split on spaces, no quoting."""
    return [word for word in command_line.split(" ") if word]


def program_of(location: str) -> str:
    """The program a `command:` location runs."""
    words = words_of(location)
    return words[0] if words else ""


def is_own_helper(program: str) -> bool:
    """Whether `program` starts dsymfind's helper: a launcher or console script of ours."""
    try:
        # Without blocking, and only a regular file: a FIFO named there must not hang us.
        fd = os.open(os.path.realpath(program), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        return _OWN_HELPER_MARK in f.read(_HEAD_BYTES)


def uuid_of_key(key: str) -> tuple[str, bool]:
    """The UUID a native-layout key names, and whether the executable is wanted."""
    wants_executable = key.endswith(_EXECUTABLE_SUFFIX)
    digits = key.removesuffix(_EXECUTABLE_SUFFIX).replace("/", "")
    uuid = normalize_uuid(digits)
    if uuid is None:
        raise TransferError(f"{key!r} names no UUID", retryable=False)
    return dashed(uuid.replace("-", "")), wants_executable


class CommandReader:
    def __init__(self, location: str, words: list[str], ignore_negative_cache: bool) -> None:
        self.location, self.words, self.program = location, words, words[0]
        self.ignore_negative_cache = ignore_negative_cache

    def where(self, key: str) -> str:
        try:
            return f"{self.program} {uuid_of_key(key)[0]}"
        except TransferError:
            return f"{self.program} {key}"

    def argv(self, uuid: str, wants_executable: bool) -> list[str]:
        flags = [COPY_EXECUTABLE_FLAG] if wants_executable else []
        if self.ignore_negative_cache:
            flags.append(IGNORE_NEGATIVE_CACHE_FLAG)
        return [*self.words, *flags, uuid]

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        """The file the helper names, verified to exist where a bundle keeps it; nothing
        is written to `dest` (Fetched.in_place)."""
        uuid, wants_executable = uuid_of_key(key)
        where = self.where(key)
        output = run(self.argv(uuid, wants_executable), terms, where)
        entry = answer_entry(output, uuid, where)
        wanted = debugsymbols.SYMBOL_RICH_EXECUTABLE if wants_executable else debugsymbols.DSYM_PATH
        named = entry.get(wanted)
        if named is None:
            raise NotFound(f"{where}: {entry.get(debugsymbols.ERROR) or 'not found'}")
        path = checked_file(named, where, in_bundle=not wants_executable)
        return Fetched(where, os.path.getsize(path), None, in_place=path)


def run(argv: list[str], terms: Terms, where: str) -> bytes:
    """The helper's stdout; TransferError when it cannot start, says too much or is too
    slow (its process group is killed then, whatever it started)."""
    try:
        child = subprocess.Popen(
            argv,
            env={**os.environ, paths.CHAINED_RUN_ENV: "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise TransferError(
            f"{where}: cannot run ({exc.strerror or exc})", retryable=False
        ) from exc
    deadline = time.monotonic() + terms.limits.total_timeout
    try:
        output = _read_output(child, terms, deadline, where)
        child.wait(max(deadline - time.monotonic(), 0))
        return output
    except BaseException as exc:
        # Not reaped yet, so its group id is still its own: whatever it started ends too.
        processes.kill_group(child.pid)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise _too_slow(where, terms) from None
        raise
    finally:
        assert child.stdout is not None
        child.stdout.close()
        child.wait()


def _read_output(
    child: subprocess.Popen[bytes], terms: Terms, deadline: float, where: str
) -> bytes:
    """Everything it prints until it closes stdout or exits with nothing more to read,
    within the deadline and the bound."""
    assert child.stdout is not None
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _too_slow(where, terms)
            if terms.cancel is not None and terms.cancel.is_set():
                raise TransferError("cancelled", retryable=False)
            exited = child.poll() is not None
            if not selector.select(min(left, CANCEL_POLL)):
                if exited:
                    # Its answer is what it printed before it exited: a child it left
                    # running (`sleep 30 &`) may hold the pipe open, as LLDB, which reads
                    # a file once the helper exits, never notices.
                    return b"".join(chunks)
                continue
            chunk = os.read(child.stdout.fileno(), 65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > ANSWER_MAX_BYTES:
                raise WrongAnswer(f"{where}: printed over {ANSWER_MAX_BYTES} bytes")
            chunks.append(chunk)


def _too_slow(where: str, terms: Terms) -> TransferError:
    return TransferError(
        f"{where}: no answer within {terms.limits.total_timeout:g} s", retryable=True
    )


def answer_entry(output: bytes, uuid: str, where: str) -> dict[str, object]:
    """The answer's entry for `uuid` (its key in any case); empty when it has none."""
    from dsymfind.apple import plists

    try:
        answer = plists.loads(output)
    except plists.UnreadablePlist as exc:
        raise WrongAnswer(f"{where}: answered an {exc}") from None
    if not isinstance(answer, dict):
        raise WrongAnswer(f"{where}: answered a plist that is not a dictionary")
    for key, entry in answer.items():
        if isinstance(key, str) and normalize_uuid(key) == uuid:
            if not isinstance(entry, dict):
                raise WrongAnswer(f"{where}: its entry for {uuid} is not a dictionary")
            return entry
    return {}


def checked_file(named: object, where: str, *, in_bundle: bool) -> str:
    """The real path of a file an answer names: an existing regular file, and when
    `in_bundle` inside a .dSYM bundle; WrongAnswer otherwise."""
    from dsymfind.apple import bundle

    if not isinstance(named, str) or not os.path.isabs(named):
        raise WrongAnswer(f"{where}: named {named!r}, not an absolute path")
    path = os.path.realpath(named)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise WrongAnswer(
            f"{where}: named {named}, which cannot be read ({exc.strerror})"
        ) from None
    if not stat.S_ISREG(mode):
        raise WrongAnswer(f"{where}: named {named}, which is not a regular file")
    if in_bundle and bundle.bundle_of(path) is None:
        raise WrongAnswer(f"{where}: named {named}, which is not in a .dSYM bundle")
    return path
