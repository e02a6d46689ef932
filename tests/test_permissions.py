"""The cache is private: created 0700, and refused when other users could write into it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, HELLO_UUID, dwarf_of, make_tree_link
from support.processes import run_cli, run_helper

from dsymfind import permissions
from dsymfind.errors import DsymfindError
from dsymfind.uuids import uuid_hex


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_cache_is_private(cache_dir: Path) -> None:
    permissions.secure_cache(str(cache_dir))
    assert mode(cache_dir) == 0o700


@pytest.mark.parametrize("bad_mode", [0o777, 0o775, 0o757])
def test_a_cache_others_can_write_is_refused_with_the_fix(cache_dir: Path, bad_mode: int) -> None:
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(bad_mode)
    with pytest.raises(DsymfindError, match=r"writable by other users.*chmod 700"):
        permissions.secure_cache(str(cache_dir))


def test_a_cache_inside_a_shared_folder_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    if os.getuid() == 0:
        os.chown(shared, 12345, -1)  # someone else's world-writable folder
    else:
        pytest.skip("needs root to give the folder to another user")
    with pytest.raises(DsymfindError, match="which holds it, is writable by other users"):
        permissions.secure_cache(str(shared / "cache"))


def test_a_sticky_shared_parent_like_tmp_is_fine(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    permissions.secure_cache(str(shared / "cache"))
    assert mode(shared / "cache") == 0o700


def test_the_downloader_refuses_and_writes_nothing(cache_dir: Path) -> None:
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(0o777)
    done = run_cli("_download", HELLO_UUID)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "refusing the cache" in done.stderr
    assert list(cache_dir.iterdir()) == []


def test_the_helper_refuses_to_answer_from_a_cache_others_can_write(cache_dir: Path) -> None:
    entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)  # where the cache keeps a dSYM
    planted = entry / "planted.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(dwarf_of(FIXTURES / "hello.dSYM").read_bytes())
    make_tree_link(cache_dir / "uuids", HELLO_UUID, planted)
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)  # a private cache: answered
    cache_dir.chmod(0o777)
    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert "refusing the cache" in error and "writable by other users" in error


def test_under_a_loose_umask_the_helper_still_makes_a_private_cache(
    cache_dir: Path, config_file: Path, tmp_path: Path
) -> None:
    import os
    import subprocess

    from support import symbol_server as ss
    from support.fixtures import write_config
    from support.processes import BIN

    from dsymfind.uuids import tree_entry

    store = tmp_path / "store"
    target = Path(tree_entry(str(store), HELLO_UUID))
    target.parent.mkdir(parents=True)
    target.write_bytes(dwarf_of(FIXTURES / "hello.dSYM").read_bytes())
    with ss.SymbolServer(store) as server:
        write_config(
            config_file, f"timeout = 20\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )
        for _ in range(2):  # the second answers from the cache the first one filled
            done = subprocess.run(
                ["sh", "-c", f'umask 002; exec "{BIN / "dsymForUUID"}" {HELLO_UUID}'],
                capture_output=True,
                check=True,
                env=dict(os.environ),
            )
            assert b"DBGDSYMPath" in done.stdout, done.stdout
    assert mode(cache_dir) == 0o700
    for folder in ("locks", "dsyms", "uuids", "answers"):
        assert mode(cache_dir / folder) & 0o077 == 0, folder
