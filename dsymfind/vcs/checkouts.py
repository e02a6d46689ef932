"""Source for builds from CI, the developer's side: a checkout of the build's commit, mapped
for lldb in the cached dSYM.

A dSYM fetched from a store that `dsymfind publish` filled carries a source record
(vcs/provenance.py), kept in its per-UUID plist as `DBGSourceControl`. The downloader looks
among the user's `source_checkouts` for a clone with the record's remote (URLs compared
normalised, vcs/git.py), and uses:

- the clone itself, when its HEAD is the commit and its tracked files are clean;
- else a detached `git worktree` at the commit, made in the cache as
  `sources/<repo>-<commit12>` from the cache's own bare clone `clones/<name>-<h>`, which
  borrows the user's clone's objects (`objects/info/alternates`) and receives the one
  commit from that clone's remote when neither has it (no network when the clone has it).

The user's clone is only read: no worktree, ref, object, `FETCH_HEAD` or index refresh
of ours lands in it, and no hook of theirs runs. A worktree is made under a temporary name
and moved into place whole, under a lock that gc takes too. The folder mapped (the
record's `path` inside the checkout) must resolve inside it: a symlink on the way that
leads out gives no mapping. The bundle's per-UUID plists then get `DBGBuildSourcePath`,
`DBGSourcePath`, `DBGSourcePathRemapping` (build root -> that folder) and `DBGVersion`,
which lldb on macOS reads there, and the helper answers the first two.

The downloader checks out before it links a new dSYM into the UUID tree (`Pending`), so
the first answer already carries the mapping, unless the checkout runs past the moment a
debugger may be waiting: then the dSYM is linked without it, and it follows. Every git
run ends by the download's deadline. Nothing here fails a download: a reason is returned,
for the log.
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import NamedTuple

from dsymfind import atomic, debugsymbols, paths
from dsymfind.apple import bundle
from dsymfind.cache import locks
from dsymfind.errors import DsymfindError
from dsymfind.paths import CachePaths
from dsymfind.uuids import normalize_uuid
from dsymfind.vcs import git, provenance
from dsymfind.vcs.provenance import SourceRecord

# A worktree's or clone's folder name: the repository's, in characters every file system takes.
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
COMMIT_DIGITS = 12
# A worktree or clone being made, `sources/.new-<name>.<pid>`: no name any plist gives.
WORKTREE_STAGING = ".new-"
# Removing a worktree deletes its files: a large checkout takes a while.
REMOVE_TIMEOUT = 300.0
# The user's hooks are for their own checkouts, not ours made in the background.
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


class SourcesError(DsymfindError):
    """No mapping, for a reason of the checkout's own (a path leading out of it)."""


class Mapped(NamedTuple):
    build: str  # the build's source root
    local: str  # the folder it maps to
    clone: str  # the user's clone it came from
    worktree: bool  # a worktree the cache made (else the clone itself)
    commit: str

    def described(self) -> str:
        what = "a worktree made from" if self.worktree else "the clone"
        return f"{self.build} -> {self.local} ({what} {self.clone} at {self.commit[:12]})"

    def plist_values(self) -> dict[str, object]:
        """The source keys lldb reads in a per-UUID plist."""
        return {
            debugsymbols.BUILD_SOURCE_PATH: self.build,
            debugsymbols.SOURCE_PATH: self.local,
            debugsymbols.SOURCE_PATH_REMAPPING: {self.build: self.local},
            debugsymbols.VERSION: "3",
        }


# What a checkout came to: its mapping, or why there is none, in words for the log.
Outcome = Mapped | str


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


def mapping_due(bundle_dir: str, uuid: str) -> bool:
    """Whether a placed bundle has a source record but no mapped folder that exists: the
    checkout failed, was never tried (no `source_checkouts` then), or was removed."""
    values = bundle.read_uuid_plist(bundle_dir, uuid)
    if provenance.checked(values.get(debugsymbols.SOURCE_CONTROL)) is None:
        return False
    local = values.get(debugsymbols.SOURCE_PATH)
    return not (isinstance(local, str) and os.path.isdir(local))


def attempt(
    cache: CachePaths, record: SourceRecord, clones: Sequence[str], deadline: Deadline
) -> Outcome:
    """The checkout of a record's commit, or why there is none."""
    try:
        mapped = checkout(cache, record, clones, deadline)
    except (git.GitError, SourcesError, OSError) as exc:
        return f"no sources: {exc}"
    return no_clone_reason(record, clones) if mapped is None else mapped


