"""`dsymfind pdb` when the environment fails one file: an unusable downstream store, a key
lock held too long, an unwritable cache. Each is that file's miss line, never an internal
error, and the other files are still looked up."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import write_config
from support.processes import run_cli
from support.symbol_server import SymbolServer
from test_pdb_fetch import HELLO_KEY, HELLO_PDB, PE_FIXTURES, alone, find, gets, put, serve_root
from test_pdb_fetch import server as server  # the fixture

from dsymfind.fetch import pdb_search
from dsymfind.paths import short_name
from dsymfind.stores import transfer
from dsymfind.stores.base import Fetched

# Its PDB lies beside it: found whatever happens to the symbol path.
FOUND_BESIDE = PE_FIXTURES / "greet64.dll"


def test_a_downstream_store_under_a_file_is_a_miss_not_an_internal_error(
    tmp_path: Path, server: SymbolServer
) -> None:
    put(serve_root(server), HELLO_PDB)
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("not a folder\n")
    symbol_path = f"srv*{not_a_folder}/store*{server.url}"

    done = run_cli("pdb", "--symbol-path", symbol_path, str(alone(tmp_path)), str(FOUND_BESIDE))

    assert done.returncode == 1
    assert done.stdout.splitlines() == [str(PE_FIXTURES / "greet64.pdb")]
    (line,) = done.stderr.splitlines()
    assert line.startswith("dsymfind: ") and "internal error" not in line
    assert f"no matching hello64.pdb ({HELLO_KEY})" in line
    assert f"{not_a_folder}/store: cannot write (Not a directory)" in line


def test_a_key_lock_held_too_long_is_a_miss(
    tmp_path: Path,
    server: SymbolServer,
    capsys: pytest.CaptureFixture[str],
    config_file: Path,
) -> None:
    put(serve_root(server), HELLO_PDB)
    write_config(config_file, "download_timeout = 0.3\n")
    down = tmp_path / "down"
    locks = down / pdb_search.LOCK_FOLDER
    locks.mkdir(parents=True)
    lock_file = locks / (short_name(f"hello64.pdb/{HELLO_KEY}") + ".lock")
    with open(lock_file, "w") as holder:  # another process's download, as far as flock knows
        fcntl.flock(holder, fcntl.LOCK_EX)
        status, out, err = find(capsys, [alone(tmp_path), FOUND_BESIDE], f"srv*{down}*{server.url}")
    assert (status, out) == (1, [str(PE_FIXTURES / "greet64.pdb")])
    (line,) = err
    assert f"{down}: another process held hello64.pdb too long" in line
    assert gets(server) == 0
    assert find(capsys, [alone(tmp_path)], f"srv*{down}*{server.url}")[0] == 0  # lock freed


def test_an_unwritable_cache_scratch_folder_is_a_miss(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str], cache_dir: Path
) -> None:
    cache_dir.mkdir(parents=True, mode=0o700)
    (cache_dir / "tmp").write_text("a file where the scratch folder goes\n")
    status, out, err = find(
        capsys, [alone(tmp_path), FOUND_BESIDE], f"srv*{tmp_path / 'down'}*{server.url}"
    )
    assert (status, out) == (1, [str(PE_FIXTURES / "greet64.pdb")])
    (line,) = err
    assert f"{server.url}: cannot fetch (File exists)" in line
    assert os.path.isfile(cache_dir / "tmp")


def test_a_bug_in_one_servers_source_leaves_the_next_server_to_answer(
    tmp_path: Path,
    server: SymbolServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dSYM fetcher's containment (base.contained) serves the PDB search too."""
    broken = SymbolServer().start()
    original = transfer.download

    def download(client: Any, url: str, *args: Any, **kwargs: Any) -> Fetched:
        if url.startswith(broken.url):
            raise RuntimeError("a bug in this source")
        return original(client, url, *args, **kwargs)

    monkeypatch.setattr(transfer, "download", download)
    put(serve_root(server), HELLO_PDB)
    down = tmp_path / "down"
    try:
        status, out, err = find(
            capsys, [alone(tmp_path)], f"srv*{down}*{broken.url};srv*{down}*{server.url}"
        )
    finally:
        broken.stop()

    assert (status, err) == (0, [])
    assert out == [str(down / "hello64.pdb" / HELLO_KEY / "hello64.pdb")]
