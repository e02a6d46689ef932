"""Writing file-mapped UUID trees: one relative symlink per UUID, made atomically.

Layout and rules: ../shared/spec/helper-contract.md. A link is created under a
temporary name and renamed over, so a reader never sees a half-made one; an existing
link is replaced only when it is dangling or already says the same.
"""

from __future__ import annotations

import os

from dsymfind.uuids import tree_entry


class LinkConflict(Exception):
    """The tree already maps the UUID to another existing file; left as it is."""


def link(tree_root: str, uuid: str, target: str) -> str:
    """Map `uuid` to the absolute path `target`; returns the entry's path."""
    entry = tree_entry(tree_root, uuid)
    folder = os.path.dirname(entry)
    relative = os.path.relpath(target, folder)
    if _current(entry) == relative:
        return entry
    if os.path.exists(entry) and os.path.realpath(entry) != os.path.realpath(target):
        raise LinkConflict(f"{entry} already points to {os.path.realpath(entry)}")
    os.makedirs(folder, mode=0o755, exist_ok=True)
    tmp = f"{entry}.{os.getpid()}.tmp"
    try:
        os.symlink(relative, tmp)
        os.replace(tmp, entry)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return entry


def _current(entry: str) -> str | None:
    try:
        return os.readlink(entry)
    except OSError:
        return None
