"""Time-stamped empty files: "this was true at mtime", expiring after a TTL.

Used for the negative cache (a UUID no server has) and for servers that keep failing.
Imported on the helper's hot path: built-ins only.
"""

import os
import time

from dsymfind import atomic


def fresh(path: str, ttl: float) -> bool:
    """Whether the marker exists and is younger than `ttl` seconds."""
    return time_left(path, ttl) is not None


def time_left(path: str, ttl: float) -> float | None:
    """Seconds until the marker expires; None when it is missing or expired."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        return None
    return ttl - age if 0 <= age < ttl else None


def mark(path: str) -> None:
    """Create or refresh the marker; best effort (a lost marker costs a request)."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.utime(path)
    except OSError:
        pass


def clear(path: str) -> None:
    atomic.unlink_quietly(path)
