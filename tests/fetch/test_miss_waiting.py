"""A helper that waits for another's download loads nothing it does not use.

When LLDB asks many helpers at once for one missing UUID, one claims the start and the
others only wait: on a 2-core machine each module those waiters import is CPU taken from
the downloader they wait for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from support.fixtures import MISSING_UUID, UNREACHABLE_SERVER, write_config

from dsymfind.cache import locks
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

# UNREACHABLE_SERVER is never contacted: the waiting helper leaves the download to the
# claim's holder.
# What only the downloader, its starter or an admin command needs (json: its import
# compiles regular expressions, about 10 ms of CPU).
NOT_FOR_A_WAITER = frozenset(
    {"typing", "threading", "contextlib", "subprocess", "filelock", "json", "re"}
)

WAITING_PROBE = """\
import os, sys, time
from dsymfind import helper
out = helper.respond([sys.argv[1]], os.environ, started=time.monotonic())
assert b"continues in the background" in out, out
print(" ".join(sorted(sys.modules)))
"""


def modules_of_a_waiting_helper(config_file: Path, cache_dir: Path) -> set[str]:
    write_config(config_file, f"timeout = 0.5\n{UNREACHABLE_SERVER}")
    cache = CachePaths(str(cache_dir))
    # A download in flight, as its record says: the waiter reads it for its progress.
    record = Path(cache.record_file(uuid_hex(MISSING_UUID)))
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(
        json.dumps(
            {"uuid": MISSING_UUID, "state": "running", "started": time.time(), "updated": 0}
            | {"message": "", "transfers": {"http://127.0.0.1:9/x": [10, 100]}}
        )
    )
    claim = locks.try_claim(cache.spawn_claim_file(uuid_hex(MISSING_UUID)))
    assert claim is not None
    try:
        run_probe()  # the first answer compiles the settings snapshot (config_reader)
        return run_probe()
    finally:
        os.close(claim)


def run_probe() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", WAITING_PROBE, MISSING_UUID],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(done.stdout.split())


def test_a_waiting_helper_loads_no_module_only_the_downloader_needs(
    config_file: Path, cache_dir: Path
) -> None:
    loaded = modules_of_a_waiting_helper(config_file, cache_dir)
    assert "dsymfind.fetch.miss" in loaded  # it did wait
    assert loaded & NOT_FOR_A_WAITER == set()
