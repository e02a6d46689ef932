"""`copy_executables = true`: callers that never send --copyExecutable (LLDB 14's
crashlog.py) still get DBGSymbolRichExecutable; `dsymfind fetch --executables` fetches it
in the foreground. A native tree on the loopback symbol server holds hello's dSYM and
executable."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, write_config
from support.processes import run_cli, run_helper
from support.served import native_tree, url_path

from dsymfind import debugsymbols


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ss.SymbolServer]:
    served = native_tree(tmp_path / "served")
    shutil.copyfile(FIXTURES / "hello", served / (url_path(HELLO_UUID).lstrip("/") + ".app"))
    with ss.SymbolServer(served) as running:
        yield running


def configure(config_file: Path, server: ss.SymbolServer, extra: str = "") -> None:
    write_config(
        config_file,
        f"timeout = 30\n{extra}[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
    )


def test_the_setting_gives_an_executable_to_a_caller_that_never_asks(
    server: ss.SymbolServer, config_file: Path
) -> None:
    configure(config_file, server, "copy_executables = true\n")
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)  # crashlog.py 14's argv
    executable = Path(answer[debugsymbols.SYMBOL_RICH_EXECUTABLE])
    assert executable.read_bytes() == (FIXTURES / "hello").read_bytes()
    assert run_helper(HELLO_UUID).entry(HELLO_UUID) == answer  # and remembered so


def test_without_the_setting_no_executable_is_fetched(
    server: ss.SymbolServer, config_file: Path
) -> None:
    configure(config_file, server)
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert debugsymbols.SYMBOL_RICH_EXECUTABLE not in answer
    assert server.count(url_path(HELLO_UUID) + ".app") == 0


def test_fetch_executables_fetches_it_for_a_dsym_already_here(
    server: ss.SymbolServer, config_file: Path
) -> None:
    configure(config_file, server)
    assert run_cli("fetch", HELLO_UUID).returncode == 0
    done = run_cli("fetch", "--executables", HELLO_UUID)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    executable = Path(answer[debugsymbols.SYMBOL_RICH_EXECUTABLE])
    assert executable.read_bytes() == (FIXTURES / "hello").read_bytes()


def test_a_setting_that_is_no_flag_is_one_error(server: ss.SymbolServer, config_file: Path) -> None:
    configure(config_file, server, "copy_executables = 'yes'\n")
    done = run_cli("config")
    assert done.returncode == 1
    assert done.stderr.startswith("dsymfind: error: ")
    assert "copy_executables: expected true or false, got 'yes'" in done.stderr
