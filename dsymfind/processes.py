"""Whether the process a record names (a download's, a temporary file's) still exists."""

from __future__ import annotations

import os


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
