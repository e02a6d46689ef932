"""The developer's side of source for builds from CI, for real: a bare origin, a CI clone
that builds C sources by absolute path and publishes, a developer's clone one commit
ahead, the CI folder deleted, then a fetch through a real HTTP server on 127.0.0.1. The
worktree, the cached plist, the helper's answer (the first one included), the clone left
exactly as it was, gc, committed symlinks that lead out, a remote over ssh that never
answers, sources configured after the fetch, and a real lldb showing the line as it was
built under the mapping the answer gives."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import git_builds
from support import symbol_server as ss
from support.fixtures import toml_list, write_config
from support.processes import downloader_pids, run_cli, run_helper

from dsymfind import debugsymbols
from dsymfind.apple import bundle
from dsymfind.stores import layouts
from dsymfind.vcs import checkouts, provenance

LLDB = shutil.which("lldb-14") or shutil.which("lldb")


@dataclass
class Team:
    origin: Path
    ci: Path  # gone once published, as a CI runner's folder is
    developer: Path
    commit: str  # what CI built
    uuid: str
    executable: Path  # a copy kept for lldb
    store: Path


def ci_publishes(
    tmp_path: Path, origin: Path, remote: str | None = None
) -> tuple[Path, str, git_builds.Build]:
    ci = git_builds.clone(origin, tmp_path / "runner" / "work" / "app")
    if remote is not None:
        git_builds.git(ci, "remote", "set-url", "origin", remote)
    built = git_builds.build(ci)
    done = run_cli("publish", "--to", str(tmp_path / "store"), str(built.dsym), cwd=ci)
    assert done.returncode == 0, done.stdout + done.stderr
    return ci, git_builds.git(ci, "rev-parse", "HEAD"), built


def keep_executable(tmp_path: Path, built: git_builds.Build) -> Path:
    kept = tmp_path / "exe" / built.executable.name
    kept.parent.mkdir()
    shutil.copyfile(built.executable, kept)
    return kept


def make_team(
    tmp_path: Path,
    *,
    developer_has_the_commit: bool = True,
    remote: str | None = None,
    links: dict[str, str] | None = None,
) -> Team:
    """`remote`: the URL both clones name their origin by (the path of the bare one by
    default); `links`: symlinks committed (name: target) before CI builds."""
    origin = git_builds.origin(tmp_path)
    developer = tmp_path / "home" / "src" / "app"
    if links:
        commit_links(git_builds.clone(origin, tmp_path / "linker"), links)
    if not developer_has_the_commit:
        git_builds.clone(origin, developer)  # before CI's commit exists
        pusher = git_builds.clone(origin, tmp_path / "pusher")
        git_builds.commit_files(pusher, {"README": "second\n"}, "second")
        git_builds.git(pusher, "push", "-q", "origin", "main")
    ci, commit, built = ci_publishes(tmp_path, origin, remote)
    if developer_has_the_commit:
        git_builds.clone(origin, developer)
        git_builds.commit_files(developer, {"Sources/helper.c": git_builds.HELPER_AHEAD}, "ahead")
    if remote is not None:
        git_builds.git(developer, "remote", "set-url", "origin", remote)
    executable = keep_executable(tmp_path, built)
    shutil.rmtree(ci)
    return Team(origin, ci, developer, commit, built.uuid, executable, tmp_path / "store")


def commit_links(repo: Path, links: dict[str, str]) -> None:
    for name, target in links.items():
        (repo / name).symlink_to(target)
    git_builds.git(repo, "add", "-A")
    git_builds.git(repo, "commit", "-q", "-m", "links")
    git_builds.git(repo, "push", "-q", "origin", "main")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


@pytest.fixture
def serving(team: Team, config_file: Path) -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [team.developer])
        yield server


def configure(
    config_file: Path, server: ss.SymbolServer, clones: list[Path], more: str = "timeout = 30\n"
) -> None:
    write_config(
        config_file,
        f"{more}source_checkouts = {toml_list(clones)}\n"
        f"[[servers]]\nurl = '{server.url}/'\nlayout = 'unified'\n",
    )


def fetched(uuid: str, env: dict[str, str] | None = None) -> dict[str, str]:
    done = run_cli("fetch", uuid, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_helper(uuid).entry(uuid)


def cached_plist(answer: dict[str, str], uuid: str) -> dict[str, object]:
    bundle_dir = bundle.bundle_of(answer[debugsymbols.DSYM_PATH])
    assert bundle_dir is not None
    return bundle.read_uuid_plist(bundle_dir, uuid)


def worktree_of(cache_dir: Path, team: Team) -> Path:
    return cache_dir / "sources" / f"origin-{team.commit[:12]}"


def clone_state(clone: Path) -> dict[str, object]:
    """What we must never change, byte for byte: every name under the clone, `.git` and its
    work tree alike, with its kind, size, mtime and content (or link target), read first;
    then what git reports of it: HEAD, worktrees, refs, stashes, local config and status,
    asked without optional locks (a plain `git status` would refresh the index itself)."""
    on_disk = {str(path.relative_to(clone)): _entry(path) for path in sorted(clone.rglob("*"))}
    return {
        "on disk": on_disk,
        "HEAD": _asked(clone, "rev-parse", "HEAD"),
        "worktrees": _asked(clone, "worktree", "list", "--porcelain"),
        "refs": _asked(clone, "for-each-ref"),
        "stashes": _asked(clone, "stash", "list"),
        "config": _asked(clone, "config", "--list", "--local"),
        "status": _asked(clone, "status", "--porcelain", "--untracked-files=all"),
    }


def _entry(path: Path) -> tuple[int, int, int, bytes | str | None]:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        content: bytes | str | None = os.readlink(path)
    elif stat.S_ISREG(st.st_mode):
        content = path.read_bytes()
    else:
        content = None
    return stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns, content


def _asked(clone: Path, *args: str) -> str:
    return git_builds.git(clone, "--no-optional-locks", *args)


def test_a_fetched_dsym_maps_the_build_root_to_a_worktree_at_the_built_commit(
    team: Team, serving: ss.SymbolServer, cache_dir: Path
) -> None:
    """The worktree comes from the cache's own clone, which borrows the user's objects: the
    user's clone gains no worktree (it used to, in their `git worktree list`)."""
    before = clone_state(team.developer)
    answer = fetched(team.uuid)
    worktree = worktree_of(cache_dir, team)
    assert answer[debugsymbols.BUILD_SOURCE_PATH] == str(team.ci)
    assert answer[debugsymbols.SOURCE_PATH] == str(worktree)
    assert git_builds.git(worktree, "rev-parse", "HEAD") == team.commit
    assert (worktree / "Sources" / "helper.c").read_text() == git_builds.HELPER_AS_BUILT
    values = cached_plist(answer, team.uuid)
    assert values[debugsymbols.BUILD_SOURCE_PATH] == str(team.ci)
    assert values[debugsymbols.SOURCE_PATH] == str(worktree)
    assert values[debugsymbols.SOURCE_PATH_REMAPPING] == {str(team.ci): str(worktree)}
    assert values[debugsymbols.VERSION] == "3"
    assert provenance.checked(values[debugsymbols.SOURCE_CONTROL]) is not None
    assert clone_state(team.developer) == before
    (own,) = (cache_dir / "clones").iterdir()
    alternates = (own / "objects" / "info" / "alternates").read_text()
    assert alternates == f"{team.developer / '.git' / 'objects'}\n"
    assert str(worktree) in git_builds.git(own, "worktree", "list")
    checked = run_cli("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.skipif(LLDB is None, reason="lldb is not installed (scripts/bootstrap installs it)")
def test_lldb_shows_the_line_as_it_was_built_under_the_answers_mapping(
    team: Team, serving: ss.SymbolServer
) -> None:
    """Linux lldb does not read the per-UUID plist; it takes the mapping as a setting."""
    answer = fetched(team.uuid)
    assert LLDB is not None
    commands = [
        f"target create --arch arm64 {team.executable}",
        f"target symbols add {answer[debugsymbols.DSYM_PATH]}",
        f"settings set target.source-map {answer['DBGBuildSourcePath']} {answer['DBGSourcePath']}",
        "source list -n helper",
    ]
    done = subprocess.run(
        [LLDB, "-b", *(word for command in commands for word in ("-o", command))],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": "/usr/lib/python3/dist-packages"},
        timeout=120,
        check=False,
    )
    listed = done.stdout.split("source list -n helper", 1)[-1]
    assert git_builds.BUILT_LINE in listed, done.stdout + done.stderr
    assert "ahead" not in listed


def test_a_commit_the_clone_lacks_is_fetched_from_its_remote_into_the_caches_own_clone(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    """It used to be fetched into the user's clone: objects of ours in their repository."""
    team = make_team(tmp_path, developer_has_the_commit=False)
    assert (
        subprocess.run(
            ["git", "-C", str(team.developer), "cat-file", "-e", f"{team.commit}^{{commit}}"],
            capture_output=True,
        ).returncode
        != 0
    )
    before = clone_state(team.developer)
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [team.developer])
        answer = fetched(team.uuid)
    worktree = worktree_of(cache_dir, team)
    assert answer[debugsymbols.SOURCE_PATH] == str(worktree)
    assert git_builds.git(worktree, "rev-parse", "HEAD") == team.commit
    assert clone_state(team.developer) == before
    (own,) = (cache_dir / "clones").iterdir()
    assert git_builds.git(own, "cat-file", "-t", team.commit) == "commit"
    assert git_builds.git(own, "for-each-ref") == ""  # no ref: the worktree's HEAD keeps it


def test_a_clean_clone_at_the_commit_is_used_as_it_is(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    team = make_team(tmp_path)
    git_builds.git(team.developer, "checkout", "-q", "--detach", team.commit)
    before = clone_state(team.developer)
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [team.developer])
        answer = fetched(team.uuid)
    assert answer[debugsymbols.SOURCE_PATH] == str(team.developer)
    assert not (cache_dir / "sources").exists()
    assert clone_state(team.developer) == before  # `git status` refreshed no index


def test_without_a_matching_clone_the_answer_is_as_before_and_the_log_says_why(
    team: Team, config_file: Path, isolated_home: Path, tmp_path: Path
) -> None:
    other = git_builds.clone(git_builds.origin(tmp_path / "other"), tmp_path / "other-clone")
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [other, tmp_path / "not-a-clone"])
        answer = fetched(team.uuid)
    assert debugsymbols.SOURCE_PATH not in answer
    log = (isolated_home / ".state" / "dsymfind" / "dsymfind.log").read_text()
    assert f"no clone in source_checkouts has the remote {team.origin}" in log
    shown = run_cli("sources", team.uuid)
    assert shown.returncode == 1
    assert "no clone in source_checkouts has the remote" in shown.stdout


