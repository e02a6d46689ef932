"""The small files a store keeps beside a bare dSYM (its metadata and its `.plist`) are
asked for at once after the body, not one after the other. A real helper and downloader, a
real HTTP server on 127.0.0.1 that holds the metadata's answer until the `.plist` is asked."""

from __future__ import annotations

import plistlib
import threading
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import HELLO_UUID
from support.processes import run_helper, settled_record
from support.served import HELLO_DWARF, url_path

from dsymfind.cache import records

# How long the metadata's answer waits for the .plist's request: only reached when the two
# are asked in turn (the test then fails, whatever the machine's speed).
HOLD = 20.0


def test_the_metadata_and_the_plist_are_asked_at_once(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    plist_asked = threading.Event()
    meta_saw_the_plist: list[bool] = []

    def plist(exchange: ss.Exchange) -> None:
        plist_asked.set()
        exchange.respond(200, plistlib.dumps({}))

    def meta(exchange: ss.Exchange) -> None:
        meta_saw_the_plist.append(plist_asked.wait(HOLD))
        exchange.respond(404, b"")

    key = url_path(HELLO_UUID)
    native_server.route(key, ss.body(HELLO_DWARF))
    native_server.route(key + ".plist", plist)
    native_server.route(key + ".meta", meta)

    run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert settled_record(cache_dir, HELLO_UUID, timeout=HOLD + 30)["state"] == records.DONE
    assert meta_saw_the_plist == [True]
