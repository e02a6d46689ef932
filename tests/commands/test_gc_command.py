"""`dsymfind gc` as users run it: `--max-size 0` evicts every download (those in use stay)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import git_builds
from support import symbol_server as ss
from support.fixtures import (
    GREET_UUID,
    HELLO_UUID,
    toml_list,
    write_config,
)
from support.processes import fail_line, run_cli
from test_fetch_command import cached, server, server_env

from dsymfind.cache import locks
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

__all__ = ["server"]  # the fixture, shared with the fetch tests


def test_gc_max_size_0_evicts_every_download_but_one_in_use(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, GREET_UUID, env=env).returncode == 0
    cache = CachePaths(str(cache_dir))
    in_use = locks.download_lock(cache, GREET_UUID)  # as a reader or a downloader holds it

    with in_use.acquire():
        done = run_cli("gc", "--max-size", "0", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    hello_entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)
    greet_entry = cache_dir / "dsyms" / uuid_hex(GREET_UUID)
    assert f"removed {hello_entry} (" in done.stdout
    assert f"kept {greet_entry}: in use or being downloaded" in done.stdout
    assert not hello_entry.exists()
    assert not cached(cache_dir, HELLO_UUID)
    assert greet_entry.is_dir()
    assert cached(cache_dir, GREET_UUID)


def test_gc_max_size_0_with_a_unit_and_in_a_dry_run(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, env=env).returncode == 0
    entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)

    dry = run_cli("gc", "--max-size", "0GiB", "--dry-run", env=env)

    assert dry.returncode == 0, dry.stderr
    assert f"would remove {entry} (" in dry.stdout
    assert entry.is_dir()


@pytest.mark.parametrize("size", ["-1", "0XB", "zero", ""])
def test_gc_max_size_still_refuses_what_is_not_a_size(size: str) -> None:
    line = fail_line(run_cli("gc", "--max-size", size))
    assert (
        line == f"dsymfind: error: --max-size: expected a size such as 2GiB or 500MiB, got {size!r}"
    )


def test_max_cache_size_0_in_the_config_still_means_no_limit(
    server: ss.SymbolServer, cache_dir: Path, config_file: Path
) -> None:
    env = server_env(server)
    assert run_cli("fetch", HELLO_UUID, env=env).returncode == 0
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text("max_cache_size = 0\n")

    done = run_cli("gc", env=env)

    assert done.returncode == 0, done.stderr
    assert (cache_dir / "dsyms" / uuid_hex(HELLO_UUID)).is_dir()


def test_a_dry_run_lists_the_worktrees_the_real_run_removes(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    """A dSYM whose build's sources were checked out: evicting it takes its worktree, and a
    dry run says so (it used to see the entry still naming it, and list nothing)."""
    origin = git_builds.origin(tmp_path)
    ci = git_builds.clone(origin, tmp_path / "runner" / "app")
    built = git_builds.build(ci)
    store = tmp_path / "store"
    published = run_cli("publish", "--to", str(store), str(built.dsym), cwd=ci)
    assert published.returncode == 0, published.stdout + published.stderr
    developer = git_builds.clone(origin, tmp_path / "src" / "app")
    # A commit ahead of the build's: its sources get a worktree of their own.
    git_builds.commit_files(developer, {"Sources/helper.c": git_builds.HELPER_AHEAD}, "ahead")
    with ss.SymbolServer(store) as served:
        write_config(
            config_file,
            f"timeout = 30\nsource_checkouts = {toml_list([developer])}\n"
            f"[[servers]]\nurl = '{served.url}/'\nlayout = 'unified'\n",
        )
        fetched = run_cli("fetch", built.uuid, timeout=120)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    made = sorted(str(p) for p in (cache_dir / "sources").iterdir())
    assert len(made) == 1

    kept = run_cli("gc", "--dry-run")
    assert re.findall(WORKTREE_LINE, kept.stdout, re.M) == []  # its dSYM stays: so does it
    listed = run_cli("gc", "--max-size", "0", "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert [path for verb, path in re.findall(WORKTREE_LINE, listed.stdout, re.M)] == made
    assert {verb for verb, _ in re.findall(WORKTREE_LINE, listed.stdout, re.M)} == {"would remove"}
    assert all(Path(path).is_dir() for path in made)
    done = run_cli("gc", "--max-size", "0")
    assert done.returncode == 0, done.stderr
    assert re.findall(WORKTREE_LINE, done.stdout, re.M) == [("removed", path) for path in made]
    assert not any(Path(path).exists() for path in made)


WORKTREE_LINE = r"^(would remove|removed) worktree (.+)$"