def test_without_git_the_dsym_is_fetched_all_the_same(
    team: Team, serving: ss.SymbolServer, tmp_path: Path
) -> None:
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    answer = fetched(team.uuid, env=env)
    assert debugsymbols.SOURCE_PATH not in answer
    assert Path(answer[debugsymbols.DSYM_PATH]).is_file()


def test_gc_removes_the_worktrees_no_cached_dsym_names(
    team: Team, serving: ss.SymbolServer, cache_dir: Path
) -> None:
    fetched(team.uuid)
    worktree = worktree_of(cache_dir, team)
    kept = run_cli("gc")
    assert kept.returncode == 0 and worktree.is_dir(), kept.stdout + kept.stderr
    status = run_cli("status")
    assert "source worktrees: 1" in status.stdout, status.stdout
    evicted = run_cli("gc", "--max-size", "0")
    assert evicted.returncode == 0, evicted.stdout + evicted.stderr
    assert f"removed worktree {worktree}" in evicted.stdout
    assert not worktree.exists()
    assert str(worktree) not in git_builds.git(team.developer, "worktree", "list")
    assert "removed clone " in evicted.stdout  # no worktree is made from it any more
    assert list((cache_dir / "clones").iterdir()) == []


def test_gc_keeps_a_worktree_with_changes_and_says_so(
    team: Team, serving: ss.SymbolServer, cache_dir: Path
) -> None:
    fetched(team.uuid)
    worktree = worktree_of(cache_dir, team)
    (worktree / "Sources" / "helper.c").write_text("/* the user's own edit */\n")
    evicted = run_cli("gc", "--max-size", "0")
    assert evicted.returncode == 0, evicted.stdout + evicted.stderr
    assert f"kept worktree {worktree}" in evicted.stdout
    assert (worktree / "Sources" / "helper.c").read_text() == "/* the user's own edit */\n"
    assert len(list((cache_dir / "clones").iterdir())) == 1  # the worktree's clone stays
    assert git_builds.git(worktree, "status", "--porcelain") == "M Sources/helper.c"


