"""Writing file-mapped UUID trees: one relative symlink per UUID, made atomically.

Layout and rules: docs/helper-contract.md. A new link is made under its final name in
one step (symlink(2) creates it whole, so a reader never sees a half-made one); an
existing link is replaced only when it is dangling or already says the same, by a link
made under a temporary name and renamed over.
"""

from __future__ import annotations

import os
import stat

from dsymfind import paths
from dsymfind.errors import DsymfindError
from dsymfind.uuids import dashed, tree_entry

# A link's folder lies five levels below the tree's root (docs/cache-format.md).
_UP_FROM_FOLDER = (os.pardir + os.sep) * paths.TREE_FOLDER_LEVELS


class LinkConflict(Exception):
    """The tree already maps the UUID to another existing file; left as it is."""


class TreeWriter:
    """Links into one UUID tree, remembering the folders it made or found real.

    Siblings share their parent levels: each folder is checked (and made) once per
    writer, not once per link. A run that links many UUIDs (`dsymfind index`) keeps one
    writer; the folders are never removed (docs/cache-format.md), so what was checked
    stays true for the run.
    """

    def __init__(self, tree_root: str) -> None:
        self.tree_root = os.path.normpath(tree_root)
        self.real_folders: set[str] = set()
        # os.path.relpath makes both paths absolute and splits them on every call; the
        # root's half is the same for every link of the run.
        self._root_parts = _parts(self.tree_root)

    def link(self, uuid: str, target: str) -> str:
        """Map `uuid` to the absolute path `target`; returns the entry's path."""
        entry = tree_entry(self.tree_root, uuid)
        folder = os.path.dirname(entry)
        relative = _UP_FROM_FOLDER + self._from_root(target)
        self._make_real_folders(folder)
        try:
            os.symlink(relative, entry)
        except FileExistsError:
            _replace(entry, relative, target)
        return entry

    def _from_root(self, target: str) -> str:
        """`os.path.relpath(target, tree_root)`, the root split once per writer."""
        parts = _parts(target)
        shared = 0
        for mine, theirs in zip(self._root_parts, parts, strict=False):
            if mine != theirs:
                break
            shared += 1
        steps = [os.pardir] * (len(self._root_parts) - shared) + parts[shared:]
        return os.sep.join(steps) if steps else os.curdir

    def _make_real_folders(self, folder: str) -> None:
        """The folders from the tree's root down to the link's, made where missing; a
        symlink planted in place of one is refused before anything is made through it,
        since it would carry our entries into someone else's folders."""
        if folder in self.real_folders:
            return
        if self.tree_root not in self.real_folders:
            os.makedirs(self.tree_root, mode=0o755, exist_ok=True)
            self.real_folders.add(self.tree_root)
        current = self.tree_root
        for part in folder[len(self.tree_root) + 1 :].split(os.sep):
            current += os.sep + part  # os.path.join costs more, 50,000 times a cold index
            if current not in self.real_folders:
                _make_level(current)
                self.real_folders.add(current)


def _parts(path: str) -> list[str]:
    """An absolute path's names, as os.path.relpath compares them."""
    return [name for name in os.path.abspath(path).split(os.sep) if name]


def _make_level(folder: str) -> None:
    """Make one folder of the tree unless it is there (and no symlink). mkdir comes first:
    it never follows a symlink in the folder's place (EEXIST, then the lstat refuses it),
    and in a cold tree it succeeds, so a new folder costs that one call."""
    try:
        os.mkdir(folder, 0o755)
    except FileExistsError:
        _refuse_a_symlink(folder)


def _refuse_a_symlink(folder: str) -> None:
    """A symlink in the place of one of the tree's folders is refused."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return  # removed since: the next mkdir below it says so
    if stat.S_ISLNK(mode):
        raise DsymfindError(
            f"{folder} is a symlink where the UUID tree keeps a folder; "
            "remove it (dsymfind check --repair)"
        )


def _replace(entry: str, relative: str, target: str) -> None:
    """Put the link over an existing entry: only a dangling one, or one that already
    says the same; a link to another existing file is a conflict."""
    if _current(entry) == relative:
        return
    if os.path.exists(entry) and os.path.realpath(entry) != os.path.realpath(target):
        raise LinkConflict(f"{entry} already points to {os.path.realpath(entry)}")
    tmp = paths.temp_sibling(entry)
    try:
        os.symlink(relative, tmp)
        os.replace(tmp, entry)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


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
