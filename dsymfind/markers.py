"""Time-stamped files: "this was true at mtime", expiring after a TTL.

Used for the negative cache (a UUID no server has; its content, which says where the
servers were asked, is cache/negative.py's) and for servers that keep failing. Imported
on the helper's hot path: built-ins only, and a marker is judged by one stat.
"""

import time

from dsymfind import _bare_os, atomic


def fresh(path: str, ttl: float) -> bool:
    """Whether the marker exists and is younger than `ttl` seconds."""
    return time_left(path, ttl) is not None


def time_left(path: str, ttl: float) -> float | None:
    """Seconds until the marker expires; None when it is missing or expired."""
    try:
        age = time.time() - _bare_os.stat(path).st_mtime
    except OSError:
        return None
    return ttl - age if 0 <= age < ttl else None


def mark(path: str) -> None:
    """Create or refresh the marker; best effort (a lost marker costs a request)."""
    try:
        _bare_os.makedirs(_bare_os.dirname(path), mode=0o700, exist_ok=True)
        _bare_os.close(
            _bare_os.open(path, _bare_os.O_WRONLY | _bare_os.O_CREAT | _bare_os.O_CLOEXEC, 0o600)
        )
        _bare_os.utime(path)
    except OSError:
        pass


def clear(path: str) -> None:
    atomic.unlink_quietly(path)