def test_gc_without_git_keeps_every_worktree(
    team: Team, serving: ss.SymbolServer, cache_dir: Path, tmp_path: Path
) -> None:
    """launchd's PATH may lack git: a worktree it cannot ask about may hold the user's
    changes, so it stays (it used to be deleted as mere files)."""
    fetched(team.uuid)
    worktree = worktree_of(cache_dir, team)
    (worktree / "Sources" / "helper.c").write_text("/* the user's own edit */\n")
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    evicted = run_cli("gc", "--max-size", "0", env={**os.environ, "PATH": str(empty)})
    assert evicted.returncode == 0, evicted.stdout + evicted.stderr
    assert f"kept worktree {worktree}" in evicted.stdout
    assert (worktree / "Sources" / "helper.c").read_text() == "/* the user's own edit */\n"


def test_sources_says_what_the_mapping_is(
    team: Team, serving: ss.SymbolServer, cache_dir: Path
) -> None:
    fetched(team.uuid)
    shown = run_cli("sources", team.uuid)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    worktree = worktree_of(cache_dir, team)
    assert f"settings set target.source-map {team.ci} {worktree}" in shown.stdout
    assert team.commit in shown.stdout


def test_a_staging_worktree_a_killed_run_left_is_removed_by_gc(
    team: Team, serving: ss.SymbolServer, cache_dir: Path
) -> None:
    fetched(team.uuid)
    layout_sources = cache_dir / "sources"
    leftover = layout_sources / f"{checkouts.WORKTREE_STAGING}origin-{team.commit[:12]}.99999"
    git_builds.git(team.developer, "worktree", "add", "-q", "--detach", str(leftover), team.commit)
    done = run_cli("gc")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not leftover.exists()
    assert worktree_of(cache_dir, team).is_dir()


