"""Processes of dsymfind's own: starting the detached downloader (and the search-path
walker), whether the process a record names still exists, and ending a child's whole
process group.

A detached child re-invokes dsymfind's own entry point with a hidden verb, in a new
session with stdin, stdout and stderr on /dev/null: LLDB reads the helper's stdout after
the helper exits, and kills only the helper's pid, so the downloader must neither hold
that output open nor share the helper's fate. A spawned process (posix_spawn, else
subprocess) rather than a double fork, which HTTPie's authors found unreliable on macOS.

The child inherits the helper's environment, which is lldb's: a PYTHONHOME or PYTHONPATH
meant for another Python would kill it before any dsymfind code runs, and the helper
would wait for a download that never starts. So it runs the same interpreter isolated
(-I: every PYTHON* variable ignored; -S: no site), and a one-line bootstrap gives it
the helper's own sys.path. Flags rather than a cleaned environment: no list of variables
to keep up to date, the variables server headers refer to (`${VAR}`) stay, and the
child imports dsymfind from exactly where the helper did, whether the helper came
through the launcher (macos/launcher.py) or the console script.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # the helper's miss path imports this module: no typing import
if TYPE_CHECKING:
    from collections.abc import Callable

DOWNLOAD_VERB = "_download"
# The downloader's flags, which commands/download.py declares for the hidden parser.
IGNORE_NEGATIVE_CACHE_FLAG = "--ignore-negative-cache"
COPY_EXECUTABLE_FLAG = "--copy-executable"
# When the helper that starts it answers at the latest (seconds since the epoch): a new dSYM
# is linked by then, its sources checked out or not (fetch/downloader.py).
ANSWER_BY_FLAG = "--answer-by"
# The descriptor the downloader closes when its record is final (fetch/miss.py waits on it).
TELL_FLAG = "--tell-fd"
REFRESH_VERB = "_refresh"


def spawn_downloader(
    uuid: str,
    *,
    ignore_negative_cache: bool,
    copy_executable: bool,
    answer_by: float,
    tell: int | None = None,
) -> int:
    """Start a downloader for `uuid` for a helper that answers by `answer_by` (time.time());
    returns its pid. `tell`: the write end of a pipe the downloader closes once its record
    is final, passed under the same number."""
    command = downloader_words(
        uuid,
        ignore_negative_cache=ignore_negative_cache,
        copy_executable=copy_executable,
        answer_by=answer_by,
        tell=tell,
    )
    return _detached(command, () if tell is None else (tell,), _DOWNLOADER_ENTRY)


def downloader_words(
    uuid: str,
    *,
    ignore_negative_cache: bool,
    copy_executable: bool,
    answer_by: float,
    tell: int | None = None,
) -> list[str]:
    """The downloader's command line (fetch/downloader.py's main reads it)."""
    command = [DOWNLOAD_VERB, uuid, ANSWER_BY_FLAG, f"{answer_by:.3f}"]
    if ignore_negative_cache:
        command.append(IGNORE_NEGATIVE_CACHE_FLAG)
    if copy_executable:
        command.append(COPY_EXECUTABLE_FLAG)
    if tell is not None:
        command += [TELL_FLAG, str(tell)]
    return command


def spawn_refresher(root: str) -> int:
    """Start a walk of the search path `root` that did not fit a helper's deadline."""
    return _detached([REFRESH_VERB, root])


# The child's entry point: dsymfind's command line, or the downloader's own reader of the
# words above (no argparse: a tenth of the downloader's start-up).
_COMMAND_LINE_ENTRY = "dsymfind.main"
_DOWNLOADER_ENTRY = "dsymfind.fetch.downloader"


def _detached(
    arguments: list[str], keep: tuple[int, ...] = (), entry: str = _COMMAND_LINE_ENTRY
) -> int:
    """Start `arguments` detached; `keep`: descriptors the child gets under their numbers;
    `entry`: the module whose main(words) the child runs.

    posix_spawn where the platform has it, since a waiting helper starts its downloader on
    its critical path: subprocess (and the re, enum, threading and selectors it imports) is
    about 10 ms of a cold miss before the downloader can even start.
    """
    command = [sys.executable, "-I", "-S", "-c", _bootstrap(entry), *arguments]
    spawn = getattr(os, "posix_spawn", None)
    if spawn is not None:
        try:
            return _spawned(spawn, command, keep)
        except NotImplementedError:  # no setsid for posix_spawn here
            pass
    # Here, not above: main.py reads the verb names above for every command it parses.
    import subprocess

    child = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        pass_fds=keep,
        cwd="/",
    )
    return child.pid


def _spawned(spawn: Callable[..., int], command: list[str], keep: tuple[int, ...]) -> int:
    """What subprocess.Popen does above, with posix_spawn: stdio on /dev/null, a session of
    its own, no descriptor but `keep` inherited (the bootstrap moves to "/" itself)."""
    actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable() if fd not in keep]
    for fd in keep:
        os.set_inheritable(fd, True)  # this process starts no other child meanwhile
    try:
        return spawn(command[0], command, os.environ, file_actions=actions, setsid=True)
    finally:
        for fd in keep:
            os.set_inheritable(fd, False)


def _inheritable() -> list[int]:
    """This process's descriptors above stdio that a child would inherit (lldb's, say)."""
    try:
        listed = os.listdir("/dev/fd")
    except OSError:
        listed = []
    found = []
    for name in listed:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:
                pass  # the listing's own descriptor, closed since
    return found


def _bootstrap(entry: str) -> str:
    """The child's code: this process's import folders, then `entry`'s main.

    Relative entries (the working folder) are left out: the helper runs in the caller's
    working folder, and nothing must be imported from there.
    """
    folders = [folder for folder in sys.path if os.path.isabs(folder)]
    return (
        f"import os, sys\nos.chdir('/')\nsys.path[:] = {folders!a}\n"
        f"from {entry} import main\nsys.exit(main(sys.argv[1:]))\n"
    )


def alive(pid: object) -> bool:
    """Whether a process with this id exists (anything but a positive int: no)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # exists, owned by someone else
    except (OSError, OverflowError):
        return False  # gone, or an id no process can have
    return True


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (a child started in a session of its own,
    not reaped yet): it and everything it started end at once."""
    import signal  # here: the helper's miss path imports this module, and signal loads enum

    try:  # noqa: SIM105 - contextlib is one import more on the helper's miss path
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # gone already
