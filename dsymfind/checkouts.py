"""Source for builds from CI, the developer's side: a checkout of the build's commit, mapped
for lldb in the cached dSYM.

A dSYM fetched from a store that `dsymfind publish` filled carries a source record
(provenance.py) in its per-UUID plist, `DBGSourceControl`. After the downloader has
placed it, `map_sources` looks among the user's `source_checkouts` for a clone with the
record's remote (URLs compared normalised, git.py), and uses:

- the clone itself, when its HEAD is the commit and its tracked files are clean;
- else a detached `git worktree` of that clone at the commit, made in the cache as
  `sources/<repo>-<commit12>`, after fetching that one commit from the clone's own remote
  when the clone lacks it (no network when it has it).

The clone is never changed otherwise: no checkout, no stash, no branch, no hooks run. The
worktree is made under a temporary name and moved into place whole, under a lock that gc
takes too. Then the bundle's per-UUID plists get `DBGBuildSourcePath`, `DBGSourcePath`,
`DBGSourcePathRemapping` (build root -> that folder) and `DBGVersion`, which lldb on macOS
reads there, and the helper answers the first two. Every git run ends by the download's
deadline. Nothing here fails a download: a reason is returned, for the log.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import NamedTuple

from dsymfind import atomic, debugsymbols, git, locks, provenance
from dsymfind.apple import bundle
from dsymfind.cache_layout import CacheLayout
from dsymfind.provenance import SourceRecord
from dsymfind.uuids import normalize_uuid

# A worktree's folder name: the repository's, in characters every file system takes.
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
COMMIT_DIGITS = 12
# A worktree being made, `sources/.new-<name>.<pid>`: no name any plist gives.
WORKTREE_STAGING = ".new-"
# Removing a worktree deletes its files: a large checkout takes a while.
REMOVE_TIMEOUT = 300.0
# The user's hooks are for their own checkouts, not ours made in the background.
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


class Mapped(NamedTuple):
    build: str  # the build's source root
    local: str  # the folder it maps to
    clone: str  # the user's clone it came from
    worktree: bool  # a worktree the cache made (else the clone itself)


class Deadline:
    """The time left of a download, for each git run."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = self.ends - time.monotonic()
        return left if cap is None else min(cap, left)


def source_record(bundle_dir: str, uuid: str) -> SourceRecord | None:
    """The record a cached bundle's per-UUID plist keeps for `uuid`."""
    values = bundle.read_uuid_plist(bundle_dir, uuid)
    return provenance.checked(values.get(debugsymbols.SOURCE_CONTROL))


def map_sources(
    layout: CacheLayout, bundle_dir: str, uuid: str, clones: Sequence[str], deadline: Deadline
) -> str | None:
    """Check out and map the build's sources for a placed bundle; what happened, in words,
    or None when the store recorded no build commit (most stores: nothing worth a log line).
    Every slice's plist with the same record gets the mapping (a universal file's)."""
    record = source_record(bundle_dir, uuid)
    if record is None:
        return None
    uuids = [u for u in _uuids_with_plists(bundle_dir) if source_record(bundle_dir, u) == record]
    try:
        mapped = checkout(layout, record, clones, deadline)
        if mapped is None:
            return no_clone_reason(record, clones)
        with _worktree_lock(layout, mapped, deadline):
            if not os.path.isdir(mapped.local):
                return f"{mapped.local} is gone"
            write_mapping(bundle_dir, uuids, record.root, mapped.local)
    except (git.GitError, OSError) as exc:
        return f"no sources: {exc}"
    what = "a worktree of" if mapped.worktree else "the clone"
    return f"{record.root} -> {mapped.local} ({what} {mapped.clone} at {record.commit[:12]})"


def _uuids_with_plists(bundle_dir: str) -> list[str]:
    try:
        names = sorted(os.listdir(os.path.join(bundle_dir, bundle.RESOURCES_SUBDIR)))
    except OSError:
        return []
    stems = [n.removesuffix(".plist") for n in names if n.endswith(".plist")]
    return [stem for stem in stems if normalize_uuid(stem) == stem]


def no_clone_reason(record: SourceRecord, clones: Sequence[str]) -> str:
    if not clones:
        return "no source_checkouts configured"
    return f"no clone in source_checkouts has the remote {record.remote or '(none recorded)'}"


def matching_clone(
    record: SourceRecord, clones: Sequence[str], deadline: Deadline
) -> tuple[str, str] | None:
    """The top of the first clone with the record's remote, and that remote's name there."""
    if not record.remote:
        return None
    wanted = git.normalised_remote(record.remote)
    for clone in clones:
        try:
            top = git.toplevel(clone, timeout=deadline.left(git.QUICK_TIMEOUT))
            remotes = git.remotes(top, timeout=deadline.left(git.QUICK_TIMEOUT))
        except git.GitError:
            continue  # doctor says what is wrong with it
        for name in sorted(remotes):
            if git.normalised_remote(remotes[name]) == wanted:
                return top, name
    return None