class Pending:
    """`attempt` under way in a thread of its own, so that the downloader can link its
    dSYM once the checkout is done or once a debugger may be waiting, whichever comes
    first. Not a daemon thread: the process ends once its git runs have, each by the
    deadline."""

    def __init__(
        self, cache: CachePaths, record: SourceRecord, clones: Sequence[str], deadline: Deadline
    ) -> None:
        self._outcome: Outcome | BaseException = "the checkout did not finish"
        self._thread = threading.Thread(
            target=self._run, args=(cache, record, clones, deadline), name="checkout"
        )
        self._thread.start()

    def _run(
        self, cache: CachePaths, record: SourceRecord, clones: Sequence[str], deadline: Deadline
    ) -> None:
        try:
            self._outcome = attempt(cache, record, clones, deadline)
        except BaseException as exc:  # noqa: BLE001 - a bug: raised again by `outcome`, where it is logged
            self._outcome = exc

    def done_by(self, until: float) -> bool:
        """Whether it is over by `until` (monotonic), waiting no longer."""
        self._join(max(until - time.monotonic(), 0.0))
        return not self._thread.is_alive()

    def outcome(self) -> Outcome:
        """Once over (waited for: each git run ends by the deadline)."""
        self._join(None)
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def _join(self, timeout: float | None) -> None:
        try:
            self._thread.join(timeout)
        except BaseException:
            # Ctrl-C: git, in a session of its own, did not get it, and the process would
            # wait for this thread, so its git runs end now.
            git.end_all()
            raise


@contextmanager
def naming(cache: CachePaths, mapped: Mapped, deadline: Deadline) -> Iterator[None]:
    """Held while plists are made to name a checkout: gc cannot remove a worktree
    meanwhile, and one removed before is not named. GitError, SourcesError otherwise."""
    with _worktree_lock(cache, mapped, deadline):
        if not os.path.isdir(mapped.local):
            raise SourcesError(f"{mapped.local} is gone")
        yield


def map_placed(
    cache: CachePaths, bundle_dir: str, uuid: str, outcome: Outcome, deadline: Deadline
) -> str:
    """Write a checkout's mapping into a placed bundle's plists, every slice's with the
    same record (a universal file's); what happened, in words."""
    if isinstance(outcome, str):
        return outcome
    record = source_record(bundle_dir, uuid)
    uuids = [u for u in _uuids_with_plists(bundle_dir) if source_record(bundle_dir, u) == record]
    try:
        with naming(cache, outcome, deadline):
            write_mapping(bundle_dir, uuids, outcome)
    except (git.GitError, SourcesError, OSError) as exc:
        return f"no sources: {exc}"
    return outcome.described()


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
    """The top of the first clone with the record's remote, and that remote's URL there."""
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
                return top, remotes[name]
    return None


def checkout(
    cache: CachePaths, record: SourceRecord, clones: Sequence[str], deadline: Deadline
) -> Mapped | None:
    """The record's folder at its commit: in the clone, or in a worktree made now or
    before; None without a clone of that remote."""
    found = matching_clone(record, clones, deadline)
    if found is None:
        return None
    clone, url = found
    quick = deadline.left(git.QUICK_TIMEOUT)
    if git.head(clone, timeout=quick) == record.commit and not git.tracked_changes(
        clone, timeout=deadline.left(git.QUICK_TIMEOUT)
    ):
        return Mapped(record.root, inside(clone, record.path), clone, False, record.commit)
    folder = os.path.join(cache.checkouts, worktree_name(record))
    with _folder_lock(cache, os.path.basename(folder), deadline):
        if not os.path.isdir(folder):
            _make_worktree(cache, clone, url, folder, record.commit, deadline)
        elif git.head(folder, timeout=deadline.left(git.QUICK_TIMEOUT)) != record.commit:
            raise git.GitError(f"{folder} is checked out at another commit")
    return Mapped(record.root, inside(folder, record.path), clone, True, record.commit)


def inside(top: str, relative: str) -> str:
    """`top`/`relative` with each symlink on the way resolved, spelt from `top`: the
    folder lldb is to read. Every step must stay inside `top` (a link to a folder inside
    is fine); SourcesError, saying which name leads where, otherwise."""
    real_top = os.path.realpath(top)
    current = resolved_inside(top, relative)
    if not os.path.isdir(current):
        raise SourcesError(f"the recorded path {relative!r} is no folder in {top}")
    rest = os.path.relpath(current, real_top)
    return top if rest == os.curdir else os.path.join(top, rest)


def resolved_inside(top: str, relative: str) -> str:
    """The real path of `top`/`relative`, resolved name by name, each step inside `top`'s
    real path: what a mapped path may name (a checkout's folder, a source file symbolicate
    reads). SourcesError, saying which name leads where, when a step leads out."""
    real_top = os.path.realpath(top)
    current = real_top
    for name in relative.split("/") if relative else []:
        step = os.path.realpath(os.path.join(current, name))
        if not _under(step, real_top):
            raise SourcesError(
                f"the recorded path {relative!r} leads out of {top}: {name} resolves to {step}"
            )
        current = step
    return current


