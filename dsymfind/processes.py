"""Whether the process a record names (a download's, a temporary file's) still exists, and
ending a child's whole process group."""

from __future__ import annotations

import contextlib
import os
import signal


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
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
        os.killpg(pid, signal.SIGKILL)
