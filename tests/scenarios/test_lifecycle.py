"""A cache entry's whole life across commands: a user's bundle found, shadowed, rebuilt in
place with another UUID, re-indexed, collected and fetched again; the executable of a
user's dSYM fetched without writing into the user's folder. Real fixtures, the real
helper and downloader processes, a real server on 127.0.0.1."""

from __future__ import annotations

import os
import plistlib
import time
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    dwarf_of,
    folder_with,
    link_of,
    snapshot,
    toml_list,
    write_config,
)
from support.processes import run_cli, run_helper
from support.served import GREET_DWARF, HELLO_DWARF, url_path

from dsymfind import settings
from dsymfind.cache import shadow
from dsymfind.fetch.downloader import run_download
from dsymfind.local_lookup import Lookup
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """A user's build folder holding hello.dSYM, and no executable beside it."""
    return folder_with(tmp_path / "user", "hello.dSYM")


def rebuild_in_place(bundle: Path) -> None:
    """What a rebuild does to a bundle: the same path, a DWARF file with another UUID."""
    dwarf_of(bundle).write_bytes(GREET_DWARF)


def shadow_entry(cache_dir: Path, uuid: str) -> Path:
    return cache_dir / "dsyms" / uuid_hex(uuid)


def cli(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    return done.stdout


def serve_hello(server: ss.SymbolServer, config_file: Path, extra: str = "") -> None:
    server.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))
    server.route(f"{url_path(HELLO_UUID)}.app", ss.body((FIXTURES / "hello").read_bytes()))
    write_config(config_file, f"{extra}\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n")


