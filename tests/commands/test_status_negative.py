"""`dsymfind status` counts the negative cache's PDB keys."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import (
    PE_FIXTURES,
)
from support.processes import run_cli
from test_fetch_command import server

from dsymfind.cache_layout import CacheLayout

__all__ = ["server"]  # the fixture, shared with the fetch tests


def test_status_counts_pdb_keys_in_the_negative_cache(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("_NT_SYMBOL_PATH", raising=False)
    alone = tmp_path / "alone"  # away from its PDB, so only the server is asked
    alone.mkdir()
    shutil.copyfile(PE_FIXTURES / "hello64.exe", alone / "hello64.exe")
    shutil.copyfile(PE_FIXTURES / "greet64.dll", alone / "greet64.dll")
    with ss.SymbolServer(tmp_path / "empty") as empty:
        symbol_path = f"srv*{tmp_path / 'store'}*{empty.url}/"
        missed = run_cli(
            "pdb",
            "--symbol-path",
            symbol_path,
            str(alone / "hello64.exe"),
            str(alone / "greet64.dll"),
        )
    assert missed.returncode == 1, missed.stderr
    layout = CacheLayout(str(cache_dir))
    expired = layout.negative_marker("pdb-" + "0" * 16)
    Path(expired).touch()
    os.utime(expired, (time.time() - 7200, time.time() - 7200))  # older than the 3600 s TTL

    done = run_cli("status", "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["negative_cache"] == 0
    assert report["negative_pdb_keys"] == 2
    text = run_cli("status").stdout
    assert "negative cache: 0 UUIDs no server had recently, 2 PDB keys" in text
