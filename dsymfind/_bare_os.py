"""What the helper's hit path needs of `os`, from the built-in posix module.

The launcher runs Python with -I -S: without `site`, nothing has imported `os`, and
importing it (with posixpath, genericpath, stat and _collections_abc) costs about
1.5 ms of CPU, a tenth of a remembered hit. The hot-path modules (tests/test_import_cost.py)
use this instead; the rest of the package keeps `os`.

The calls are posix's own, the very functions `os` re-exports. The path functions
behave as os.path's do for str paths (normpath and realpath by posixpath's algorithms);
a rarely taken, intricate branch (expanduser of `~`, makedirs of missing parents)
imports `os` inside the function, so only that branch pays for it.
"""

import sys
from _stat import S_ISDIR, S_ISLNK, S_ISREG
from posix import (
    O_CLOEXEC,
    O_CREAT,
    O_DIRECTORY,
    O_EXCL,
    O_NOFOLLOW,
    O_NONBLOCK,
    O_RDONLY,
    O_TRUNC,
    O_WRONLY,
    _exit,
    close,
    dup2,
    fstat,
    fsync,
    getcwd,
    getpid,
    getuid,
    listdir,
    lstat,
    mkdir,
    open,
    read,
    readlink,
    replace,
    scandir,
    stat,
    stat_result,
    umask,
    unlink,
    utime,
    write,
)
from posix import environ as _environ_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "O_CLOEXEC",
    "O_CREAT",
    "O_DIRECTORY",
    "O_EXCL",
    "O_NOFOLLOW",
    "O_NONBLOCK",
    "O_RDONLY",
    "O_TRUNC",
    "O_WRONLY",
    "_exit",
    "abspath",
    "basename",
    "close",
    "current_environ",
    "devnull",
    "dirname",
    "dup2",
    "exists",
    "expanduser",
    "fstat",
    "fsync",
    "getpid",
    "getuid",
    "isabs",
    "isdir",
    "islink",
    "join",
    "lexists",
    "listdir",
    "lstat",
    "makedirs",
    "mkdir",
    "normpath",
    "open",
    "read",
    "readlink",
    "realpath",
    "replace",
    "scandir",
    "sep",
    "stat",
    "stat_result",
    "umask",
    "unlink",
    "utime",
    "write",
]

sep = "/"
devnull = "/dev/null"


def _decoded(value: bytes) -> str:
    # As os.environ decodes on POSIX: an undecodable byte survives as a surrogate.
    return value.decode(sys.getfilesystemencoding(), "surrogateescape")


def current_environ() -> dict[str, str]:
    """os.environ as it is now: posix.environ is the dict os.environ writes through to, so
    what a caller (or a test's monkeypatch) set there is seen too."""
    return {_decoded(name): _decoded(value) for name, value in _environ_bytes.items()}


def join(first: str, *rest: str) -> str:
    path = first
    for part in rest:
        if part.startswith(sep):
            path = part
        elif not path or path.endswith(sep):
            path += part
        else:
            path += sep + part
    return path


def dirname(path: str) -> str:
    head = path[: path.rfind(sep) + 1]
    if head and head != sep * len(head):
        head = head.rstrip(sep)
    return head


def basename(path: str) -> str:
    return path[path.rfind(sep) + 1 :]


def isabs(path: str) -> bool:
    return path.startswith(sep)


def normpath(path: str) -> str:
    if not path:
        return "."
    # POSIX lets an implementation give exactly two leading slashes a meaning of its own.
    leading = 2 if path.startswith("//") and not path.startswith("///") else int(isabs(path))
    kept: list[str] = []
    for part in path.split(sep):
        if part in ("", "."):
            continue
        if part != ".." or (not leading and not kept) or (kept and kept[-1] == ".."):
            kept.append(part)
        elif kept:
            kept.pop()
    return sep * leading + sep.join(kept) or "."


def abspath(path: str) -> str:
    return normpath(path if isabs(path) else join(getcwd(), path))


def _stat_or_none(call: "Callable[[str], stat_result]", path: str) -> "stat_result | None":
    # os.path's answer for a path it cannot stat, a NUL in it (ValueError) included
    try:
        return call(path)
    except (OSError, ValueError):
        return None


def exists(path: str) -> bool:
    return _stat_or_none(stat, path) is not None


def lexists(path: str) -> bool:
    return _stat_or_none(lstat, path) is not None


def isdir(path: str) -> bool:
    found = _stat_or_none(stat, path)
    return found is not None and S_ISDIR(found.st_mode)


def isfile(path: str) -> bool:
    found = _stat_or_none(stat, path)
    return found is not None and S_ISREG(found.st_mode)


def islink(path: str) -> bool:
    found = _stat_or_none(lstat, path)
    return found is not None and S_ISLNK(found.st_mode)


def expanduser(path: str) -> str:
    if not path.startswith("~"):
        return path
    import os  # a `~` to expand: HOME or the password database, as os.path does it

    return os.path.expanduser(path)


def realpath(path: str) -> str:
    """os.path.realpath (not strict): a tree entry may name a bundle through a link."""
    resolved, _ = _join_real("", path, {})
    return abspath(resolved)


def _join_real(path: str, rest: str, seen: "dict[str, str | None]") -> tuple[str, bool]:
    # posixpath's walk: each name joined to `path`, a link replaced by its target resolved
    # the same way; `seen` maps a link to its resolution (None while resolving: a loop).
    if isabs(rest):
        path = sep
    while rest:
        name, _, rest = rest.partition(sep)
        if not name or name == ".":
            continue
        if name == "..":
            path = _parent(path)
            continue
        joined = join(path, name)
        if not _is_link(joined):
            path = joined
            continue
        if joined in seen:
            known = seen[joined]
            if known is None:
                return join(joined, rest), False  # a loop: left unresolved, as os.path does
            path = known
            continue
        seen[joined] = None
        path, resolved = _join_real(path, readlink(joined), seen)
        if not resolved:
            return join(path, rest), False
        seen[joined] = path
    return path, True


def _is_link(path: str) -> bool:
    try:
        return S_ISLNK(lstat(path).st_mode)
    except OSError:  # not ValueError: os.path.realpath raises it for a NUL
        return False


def _parent(path: str) -> str:
    if not path:
        return ".."
    head = dirname(path)
    return join(head, "..", "..") if basename(path) == ".." else head


def makedirs(path: str, mode: int = 0o777, exist_ok: bool = False) -> None:
    """os.makedirs. The usual case, a folder that exists or whose parent does, is one
    mkdir() here: os is imported only when parents are missing too."""
    try:
        mkdir(path, mode)
        return
    except FileExistsError:
        if exist_ok and isdir(path):
            return
        raise
    except FileNotFoundError:
        pass
    import os  # the rare branch: folders to make above this one

    os.makedirs(path, mode=mode, exist_ok=exist_ok)