# --- the first answer, slow checkouts, symlinks, sources configured later -------------

# A `git worktree add` this much slower leaves no doubt about which comes first: the
# mapping, or a helper polling every 50 ms for the dSYM.
SLOW_WORKTREE_LOOKS = 30
# The helper's timeout where a checkout is held back past it: room for the dSYM's own
# download on a loaded machine.
HELPER_TIMEOUT = 15
# A bound on how long a held-back git waits for its release (0.1 s looks).
HELD_GIT_LOOKS = 6000


def log_text(home: Path) -> str:
    return (home / ".state" / "dsymfind" / "dsymfind.log").read_text()


def with_git(folder: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def downloader_gone(uuid: str) -> None:
    for _ in range(HELD_GIT_LOOKS):
        if not downloader_pids(uuid):
            return
        time.sleep(0.1)
    raise AssertionError(f"the downloader of {uuid} is still running")


def test_the_first_answer_carries_the_mapping(
    team: Team, serving: ss.SymbolServer, cache_dir: Path, tmp_path: Path
) -> None:
    """The downloader used to link the dSYM before it checked out: a helper waiting for it
    answered without the mapping, and lldb keeps that answer for the session."""
    slow = git_builds.waiting_git(
        tmp_path / "slow-git",
        when=" worktree add ",
        release=tmp_path / "never",
        looks=SLOW_WORKTREE_LOOKS,
    )
    first = run_helper(team.uuid, env=with_git(slow)).entry(team.uuid)
    worktree = worktree_of(cache_dir, team)
    assert first.get(debugsymbols.SOURCE_PATH) == str(worktree), first
    assert first[debugsymbols.BUILD_SOURCE_PATH] == str(team.ci)
    assert cached_plist(first, team.uuid)[debugsymbols.SOURCE_PATH] == str(worktree)


def test_a_checkout_past_the_helpers_deadline_leaves_the_dsym_answered_and_its_mapping_follows(
    tmp_path: Path, config_file: Path, cache_dir: Path, isolated_home: Path
) -> None:
    """A fetch from a slow remote must not keep the dSYM from a debugger past its deadline:
    it gets the symbols then, the mapping once the commit has arrived."""
    team = make_team(tmp_path, developer_has_the_commit=False)
    release = tmp_path / "remote-answers"
    held = git_builds.waiting_git(
        tmp_path / "held-git", when=" fetch ", release=release, looks=HELD_GIT_LOOKS
    )
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [team.developer], f"timeout = {HELPER_TIMEOUT}\n")
        first = run_helper(team.uuid, env=with_git(held)).entry(team.uuid)
        assert Path(first[debugsymbols.DSYM_PATH]).is_file(), first
        assert debugsymbols.SOURCE_PATH not in first
        release.touch()
        downloader_gone(team.uuid)
        second = run_helper(team.uuid).entry(team.uuid)
    worktree = worktree_of(cache_dir, team)
    assert second[debugsymbols.SOURCE_PATH] == str(worktree)
    log = log_text(isolated_home)
    assert "not checked out yet when a debugger may be waiting" in log
    assert f"sources: {team.ci} -> {worktree}" in log


