"""Writing file-mapped UUID trees: one relative symlink per UUID, made atomically.

Layout and rules: docs/helper-contract.md. A link is created under a
temporary name and renamed over, so a reader never sees a half-made one; an existing
link is replaced only when it is dangling or already says the same.
"""

from __future__ import annotations

import contextlib
import os

from dsymfind import cache_layout
from dsymfind.errors import DsymfindError
from dsymfind.uuids import dashed, tree_entry


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
    _make_real_folders(tree_root, folder)
    tmp = cache_layout.temp_sibling(entry)
    try:
        os.symlink(relative, tmp)
        os.replace(tmp, entry)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return entry


def _make_real_folders(tree_root: str, folder: str) -> None:
    """The folders from the tree's root down to the link's, made where missing; a symlink
    planted in place of one is refused before anything is made through it, since it would
    carry our entries into someone else's folders."""
    os.makedirs(tree_root, mode=0o755, exist_ok=True)
    current = tree_root
    for part in os.path.relpath(folder, tree_root).split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise DsymfindError(
                f"{current} is a symlink where the UUID tree keeps a folder; "
                "remove it (dsymfind check --repair)"
            )
        with contextlib.suppress(FileExistsError):
            os.mkdir(current, 0o755)


def _current(entry: str) -> str | None:
    try:
        return os.readlink(entry)
    except OSError:
        return None


HEX_LENGTH = 32


HEX_DIGITS = frozenset("0123456789ABCDEF")


def tree_links(root: str) -> dict[str, str]:
    """Every symlink in the UUID tree, with the path it names (lexically resolved)."""
    links: dict[str, str] = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            link = os.path.join(folder, name)
            try:
                target = os.readlink(link)
            except OSError:
                continue  # not a symlink: not something the cache made
            links[link] = os.path.normpath(os.path.join(folder, target))
    return links


def hex_of_link(link: str) -> str:
    """The UUID digits a tree link stands for: its last six path components."""
    return "".join(link.split(os.sep)[-6:])


def uuid_of_link(link: str) -> str | None:
    """The UUID a tree link stands for; None for a name the cache would not make."""
    digits = hex_of_link(link)
    if len(digits) != HEX_LENGTH or not HEX_DIGITS.issuperset(digits):
        return None
    return dashed(digits)