def worktree_name(record: SourceRecord) -> str:
    """`<repo>-<commit12>`, the repository named by its remote's last path component."""
    last = git.normalised_remote(record.remote).rstrip("/").rpartition("/")[2]
    return f"{_safe_name(last)}-{record.commit[:COMMIT_DIGITS]}"


def _safe_name(text: str) -> str:
    return (_UNSAFE_NAME.sub("_", text).lstrip(".") or "source")[:64]


@contextmanager
def _worktree_lock(cache: CachePaths, mapped: Mapped, deadline: Deadline) -> Iterator[None]:
    """Held while a worktree is named; gc takes it before removing one."""
    if not mapped.worktree:
        yield
        return
    with _folder_lock(cache, os.path.basename(_worktree_top(cache, mapped.local)), deadline):
        yield


@contextmanager
def _folder_lock(cache: CachePaths, name: str, deadline: Deadline) -> Iterator[None]:
    """Held while the worktree `sources/<name>` is made or named; gc takes it too."""
    lock = locks.key_lock(cache.checkout_lock(name), timeout=max(deadline.left(), 0.0))
    import filelock

    try:
        with lock:
            yield
    except filelock.Timeout:
        raise git.GitError(f"another process holds {name} past the deadline") from None


def _worktree_top(cache: CachePaths, local: str) -> str:
    relative = os.path.relpath(local, cache.checkouts)
    return os.path.join(cache.checkouts, relative.split(os.sep)[0])


# --- the cache's own clones -----------------------------------------------------------


def _make_worktree(
    cache: CachePaths, clone: str, url: str, folder: str, commit: str, deadline: Deadline
) -> None:
    """A worktree at `commit` from the cache's clone borrowing `clone`'s objects, after
    fetching the commit from `url` into that clone when neither has it."""
    objects = _objects_of(clone, deadline)
    name = clone_name(clone, objects)
    with ExitStack() as held:
        try:
            held.enter_context(
                locks.SharedClaim(cache.clone_lock(name), timeout=max(deadline.left(), 0.0))
            )
        except TimeoutError:
            raise git.GitError(f"gc holds the cache's clone {name} past the deadline") from None
        own = _own_clone(cache, name, objects, deadline)
        if not _has_commit(own, commit, deadline):
            git.fetch_commit(own, git.fetchable_url(url, clone), commit,
                             timeout=deadline.left(), settings_from=clone)  # fmt: skip
            if not _has_commit(own, commit, deadline):
                raise git.GitError(f"{git.redacted_remote(url)} does not have {commit}")
        _add_worktree(cache, own, folder, commit, deadline)


def _objects_of(clone: str, deadline: Deadline) -> str:
    """The object folder of a clone (its main repository's, for a linked worktree)."""
    common = git.run(clone, "rev-parse", "--path-format=absolute", "--git-common-dir",
                     timeout=deadline.left(git.QUICK_TIMEOUT)).strip()  # fmt: skip
    return os.path.join(common, "objects")


def clone_name(clone: str, objects: str) -> str:
    """`<clone's folder name>-<h>`, `<h>` standing for the object folder it borrows."""
    return f"{_safe_name(os.path.basename(clone))}-{paths.short_name(objects)}"


def _own_clone(cache: CachePaths, name: str, objects: str, deadline: Deadline) -> str:
    """The cache's bare clone `clones/<name>`, made when missing: an empty repository whose
    alternates name `objects`. Made under a temporary name and renamed into place; a
    process that loses the race keeps the winner's."""
    folder = os.path.join(cache.clones, name)
    if os.path.isdir(folder):
        return folder
    os.makedirs(cache.clones, mode=0o700, exist_ok=True)
    staging = _staging_name(cache.clones, name)
    try:
        git.run(cache.clones, "init", "--quiet", "--bare", "--template=", "--", staging,
                timeout=deadline.left(git.QUICK_TIMEOUT))  # fmt: skip
        alternates = os.path.join(staging, "objects", "info", "alternates")
        os.makedirs(os.path.dirname(alternates), exist_ok=True)
        atomic.write_bytes(alternates, os.fsencode(objects) + b"\n")
        os.rename(staging, folder)
    except OSError:
        if not os.path.isdir(folder):
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _staging_name(folder: str, name: str) -> str:
    """A name to make `<folder>/<name>` under: this process's and thread's alone."""
    return os.path.join(folder, f"{WORKTREE_STAGING}{name}.{os.getpid()}-{threading.get_ident():x}")


