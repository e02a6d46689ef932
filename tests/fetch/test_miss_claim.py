"""Helpers asking at once for one missing UUID start one downloader, not one each."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, dwarf_of, write_config
from support.processes import downloader_pids, run_helper

from dsymfind.uuids import tree_entry

HELPERS = 8
# How long the server takes to send the file: every helper has started well before.
TRICKLE_STEPS, TRICKLE_INTERVAL = 4, 0.3


def test_helpers_at_once_start_one_downloader(isolated_home: Path, config_file: Path) -> None:
    dwarf = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
    with ss.SymbolServer() as server:
        path = "/" + tree_entry("", HELLO_UUID).lstrip("/")
        step = len(dwarf) // TRICKLE_STEPS + 1
        server.route(path, ss.slow(dwarf, step=step, interval=TRICKLE_INTERVAL))
        write_config(
            config_file, f"timeout = 30\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )

        with ThreadPoolExecutor(HELPERS) as pool:
            runs = list(pool.map(lambda _: run_helper(HELLO_UUID), range(HELPERS)))
        end = time.monotonic() + 60
        while downloader_pids(HELLO_UUID) and time.monotonic() < end:
            time.sleep(0.05)

    assert all("DBGDSYMPath" in run.entry(HELLO_UUID) for run in runs)
    log = (isolated_home / ".state" / "dsymfind" / "dsymfind.log").read_text()
    # Each downloader run logs one line with its outcome.
    runs_logged = [line for line in log.splitlines() if f"{HELLO_UUID}: " in line]
    assert len(runs_logged) == 1, log