def checkout(
    layout: CacheLayout, record: SourceRecord, clones: Sequence[str], deadline: Deadline
) -> Mapped | None:
    """A folder holding the record's commit: the clone, or a worktree of it made now or
    before; None without a clone of that remote."""
    found = matching_clone(record, clones, deadline)
    if found is None:
        return None
    clone, remote = found
    quick = deadline.left(git.QUICK_TIMEOUT)
    if git.head(clone, timeout=quick) == record.commit and not git.tracked_changes(
        clone, timeout=deadline.left(git.QUICK_TIMEOUT)
    ):
        return Mapped(record.root, _within(clone, record), clone, worktree=False)
    folder = os.path.join(layout.sources, worktree_name(record))
    mapped = Mapped(record.root, _within(folder, record), clone, worktree=True)
    with _worktree_lock(layout, mapped, deadline):
        if not os.path.isdir(folder):
            _fetch_if_missing(clone, remote, record.commit, deadline)
            _make_worktree(layout, clone, folder, record.commit, deadline)
        elif git.head(folder, timeout=deadline.left(git.QUICK_TIMEOUT)) != record.commit:
            raise git.GitError(f"{folder} is checked out at another commit")
    return mapped


def worktree_name(record: SourceRecord) -> str:
    """`<repo>-<commit12>`, the repository named by its remote's last path component."""
    last = git.normalised_remote(record.remote).rstrip("/").rpartition("/")[2]
    repo = _UNSAFE_NAME.sub("_", last).lstrip(".") or "source"
    return f"{repo[:64]}-{record.commit[:COMMIT_DIGITS]}"


def _within(top: str, record: SourceRecord) -> str:
    return os.path.join(top, record.path) if record.path else top


@contextmanager
def _worktree_lock(layout: CacheLayout, mapped: Mapped, deadline: Deadline) -> Iterator[None]:
    """Held while a worktree is made and named; gc takes it before removing one."""
    if not mapped.worktree:
        yield
        return
    name = os.path.basename(_worktree_top(layout, mapped.local))
    lock = locks.key_lock(layout.source_lock(name), timeout=max(deadline.left(), 0.0))
    import filelock

    try:
        with lock:
            yield
    except filelock.Timeout:
        raise git.GitError(f"another process holds {name} past the deadline") from None


def _worktree_top(layout: CacheLayout, local: str) -> str:
    relative = os.path.relpath(local, layout.sources)
    return os.path.join(layout.sources, relative.split(os.sep)[0])


def _fetch_if_missing(clone: str, remote: str, commit: str, deadline: Deadline) -> None:
    """Fetch the one commit from the clone's own remote, only when the clone lacks it.
    No ref changes, no FETCH_HEAD: the worktree's HEAD keeps the objects alive."""
    if _has_commit(clone, commit, deadline):
        return
    git.run(clone, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote,
            commit, timeout=deadline.left())  # fmt: skip
    if not _has_commit(clone, commit, deadline):
        raise git.GitError(f"{remote} of {clone} does not have {commit}")


def _has_commit(clone: str, commit: str, deadline: Deadline) -> bool:
    try:
        git.run(
            clone,
            "cat-file",
            "-e",
            f"{commit}^{{commit}}",
            timeout=deadline.left(git.QUICK_TIMEOUT),
        )
    except git.GitTimeout:
        raise
    except git.GitError:
        return False
    return True


def _make_worktree(
    layout: CacheLayout, clone: str, folder: str, commit: str, deadline: Deadline
) -> None:
    """A detached worktree at `commit`, made under a temporary name and moved into place."""
    os.makedirs(layout.sources, mode=0o700, exist_ok=True)
    staging = os.path.join(
        layout.sources, f"{WORKTREE_STAGING}{os.path.basename(folder)}.{os.getpid()}"
    )
    remove_worktree(staging, force=True, timeout=deadline.left())  # a killed run's, this pid
    git.run(clone, *_NO_HOOKS, "worktree", "add", "--quiet", "--detach", "--", staging, commit,
            timeout=deadline.left())  # fmt: skip
    try:
        if git.head(staging, timeout=deadline.left(git.QUICK_TIMEOUT)) != commit:
            raise git.GitError(f"{staging} did not check out {commit}")
        git.run(
            clone,
            "worktree",
            "move",
            "--",
            staging,
            folder,
            timeout=deadline.left(git.QUICK_TIMEOUT),
        )
    except BaseException:
        remove_worktree(staging, force=True, timeout=deadline.left(git.QUICK_TIMEOUT))
        raise