def _has_commit(repository: str, commit: str, deadline: Deadline) -> bool:
    try:
        git.run(
            repository,
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


def _add_worktree(
    cache: CachePaths, repository: str, folder: str, commit: str, deadline: Deadline
) -> None:
    """A detached worktree at `commit`, made under a temporary name and moved into place."""
    os.makedirs(cache.checkouts, mode=0o700, exist_ok=True)
    staging = os.path.join(
        cache.checkouts, f"{WORKTREE_STAGING}{os.path.basename(folder)}.{os.getpid()}"
    )
    remove_worktree(staging, force=True, timeout=deadline.left())  # a killed run's, this pid
    # The clone is the cache's own: its record of a worktree removed by hand would refuse
    # a new one at that name.
    git.run(repository, "worktree", "prune", timeout=deadline.left(git.QUICK_TIMEOUT))
    git.run(repository, *_NO_HOOKS, "worktree", "add", "--quiet", "--detach", "--", staging,
            commit, timeout=deadline.left())  # fmt: skip
    try:
        if git.head(staging, timeout=deadline.left(git.QUICK_TIMEOUT)) != commit:
            raise git.GitError(f"{staging} did not check out {commit}")
        git.run(
            repository,
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


def write_mapping(bundle_dir: str, uuids: Sequence[str], mapped: Mapped) -> None:
    """The source keys lldb reads, into each per-UUID plist of a cache bundle (XML, fsynced)."""
    for uuid in uuids:
        values = bundle.read_uuid_plist(bundle_dir, uuid)
        values.update(mapped.plist_values())
        data = plistlib.dumps(values, fmt=plistlib.FMT_XML)
        atomic.write_bytes(bundle.uuid_plist_path(bundle_dir, uuid), data)


def worktrees(cache: CachePaths) -> list[str]:
    """The worktrees the cache holds (and staging ones a killed run left)."""
    return _listed(cache.checkouts)


def named_folders(cache: CachePaths, leaving: Sequence[str] = ()) -> set[str]:
    """Every `DBGSourcePath` a per-UUID plist of the cache's bundles names, but those of the
    entries `leaving` (what a dry run of gc would remove)."""
    from dsymfind.cache import entries

    named = set()
    for entry in entries.hex_folders(cache.dsyms):
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


def collect(cache: CachePaths, *, dry_run: bool, leaving: Sequence[str] = ()) -> Collected:
    """Remove the worktrees no cached dSYM names, and staging ones a killed run left. Each
    is claimed first, without waiting (a downloader making or naming one holds it), and the
    names are read once all are claimed, so none is named after it was judged unnamed.
    `leaving`: the entries a dry run would have removed, whose names would be gone."""
    import filelock

    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    with ExitStack() as held:
        claimed = []
        for folder in worktrees(cache):
            if dry_run:
                claimed.append(folder)
                continue
            try:
                held.enter_context(
                    locks.key_lock(cache.checkout_lock(_final_name(folder)), timeout=0)
                )
            except filelock.Timeout:
                kept.append((folder, "in use"))
                continue
            claimed.append(folder)
        named = named_folders(cache, leaving)
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


def collect_clones(cache: CachePaths, *, dry_run: bool, removing: Sequence[str]) -> Collected:
    """Remove the cache's clones no worktree is made from any more (once `removing`, the
    worktrees gc removes, are gone), and staging ones a killed run left. Each is claimed
    first, without waiting: a downloader making a worktree of one holds it (shared)."""
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    gone = {os.path.normpath(folder) for folder in removing}
    for folder in _listed(cache.clones):
        claim = None if dry_run else locks.try_claim(cache.clone_lock(_final_name(folder)))
        if claim is None and not dry_run:
            kept.append((folder, "in use"))
            continue
        try:
            staging = os.path.basename(folder).startswith(WORKTREE_STAGING)
            if staging or _worktrees_made_from(folder) <= gone:
                if not dry_run:
                    shutil.rmtree(folder)
                removed.append(folder)
        except OSError as exc:
            kept.append((folder, str(exc)))
        finally:
            if claim is not None:
                os.close(claim)
    return Collected(removed, kept)


def _worktrees_made_from(clone: str) -> set[str]:
    """The worktrees of a clone that still exist, from git's record of each
    (`worktrees/<id>/gitdir` names the worktree's `.git` file); no git run needed."""
    records = os.path.join(clone, "worktrees")
    found = set()
    for record in _listed(records):
        try:
            pointer = atomic.read_small_file(os.path.join(record, "gitdir"), 4096).decode()
        except FileNotFoundError:
            continue  # a record git is still making: its worktree is not there yet either
        except (OSError, UnicodeDecodeError):
            found.add(record)  # cannot tell: kept
            continue
        worktree = os.path.dirname(pointer.strip())
        if os.path.lexists(worktree):
            found.add(os.path.normpath(worktree))
    return found


def _listed(folder: str) -> list[str]:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names]


def _final_name(folder: str) -> str:
    """The worktree or clone a folder is or is being made as (its lock's name)."""
    name = os.path.basename(folder)
    if name.startswith(WORKTREE_STAGING):
        name = name.removeprefix(WORKTREE_STAGING).rpartition(".")[0]
    return name


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)