# The helper's deadline and the download's (git's): the fetch over ssh ends at the second.
SHORT_DOWNLOADS = "timeout = 5\ndownload_timeout = 20\n"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh (scripts/bootstrap installs it)")
def test_a_remote_over_ssh_that_never_answers_ends_with_the_fetch(
    tmp_path: Path, config_file: Path, cache_dir: Path, isolated_home: Path
) -> None:
    """`fetch` used to return at the deadline with ssh still running, its parent init."""
    with git_builds.SilentHost() as host:
        team = make_team(tmp_path, developer_has_the_commit=False, remote=host.url())
        with ss.SymbolServer(team.store) as server:
            configure(config_file, server, [team.developer], SHORT_DOWNLOADS)
            done = run_cli("fetch", team.uuid, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert git_builds.ssh_processes(host.port) == {}
    answer = run_helper(team.uuid).entry(team.uuid)
    assert debugsymbols.SOURCE_PATH not in answer
    assert "no sources: git fetch in " in log_text(isolated_home)


@pytest.mark.parametrize(
    ("links", "path", "mapped"),
    [
        ({"esc": "/etc"}, "esc", None),
        ({"back": "../.."}, "back", None),
        ({"deep": "Sources/../.."}, "deep", None),
        ({"ok": "Sources"}, "ok", "Sources"),
    ],
)
def test_a_committed_symlink_leading_out_of_the_checkout_gives_no_mapping(
    tmp_path: Path,
    config_file: Path,
    cache_dir: Path,
    isolated_home: Path,
    links: dict[str, str],
    path: str,
    mapped: str | None,
) -> None:
    """A store's record names `path` inside the repository; a symlink the build's commit
    holds used to lead the mapping anywhere (`esc -> /etc`: DBGSourcePath was /etc)."""
    team = make_team(tmp_path, links=links)
    record_path(team, path)
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [team.developer])
        answer = fetched(team.uuid)
    worktree = worktree_of(cache_dir, team)
    if mapped is None:
        assert debugsymbols.SOURCE_PATH not in answer
        assert debugsymbols.SOURCE_PATH not in cached_plist(answer, team.uuid)
        assert f"the recorded path {path!r} leads out of {worktree}" in log_text(isolated_home)
    else:
        assert answer[debugsymbols.SOURCE_PATH] == str(worktree / mapped)


def test_the_clone_itself_is_held_to_the_same_rule(
    tmp_path: Path, config_file: Path, isolated_home: Path
) -> None:
    team = make_team(tmp_path, links={"esc": "/etc"})
    record_path(team, "esc")
    git_builds.git(team.developer, "checkout", "-q", "--detach", team.commit)
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [team.developer])
        answer = fetched(team.uuid)
    assert debugsymbols.SOURCE_PATH not in answer
    assert f"the recorded path 'esc' leads out of {team.developer}" in log_text(isolated_home)


def record_path(team: Team, path: str) -> None:
    """Make the store's record say the build's root is `path` inside the repository."""
    meta_file = (team.store / layouts.debug_file_key(layouts.UNIFIED, team.uuid)).with_name("meta")
    meta = json.loads(meta_file.read_bytes())
    meta["source"]["path"] = path
    meta_file.write_text(json.dumps(meta))


def test_sources_configured_after_the_fetch_are_checked_out_on_demand(
    team: Team, config_file: Path, cache_dir: Path, isolated_home: Path
) -> None:
    """`sources` used to say "no checkout was made (see the log)", the log still "no
    source_checkouts configured"."""
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [])
        assert debugsymbols.SOURCE_PATH not in fetched(team.uuid)
        configure(config_file, server, [team.developer])
        shown = run_cli("sources", team.uuid, timeout=300)
    worktree = worktree_of(cache_dir, team)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"source: {worktree}" in shown.stdout
    assert f"settings set target.source-map {team.ci} {worktree}" in shown.stdout
    answer = run_helper(team.uuid).entry(team.uuid)
    assert answer[debugsymbols.SOURCE_PATH] == str(worktree)
    assert f"sources now: {team.ci} -> {worktree}" in log_text(isolated_home)


def test_fetch_of_a_cached_dsym_without_its_sources_checks_them_out(
    team: Team, config_file: Path, cache_dir: Path, isolated_home: Path
) -> None:
    with ss.SymbolServer(team.store) as server:
        configure(config_file, server, [])
        fetched(team.uuid)
        configure(config_file, server, [team.developer])
        again = run_cli("fetch", team.uuid, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        worktree = worktree_of(cache_dir, team)
        assert f"{team.uuid}  sources: {team.ci} -> {worktree}" in again.stdout
        assert run_helper(team.uuid).entry(team.uuid)[debugsymbols.SOURCE_PATH] == str(worktree)
        shutil.rmtree(worktree)  # gone by hand: made again
        remade = run_cli("fetch", team.uuid, timeout=300)
    assert f"{team.uuid}  sources: {team.ci} -> {worktree}" in remade.stdout, remade.stdout
    assert (worktree / "Sources" / "helper.c").read_text() == git_builds.HELPER_AS_BUILT
    assert log_text(isolated_home).count(f"sources now: {team.ci} -> {worktree}") == 2
