"""`gc` while a helper answers from the entry it would evict.

`dsymForUUID --ignoreNegativeCache --copyExecutable UUID` (what LLDB 15+'s crashlog sends)
of a remembered dSYM whose executable no server has: the helper reads the remembered
answer, then waits for the executable, up to its deadline. A `dsymfind gc --max-size 0`
started meanwhile must neither make that answer name a removed path nor remove the entry
the helper answers from. Real processes and a real loopback server that answers 404 (or
stalls on the executable), a fixed number of rounds.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from support import symbol_server as ss
from support.fixtures import HELLO_UUID, write_config, zip_bundles
from support.processes import BIN, downloader_pids, run_helper
from support.served import url_path

from dsymfind import debugsymbols
from dsymfind.cache import locks
from dsymfind.main import main
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

ROUNDS = {"404": 10, "stalls": 5}
# The helper's own deadline, and its downloader's; RUN_LIMIT only stops a hung run.
HELPER_TIMEOUT = 2
DOWNLOAD_TIMEOUT = 3
RUN_LIMIT = 120
# How long the server takes to say it has no executable (within HELPER_TIMEOUT).
SLOW_404 = 0.8
CRASHLOG_FLAGS = ("--ignoreNegativeCache", "--copyExecutable")
PATH_KEYS = (debugsymbols.DSYM_PATH, debugsymbols.SYMBOL_RICH_EXECUTABLE)


class Round(NamedTuple):
    answer: dict[str, str]
    missing: list[str]  # paths it named that did not exist the moment the helper exited
    gc_out: str


@pytest.fixture
def zipped(products: Path, tmp_path: Path, cache_dir: Path) -> Iterator[Path]:
    """hello's dSYM as a zip `dsymfind index` unpacks into a cache entry; no downloader of
    hello outlives the test."""
    yield zip_bundles(tmp_path / "dSYMs.zip", [products / "hello.dSYM"])
    settle(cache_dir)


def configure(config_file: Path, server: ss.SymbolServer) -> None:
    write_config(
        config_file,
        f"timeout = {HELPER_TIMEOUT}\ndownload_timeout = {DOWNLOAD_TIMEOUT}\n"
        f"[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
    )


def slow_404(exchange: ss.Exchange) -> None:
    if exchange.pause(SLOW_404):
        exchange.respond(404)


def cache_hello(cache_dir: Path, zipped: Path) -> None:
    """The entry back in the cache if the last round's gc took it, its answer remembered."""
    if not (cache_dir / "dsyms" / uuid_hex(HELLO_UUID)).is_dir():
        assert main(["index", str(zipped)]) == 0
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert debugsymbols.SYMBOL_RICH_EXECUTABLE not in answer
    assert (cache_dir / "answers" / uuid_hex(HELLO_UUID)).is_file()


def settle(cache_dir: Path) -> None:
    """No downloader of the last round still at work (each gives up by its own deadline)."""
    cache = CachePaths(str(cache_dir))
    limit = time.monotonic() + RUN_LIMIT
    while downloader_pids(HELLO_UUID) or locks.is_held(cache, HELLO_UUID):
        assert time.monotonic() < limit, "a downloader outlived its own deadline"
        time.sleep(0.05)


def answer_while_gc_runs() -> Round:
    """One crashlog-style lookup with `gc --max-size 0` started right behind it."""
    helper = subprocess.Popen(
        [str(BIN / "dsymForUUID"), *CRASHLOG_FLAGS, HELLO_UUID],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    gc = subprocess.Popen(
        [str(BIN / "dsymfind"), "gc", "--max-size", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    out, err = helper.communicate(timeout=RUN_LIMIT)
    document = plistlib.loads(out)  # first: the paths are looked at as the helper left them
    answer = document.get(HELLO_UUID, {})
    missing = [answer[k] for k in PATH_KEYS if k in answer and not os.path.exists(answer[k])]
    gc_out, gc_err = gc.communicate(timeout=RUN_LIMIT)
    assert (helper.returncode, err) == (0, b"")
    assert (gc.returncode, gc_err) == (0, "")
    assert set(document) <= {HELLO_UUID}
    return Round(answer, missing, gc_out)


@pytest.mark.parametrize("executable", ["404", "stalls"])
def test_gc_never_removes_what_a_waiting_helper_answers_from(
    zipped: Path, cache_dir: Path, config_file: Path, executable: str
) -> None:
    rounds = []
    with ss.SymbolServer() as server:  # nothing to serve: 404 for every key
        if executable == "stalls":
            server.route(url_path(HELLO_UUID) + ".app", ss.stall())
        else:
            # A 404 after a moment: long enough for gc (a process start behind the helper)
            # to meet the entry in use however fast the download fails.
            server.route(url_path(HELLO_UUID) + ".app", slow_404)
        configure(config_file, server)
        for _ in range(ROUNDS[executable]):
            cache_hello(cache_dir, zipped)
            rounds.append(answer_while_gc_runs())
            settle(cache_dir)
    assert [r.missing for r in rounds if r.missing] == []
    # The dSYM was answered, not only refused, and gc met the entry in use.
    assert any(debugsymbols.DSYM_PATH in r.answer for r in rounds)
    assert any("kept " in r.gc_out for r in rounds)
