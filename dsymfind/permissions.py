"""Whose folders the cache may live in.

lldb can run Python scripts found inside a dSYM (`target.load-script-from-symbol-file`),
so a cache that another user can write into lets that user plant code the debugger runs
as us. A cache folder must be ours and writable by us alone, and its parent must not let
another user swap it for their own.
"""

from __future__ import annotations

import os
import stat

from dsymfind.errors import DsymfindError

# Folders dsymfind creates are private: the cache holds what the debugger trusts.
PRIVATE_DIR_MODE = 0o700


def unsafe_reason(folder: str) -> str | None:
    """Why `folder` (a cache folder) must not be trusted, or None when it is safe (or absent)."""
    try:
        st = os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return _parent_reason(folder)  # nothing there yet, nor can anyone else put it there
    except OSError as exc:
        return f"{folder} cannot be checked: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if st.st_uid != os.getuid():
        return f"{folder} belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{folder} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return _parent_reason(folder)


def _parent_reason(folder: str) -> str | None:
    """A parent others can write into lets them rename our folder away, unless it is sticky."""
    parent = os.path.dirname(os.path.abspath(folder))
    try:
        st = os.stat(parent)
    except OSError:
        return None  # created later, by us, with our own modes
    if not stat.S_ISDIR(st.st_mode):
        return None  # the cache cannot be created there by anyone
    shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX
    if shared and st.st_uid != os.getuid():
        return f"{parent}, which holds it, is writable by other users"
    return None


def secure_cache(root: str) -> None:
    """Create the cache folder private to us, or refuse one that others could write into.

    Every writer (downloader, index, gc, the PDB store) calls this before its first write.
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(root)), exist_ok=True)
        os.mkdir(root, PRIVATE_DIR_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise DsymfindError(f"cannot create the cache folder {root}: {exc.strerror}") from None
    refuse_unsafe(root)


def refuse_unsafe(root: str) -> None:
    """Raise when the cache (if it exists) could hold what another user planted.

    The helper calls this before answering anything from the cache: its tree, its
    remembered answers and its search index all live there.
    """
    problem = unsafe_reason(root)
    if problem:
        raise DsymfindError(
            f"refusing the cache: {problem}; lldb may run scripts from dSYMs found there "
            f"(fix: chmod 700 {root}, or set cache_dir to a folder of your own)"
        )
