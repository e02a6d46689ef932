"""Where, and at which commit, a published build was made.

`dsymfind publish` records for each DWARF file the build's source root (the folder the
DWARF's compile directories and file names start with), the commit checked out there,
whether tracked files had changes, and the repository's remote URL without credentials.
The record travels in the file's metadata (`source` in its `meta`, stores/meta.py) and in
the manifest. A developer's downloader reads it back (`from_meta`), keeps it in the cached
dSYM's per-UUID plist under `DBGSourceControl`, and maps the root to a checkout of that
commit (vcs/checkouts.py).

Everything read back is untrusted: `checked` keeps a record only when the root is a plain
absolute path, the commit 40 hex digits and the other values plain text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import NamedTuple

from dsymfind.apple import dwarf

# Longer than any real path or URL; a bound on what a store can make us keep.
MAX_TEXT = 4096
# The folders climbed from a compile directory towards the repository's top.
MAX_DEPTH = 64


class SourceRecord(NamedTuple):
    root: str  # the build's source root, as the DWARF spells it
    commit: str  # 40 hex digits
    remote: str  # without credentials; "" when the repository had none
    path: str  # where the root lies in the repository: "" at its top
    dirty: bool  # tracked files had changes: the commit is not quite what was built

    def as_dict(self) -> dict[str, str | bool]:
        return dict(self._asdict())


def checked(value: object) -> SourceRecord | None:
    """A record as stored (metadata, a plist), when every value is what it must be."""
    if not isinstance(value, dict):
        return None
    root, commit, remote = value.get("root"), value.get("commit"), value.get("remote", "")
    path, dirty = value.get("path", ""), value.get("dirty", False)
    from dsymfind.vcs import git  # subprocess: loaded by a dSYM that carries provenance

    if not (_plain_absolute(root) and git.is_commit(commit) and _text(remote)):
        return None
    if not (_text(path) and _inside(path) and isinstance(dirty, bool)):
        return None
    assert isinstance(root, str) and isinstance(commit, str)
    assert isinstance(remote, str) and isinstance(path, str)
    return SourceRecord(root, commit, remote, path, dirty)


def from_meta(data: bytes | None) -> SourceRecord | None:
    """The record in a store's `meta` for a file; None when it has none or a bad one."""
    if data is None:
        return None
    try:
        values = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return checked(values.get("source")) if isinstance(values, dict) else None


def _text(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT and value.isprintable()


def _plain_absolute(value: object) -> bool:
    return _text(value) and os.path.isabs(str(value)) and os.path.normpath(str(value)) == value


def _inside(path: str) -> bool:
    """A relative path that stays inside the folder it is joined to."""
    if path == "":
        return True
    return (
        not os.path.isabs(path) and os.path.normpath(path) == path and ".." not in path.split("/")
    )


# --- publish's side -------------------------------------------------------------------


class Repository(NamedTuple):
    top: str  # as git gives it: the real path
    commit: str
    remote: str
    dirty: bool


def repository_at(folder: str) -> Repository | None:
    """The git work tree holding `folder`, at its HEAD; None without git, a repository or
    a commit."""
    from dsymfind.vcs import git

    try:
        top = git.toplevel(folder)
        commit = git.head(top)
        dirty = git.tracked_changes(top)
        remotes = git.remotes(top)
    except git.GitError:
        return None
    chosen = remotes.get("origin") or next((remotes[n] for n in sorted(remotes)), "")
    return Repository(top, commit, git.redacted_remote(chosen), dirty)


class BuildSources:
    """The records of one publishing run: the repository it runs in (or the one holding
    `source_root`), asked once; each DWARF file's compile directories decide its root."""

    def __init__(self, source_root: str | None, warn: Callable[[str], None]) -> None:
        self.source_root = None if source_root is None else os.path.abspath(source_root)
        self.repository = repository_at(self.source_root or os.getcwd())
        self.warn = warn
        if self.source_root is not None and self.repository is None:
            warn(f"--source-root {source_root}: not in a git work tree with a commit")
        self._warned_dirty = False

    def record_for(self, dwarf_path: str, uuid: str) -> SourceRecord | None:
        """What to record for one DWARF file; None when its paths lie outside the repository."""
        repo = self.repository
        if repo is None:
            return None
        if self.source_root is not None:
            root, path = self.source_root, _place_in(self.source_root, repo.top)
            if path is None:
                return None
        else:
            found = _root_spelling(dwarf_path, uuid, repo.top)
            if found is None:
                return None
            root, path = found, ""
        if repo.dirty and not self._warned_dirty:
            self._warned_dirty = True  # said once, for the first file it concerns
            self.warn(
                f"{repo.top} has changes to tracked files: the sources recorded are commit "
                f"{repo.commit[:12]}'s, flagged as not quite the build's"
            )
        return SourceRecord(root, repo.commit, repo.remote, path, repo.dirty)


def _place_in(folder: str, top: str) -> str | None:
    """Where `folder` lies in the work tree at `top`, "" at its top; None outside it."""
    relative = os.path.relpath(os.path.realpath(folder), top)
    if relative == ".":
        return ""
    return None if relative.split(os.sep)[0] == ".." else relative


def _root_spelling(dwarf_path: str, uuid: str, top: str) -> str | None:
    """The repository's top as the DWARF's paths spell it (they may go through a symlink,
    /var for /private/var), when a compile directory or file lies below it."""
    try:
        units = dwarf.first_units(dwarf_path, uuid)
    except dwarf.DwarfError:
        return None
    for folder in _folders_named(units):
        for _ in range(MAX_DEPTH):
            if os.path.realpath(folder) == top:
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def _folders_named(units: list[dwarf.Unit]) -> list[str]:
    """The absolute folders the units name: compile directories and their files' folders."""
    folders = []
    for unit in units:
        base = unit.comp_dir if unit.comp_dir and os.path.isabs(unit.comp_dir) else None
        if base is not None:
            folders.append(os.path.normpath(base))
        if unit.name and (os.path.isabs(unit.name) or base is not None):
            folders.append(os.path.dirname(os.path.normpath(os.path.join(base or "", unit.name))))
    return list(dict.fromkeys(folders))