def remove_worktree(folder: str, *, force: bool, timeout: float | None = None) -> str | None:
    """Remove a worktree the cache made, through its clone (then prune the clone's record of
    it); None when gone, else why it stays. Without `force`, one with changes stays. A
    worktree whose clone is gone is only files: removed as such. When git cannot be asked
    (missing from PATH, too slow), it stays: its changes may be the user's."""
    if not os.path.lexists(folder):
        return None
    limit = REMOVE_TIMEOUT if timeout is None else timeout
    try:
        common = git.run(
            folder,
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
            timeout=min(git.QUICK_TIMEOUT, limit),
        ).strip()
    except git.GitError as exc:
        if force or _clone_is_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            return None
        return str(exc)
    clone = os.path.dirname(common) if os.path.basename(common) == ".git" else common
    options = ["--force", "--force"] if force else []
    try:
        git.run(clone, "worktree", "remove", *options, "--", folder, timeout=limit)
    except git.GitError as exc:
        return str(exc)
    git.run(clone, "worktree", "prune", timeout=limit)
    return None


def _clone_is_gone(folder: str) -> bool:
    """Whether the `.git` file of a worktree names a clone's record that no longer exists
    (or there is none): then nothing but these files is left of it."""
    try:
        pointer = atomic.read_small_file(os.path.join(folder, ".git"), 4096).decode()
    except (OSError, UnicodeDecodeError):
        return not os.path.lexists(os.path.join(folder, ".git"))
    named = pointer.removeprefix("gitdir:").strip()
    return pointer.startswith("gitdir:") and not os.path.isdir(named)


def write_mapping(bundle_dir: str, uuids: Sequence[str], build: str, local: str) -> None:
    """The source keys lldb reads in each per-UUID plist of a cache bundle (XML, fsynced)."""
    for uuid in uuids:
        values = bundle.read_uuid_plist(bundle_dir, uuid)
        values.update(
            {
                debugsymbols.BUILD_SOURCE_PATH: build,
                debugsymbols.SOURCE_PATH: local,
                debugsymbols.SOURCE_PATH_REMAPPING: {build: local},
                debugsymbols.VERSION: "3",
            }
        )
        data = plistlib.dumps(values, fmt=plistlib.FMT_XML)
        atomic.write_bytes(bundle.uuid_plist_path(bundle_dir, uuid), data)


def worktrees(layout: CacheLayout) -> list[str]:
    """The worktrees the cache holds (and staging ones a killed run left)."""
    try:
        names = sorted(os.listdir(layout.sources))
    except OSError:
        return []
    return [os.path.join(layout.sources, n) for n in names]


def named_folders(layout: CacheLayout, leaving: Sequence[str] = ()) -> set[str]:
    """Every `DBGSourcePath` a per-UUID plist of the cache's bundles names, but those of the
    entries `leaving` (what a dry run of gc would remove)."""
    from dsymfind.cache import entries

    named = set()
    for entry in entries.hex_folders(layout.dsyms):
        if entry in leaving:
            continue
        for bundle_dir in entries.bundles_in(entry):
            for uuid in _uuids_with_plists(bundle_dir):
                local = bundle.read_uuid_plist(bundle_dir, uuid).get(debugsymbols.SOURCE_PATH)
                if isinstance(local, str):
                    named.add(os.path.normpath(local))
    return named


class Collected(NamedTuple):
    removed: list[str]
    kept: list[tuple[str, str]]  # with why


def collect(layout: CacheLayout, *, dry_run: bool, leaving: Sequence[str] = ()) -> Collected:
    """Remove the worktrees no cached dSYM names, and staging ones a killed run left. Each
    is claimed first, without waiting (a downloader making or naming one holds it), and the
    names are read once all are claimed, so none is named after it was judged unnamed.
    `leaving`: the entries a dry run would have removed, whose names would be gone."""
    import filelock

    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    with ExitStack() as held:
        claimed = []
        for folder in worktrees(layout):
            if dry_run:
                claimed.append(folder)
                continue
            try:
                held.enter_context(
                    locks.key_lock(layout.source_lock(_final_name(folder)), timeout=0)
                )
            except filelock.Timeout:
                kept.append((folder, "in use"))
                continue
            claimed.append(folder)
        named = named_folders(layout, leaving)
        for folder in claimed:
            staging = os.path.basename(folder).startswith(WORKTREE_STAGING)
            if not staging and any(_under(path, folder) for path in named):
                continue
            why = None if dry_run else remove_worktree(folder, force=staging)
            if why is None:
                removed.append(folder)
            else:
                kept.append((folder, why))
    return Collected(removed, kept)


def _final_name(folder: str) -> str:
    """The worktree a folder in sources/ is or is being made as (its lock's name)."""
    name = os.path.basename(folder)
    if name.startswith(WORKTREE_STAGING):
        name = name.removeprefix(WORKTREE_STAGING).rpartition(".")[0]
    return name


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)
