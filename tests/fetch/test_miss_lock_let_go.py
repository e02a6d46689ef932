"""A helper that begins waiting while another process holds the UUID's download lock (a
download in its last moments, its record already written for an earlier lookup) starts a
downloader of its own once the lock is let go, instead of waiting to its deadline for a
record nobody will write. Real processes: the helper, its downloader, the lock's holder."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import HELLO_UUID
from support.processes import BIN, HelperRun, lock_held_elsewhere
from support.served import HELLO_DWARF, configure_native, url_path

from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex


def test_a_lock_let_go_without_a_record_gets_a_downloader_of_the_helpers_own(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))
    configure_native(config_file, server, timeout=60)
    lock_file = Path(CachePaths(str(cache_dir)).lock_file(uuid_hex(HELLO_UUID)))
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_held_elsewhere(lock_file):
        helper = subprocess.Popen(
            [str(BIN / "dsymForUUID"), HELLO_UUID],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # Waiting, with the lock held and no downloader of its own (bounded by count: the
        # holder lets go however slow the machine is; the helper's deadline is a minute).
        time.sleep(1.0)
        assert helper.poll() is None
        assert server.count(url_path(HELLO_UUID)) == 0
    out, err = helper.communicate(timeout=120)
    assert (helper.returncode, err) == (0, b"")
    run = HelperRun(subprocess.CompletedProcess(helper.args, 0, out, err))
    assert "DBGDSYMPath" in run.entry(HELLO_UUID), run.plist
    assert server.count(url_path(HELLO_UUID)) == 1