def test_copy_executable_never_writes_into_a_users_bundle(
    user: Path, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    serve_hello(server, config_file, extra=f"search_paths = {toml_list([user])}")
    before = snapshot(user)

    run_helper("--copyExecutable", HELLO_UUID)

    assert snapshot(user) == before  # no <UUID>.plist written into the user's bundle
    bundle = shadow_entry(cache_dir, HELLO_UUID) / "hello.dSYM"
    assert shadow.target(str(shadow_entry(cache_dir, HELLO_UUID))) == str(
        dwarf_of(user / "hello.dSYM").resolve()
    )
    values = plistlib.loads(
        (bundle / "Contents" / "Resources" / f"{HELLO_UUID}.plist").read_bytes()
    )
    executable = cache_dir / "executables" / uuid_hex(HELLO_UUID) / HELLO_UUID
    assert values["DBGSymbolRichExecutable"] == str(executable)
    assert executable.read_bytes() == (FIXTURES / "hello").read_bytes()
    link = link_of(cache_dir, HELLO_UUID)
    assert os.path.normpath(link.parent / os.readlink(link)).startswith(str(bundle))
    assert run_cli("check").returncode == 0


def test_a_shadow_answers_for_the_users_file_it_stands_for(
    user: Path, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    serve_hello(server, config_file, extra=f"search_paths = {toml_list([user])}")
    users_dwarf = dwarf_of(user / "hello.dSYM")
    assert (
        run_download(HELLO_UUID, os.environ, ignore_negative_cache=True, copy_executable=True) == 0
    )
    cache = CachePaths(str(cache_dir))
    named = shadow.standing_in(cache, HELLO_UUID, str(users_dwarf))
    assert named is not None and named.startswith(str(shadow_entry(cache_dir, HELLO_UUID)))
    assert shadow.standing_in(cache, GREET_UUID, str(users_dwarf)) is None


def test_the_helper_answers_the_executable_fetched_for_a_users_dsym(
    user: Path, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    serve_hello(server, config_file, extra=f"search_paths = {toml_list([user])}")
    run_helper("--copyExecutable", HELLO_UUID)
    answer = run_helper("--copyExecutable", HELLO_UUID).entry(HELLO_UUID)
    executable = cache_dir / "executables" / uuid_hex(HELLO_UUID) / HELLO_UUID
    assert answer["DBGSymbolRichExecutable"] == str(executable)


def test_reindexing_a_rebuilt_bundle_gives_up_its_old_uuid(
    user: Path, cache_dir: Path, tmp_path: Path
) -> None:
    cli("index", "--source-map", f"/b={tmp_path}", str(user))
    assert shadow_entry(cache_dir, HELLO_UUID).is_dir()
    rebuild_in_place(user / "hello.dSYM")

    out = cli("index", "--source-map", f"/b={tmp_path}", str(user))

    assert "1 new or changed" in out
    assert not shadow_entry(cache_dir, HELLO_UUID).exists()
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert shadow.target(str(shadow_entry(cache_dir, GREET_UUID))) == str(
        dwarf_of(user / "hello.dSYM").resolve()
    )
    assert link_of(cache_dir, GREET_UUID).resolve() == dwarf_of(user / "hello.dSYM").resolve()
    assert run_cli("check").returncode == 0


def test_reindexing_a_rebuilt_bundle_linked_in_place_unlinks_its_old_uuid(
    user: Path, cache_dir: Path
) -> None:
    cli("index", str(user))
    rebuild_in_place(user / "hello.dSYM")
    cli("index", str(user))
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert link_of(cache_dir, GREET_UUID).resolve() == dwarf_of(user / "hello.dSYM").resolve()
    assert run_cli("check").returncode == 0


def test_dropping_the_source_maps_replaces_the_shadow_by_a_link_in_place(
    user: Path, cache_dir: Path, tmp_path: Path
) -> None:
    cli("index", "--source-map", f"/b={tmp_path}", str(user))
    cli("index", str(user))
    assert not shadow_entry(cache_dir, HELLO_UUID).exists()
    assert os.readlink(link_of(cache_dir, HELLO_UUID)).endswith(
        os.path.relpath(dwarf_of(user / "hello.dSYM"), link_of(cache_dir, HELLO_UUID).parent)
    )
    assert not list((cache_dir / "tmp").glob("removed-*"))


@pytest.mark.parametrize("source_maps", [True, False], ids=["shadow", "in-place"])
def test_gc_removes_what_a_rebuild_left_pointing_at_another_uuid(
    source_maps: bool, user: Path, cache_dir: Path, tmp_path: Path
) -> None:
    cli("index", *(["--source-map", f"/b={tmp_path}"] if source_maps else []), str(user))
    rebuild_in_place(user / "hello.dSYM")
    assert run_cli("check").returncode == 1  # wrong now, and said so

    out = cli("gc")

    if source_maps:
        assert f"removed {shadow_entry(cache_dir, HELLO_UUID)} (" in out
        assert "no longer carries" in out
    else:
        assert f"removed stale link {link_of(cache_dir, HELLO_UUID)}" in out
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert not shadow_entry(cache_dir, HELLO_UUID).exists()
    assert user.joinpath("hello.dSYM").is_dir()  # the user's bundle is never touched
    assert run_cli("check").returncode == 0


def test_a_stale_shadow_does_not_block_fetching_its_uuid(
    user: Path, server: ss.SymbolServer, config_file: Path, cache_dir: Path, tmp_path: Path
) -> None:
    cli("index", "--source-map", f"/b={tmp_path}", str(user))
    rebuild_in_place(user / "hello.dSYM")
    serve_hello(server, config_file)

    assert (
        run_download(HELLO_UUID, os.environ, ignore_negative_cache=False, copy_executable=False)
        == 0
    )
    assert (
        run_download(HELLO_UUID, os.environ, ignore_negative_cache=False, copy_executable=False)
        == 0
    )

    assert server.count(url_path(HELLO_UUID)) == 1  # the second run found it cached
    answer = Lookup(settings.load(os.environ)).find(HELLO_UUID)
    assert answer is not None
    assert Path(answer["DBGDSYMPath"]).read_bytes() == HELLO_DWARF
    assert shadow.target(str(shadow_entry(cache_dir, HELLO_UUID))) is None  # a download now
    assert run_cli("check").returncode == 0


def rich_executable_plist(cache_dir: Path, uuid: str) -> Path:
    (plist,) = shadow_entry(cache_dir, uuid).glob(f"*.dSYM/Contents/Resources/{uuid}.plist")
    return plist


@pytest.mark.parametrize("users_dsym", [False, True], ids=["download", "shadow"])
def test_gc_evicting_a_fetched_executable_unnames_it_in_the_dsyms_plist(
    users_dsym: bool, user: Path, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    serve_hello(server, config_file, extra=f"search_paths = {toml_list([user])}" * users_dsym)
    assert (
        run_download(HELLO_UUID, os.environ, ignore_negative_cache=True, copy_executable=True) == 0
    )
    executable = cache_dir / "executables" / uuid_hex(HELLO_UUID)
    plist = rich_executable_plist(cache_dir, HELLO_UUID)
    assert plistlib.loads(plist.read_bytes())["DBGSymbolRichExecutable"] == str(
        executable / HELLO_UUID
    )
    long_ago = time.time() - 200 * 86400
    for path in (executable / HELLO_UUID, executable):
        os.utime(path, (long_ago, long_ago))

    out = cli("gc", "--max-age", "90d")

    assert f"removed {executable} (" in out
    assert not executable.exists()
    assert shadow_entry(cache_dir, HELLO_UUID).is_dir()  # the dSYM was used lately: it stays
    values = plistlib.loads(plist.read_bytes())
    assert "DBGSymbolRichExecutable" not in values  # DebugSymbols reads it through the tree
    assert values["DBGDSYMPath"] == str(next(plist.parent.glob("DWARF/*")))
    assert "DBGSymbolRichExecutable" not in run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert run_cli("check").returncode == 0
