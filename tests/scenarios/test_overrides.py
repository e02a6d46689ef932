"""After a server recovers, the overrides a user reaches for work: `--ignore-negative-cache`
(fetch, prefetch, symbolicate, pdb) and the helper's `--ignoreNegativeCache` bypass both
the negative cache and server backoff, and every message that comes from either says so,
for how long, and names the flag of the command printing it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, PE_FIXTURES, dwarf_of, write_config
from support.processes import run_cli, run_helper

from dsymfind.uuids import tree_entry
from dsymfind.windows import pe

HELLO_PATH = "/" + tree_entry("", HELLO_UUID).lstrip("/")


@pytest.fixture
def server() -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer() as running:
        yield running


def configure(config_file: Path, url: str) -> None:
    write_config(
        config_file,
        f"timeout = 5\nserver_backoff = 600\n[[servers]]\nurl = '{url}/'\nlayout = 'native'\n",
    )


def fail_then_recover(server: ss.SymbolServer) -> None:
    """The server fails (a 503 on every try), so it is put in backoff; then it recovers."""
    recovered = ss.body(dwarf_of(FIXTURES / "hello.dSYM").read_bytes())
    server.route(HELLO_PATH, ss.statuses(503, 503, 503, then=recovered))


def test_fetch_after_a_recovery_says_how_long_the_backoff_lasts_and_can_ignore_it(
    server: ss.SymbolServer, config_file: Path
) -> None:
    configure(config_file, server.url)
    fail_then_recover(server)
    first = run_cli("fetch", HELLO_UUID)
    assert first.returncode == 1
    skipped = run_cli("fetch", HELLO_UUID)
    assert skipped.returncode == 1
    assert "failed recently; skipped for " in skipped.stdout + skipped.stderr
    assert "min more" in skipped.stdout + skipped.stderr
    assert "--ignore-negative-cache asks anyway" in skipped.stdout + skipped.stderr
    forced = run_cli("fetch", "--ignore-negative-cache", HELLO_UUID)
    assert forced.returncode == 0, forced.stdout + forced.stderr


def test_the_helper_flag_bypasses_backoff_too(server: ss.SymbolServer, config_file: Path) -> None:
    configure(config_file, server.url)
    fail_then_recover(server)
    assert run_cli("fetch", HELLO_UUID).returncode == 1  # leaves the server in backoff
    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert "skipped for" in error and "--ignoreNegativeCache asks anyway" in error, error
    assert "--ignore-negative-cache" not in error  # the admin commands' flag, not the helper's
    found = run_helper("--ignoreNegativeCache", HELLO_UUID).entry(HELLO_UUID)
    assert "DBGDSYMPath" in found


def test_doctor_lists_servers_in_backoff(server: ss.SymbolServer, config_file: Path) -> None:
    configure(config_file, server.url)
    fail_then_recover(server)
    run_cli("fetch", HELLO_UUID)
    done = run_cli("doctor")
    assert "in backoff: lookups skip it for" in done.stdout


def test_pdb_says_how_long_the_backoff_lasts_and_can_ignore_it(
    server: ss.SymbolServer, tmp_path: Path
) -> None:
    exe = tmp_path / "bin" / "hello64.exe"
    exe.parent.mkdir()
    shutil.copy(PE_FIXTURES / "hello64.exe", exe)
    key = pe.read_identity(str(exe)).require_codeview().key
    recovered = ss.body((PE_FIXTURES / "hello64.pdb").read_bytes())
    server.route(f"/hello64.pdb/{key}/hello64.pdb", ss.statuses(503, 503, 503, then=recovered))
    symbol_path = f"srv*{tmp_path / 'down'}*{server.url}"
    first = run_cli("pdb", "--symbol-path", symbol_path, str(exe))
    assert first.returncode == 1  # the server failed: in backoff
    skipped = run_cli("pdb", "--symbol-path", symbol_path, str(exe))
    assert skipped.returncode == 1
    assert "failed recently; skipped for " in skipped.stderr
    assert " s more (--ignore-negative-cache asks anyway)" in skipped.stderr
    forced = run_cli("pdb", "--ignore-negative-cache", "--symbol-path", symbol_path, str(exe))
    assert forced.returncode == 0, forced.stderr
