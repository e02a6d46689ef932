"""Starting the detached downloader (and the search-path walker).

It re-invokes dsymfind's own entry point with a hidden verb, in a new session with
stdin, stdout and stderr on /dev/null: LLDB reads the helper's stdout after the helper
exits, and kills only the helper's pid, so the downloader must neither hold that
output open nor share the helper's fate. A subprocess rather than a double fork,
which HTTPie's authors found unreliable on macOS.
"""

from __future__ import annotations

import subprocess
import sys

DOWNLOAD_VERB = "_download"


REFRESH_VERB = "_refresh"


def spawn_downloader(uuid: str, *, ignore_negative_cache: bool, copy_executable: bool) -> int:
    """Start a downloader for `uuid`; returns its pid."""
    command = [DOWNLOAD_VERB, uuid]
    if ignore_negative_cache:
        command.append("--ignore-negative-cache")
    if copy_executable:
        command.append("--copy-executable")
    return _detached(command)


def spawn_refresher(root: str) -> int:
    """Start a walk of the search path `root` that did not fit a helper's deadline."""
    return _detached([REFRESH_VERB, root])


def _detached(arguments: list[str]) -> int:
    child = subprocess.Popen(
        [sys.executable, "-m", "dsymfind", *arguments],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        cwd="/",
    )
    return child.pid
