"""`dsymfind gc` and partial downloads: a day-old partial file goes, unless a download of
its UUID holds the lock (it may be continuing that very file right now). Real processes:
the helper and its downloader leave the partial file, another process holds the lock."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import HELLO_UUID
from support.processes import lock_held_elsewhere, run_cli, run_helper, settled_record
from support.served import HELLO_DWARF, configure_native, url_path

from dsymfind import paths
from dsymfind.cache.removal import STALE_PARTIAL_AGE
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

HEX = uuid_hex(HELLO_UUID)


def cut_download(server: ss.SymbolServer, config_file: Path, cache_dir: Path) -> str:
    """The partial file a transfer cut at 60% leaves (its retries get 503s), made older
    than gc's limit."""
    served = ss.RangedFile(HELLO_DWARF)
    served.cut_after, served.fail_after_cut = len(HELLO_DWARF) * 6 // 10, 2
    server.route(url_path(HELLO_UUID), served)
    configure_native(config_file, server, timeout=30)
    assert "DBGDSYMPath" not in run_helper(HELLO_UUID).entry(HELLO_UUID)
    settled_record(cache_dir, HELLO_UUID, timeout=60)
    ((owner, path),) = CachePaths(str(cache_dir)).partial_files()
    assert owner == HEX
    long_ago = time.time() - 2 * STALE_PARTIAL_AGE
    for written in (path, paths.partial_meta(path)):
        os.utime(written, (long_ago, long_ago))
    return path


def test_gc_keeps_a_stale_partial_download_whose_lock_is_held(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    path = cut_download(server, config_file, cache_dir)

    with lock_held_elsewhere(CachePaths(str(cache_dir)).lock_file(HEX)):
        held = run_cli("gc")
        dry = run_cli("gc", "--dry-run")
        kept = os.path.exists(path) and os.path.exists(paths.partial_meta(path))
    free = run_cli("gc")

    assert (held.returncode, dry.returncode) == (0, 0), held.stderr + dry.stderr
    assert kept, "removed while another process held its UUID's lock"
    assert path not in held.stdout and path not in dry.stdout, held.stdout + dry.stdout
    # Once nobody holds the lock, the same file is stale: it was kept for the lock alone.
    assert f"removed stale partial download {path}" in free.stdout, free.stdout
    assert not os.path.exists(path)
