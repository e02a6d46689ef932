"""Promises of the miss path that only one server, one test or one angle held: real helper
and downloader processes, real HTTP servers on 127.0.0.1, the real fixtures."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, write_config
from support.processes import BIN, run_cli, run_helper, settled_record
from support.served import HELLO_DWARF, url_path

from dsymfind.cache import records
from dsymfind.paths import CachePaths
from dsymfind.stores.base import read_partial_meta
from dsymfind.uuids import tree_entry, uuid_hex

HELLO_PATH = url_path(HELLO_UUID)
# docs/symbol-stores.md: ATTEMPTS is 3, "rides out a restarting server or a brief rate
# limit, fails fast otherwise". Spelt out here, so that a changed limit is a visible choice.
DOCUMENTED_ATTEMPTS = 3
# A held answer sends a byte this often: the client's wait for data (5 s, FIRST_BYTE_TIMEOUT)
# then never ends a transfer a test holds, however long a loaded machine makes it wait.
KEEP_ALIVE = 0.5
# What a held answer sends at once: the transfer has begun, its file is on disk.
FIRST_PIECE = 4096
# The losing store's ETag, which its partial file's sidecar records.
LOSER_ETAG = '"losing"'


@pytest.fixture
def other_server() -> Iterator[ss.SymbolServer]:
    """A second store, on another port: its own origin."""
    with ss.SymbolServer() as running:
        yield running


def configure(config_file: Path, *urls: str) -> None:
    """`urls` as the servers, in order, each in the native layout."""
    servers = "".join(f"[[servers]]\nurl = '{url}/'\nlayout = 'native'\n" for url in urls)
    write_config(config_file, f"timeout = 30\ndownload_timeout = 60\n{servers}")


def hold(exchange: ss.Exchange, data: bytes, at: int, until: Callable[[], bool]) -> int | None:
    """Send `data` from `at`, a byte every KEEP_ALIVE, until `until()` (or until one byte
    is left); where it got, or None once the client or the server has gone."""
    while not until() and at < len(data) - 1:
        if not exchange.pause(KEEP_ALIVE):
            return None
        exchange.wfile.write(data[at : at + 1])
        exchange.wfile.flush()
        at += 1
    return at


def cached(cache_dir: Path, uuid: str) -> bool:
    return os.path.lexists(tree_entry(str(cache_dir / "uuids"), uuid)) or os.path.exists(
        cache_dir / "dsyms" / uuid_hex(uuid)
    )


# --- the negative cache: "not found" from every server, nothing less ---------------------


def test_a_uuid_one_server_lacks_and_another_failed_on_is_asked_again(
    server: ss.SymbolServer, other_server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    """One server answers 404, the other 503 on every try: nobody said the UUID is nowhere,
    so it is not remembered as absent, and the next lookup asks the servers again."""
    other_server.route(HELLO_PATH, ss.body(b"", 503))
    configure(config_file, server.url, other_server.url)

    first = run_helper(HELLO_UUID).plist
    settled_record(cache_dir, HELLO_UUID, timeout=60)
    run_helper(HELLO_UUID)
    settled_record(cache_dir, HELLO_UUID, timeout=60)

    assert server.count(HELLO_PATH) == 2, "the second lookup was answered as absent"
    assert "503" in first[HELLO_UUID]["DBGError"], first
    assert not cached(cache_dir, HELLO_UUID)


# --- verification: the file type, not only the UUID -------------------------------------


def test_an_executable_served_under_a_dsym_key_is_refused_not_admitted(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    """hello (MH_EXECUTE) carries hello.dSYM's UUID: the right UUID, the wrong file. lldb
    told that it is the dSYM would find no debug information in it."""
    server.route(HELLO_PATH, ss.body((FIXTURES / "hello").read_bytes()))
    configure(config_file, server.url)

    run = run_helper(HELLO_UUID)
    record = settled_record(cache_dir, HELLO_UUID, timeout=60)

    assert "DBGDSYMPath" not in run.plist.get(HELLO_UUID, {}), run.plist
    assert not cached(cache_dir, HELLO_UUID)
    assert record["state"] == records.FAILED
    assert f"does not carry {HELLO_UUID} as a dsym" in str(record["message"])
    assert "MH_EXECUTE" in str(record["message"])


# --- two downloaders started directly: one download -------------------------------------


class HeldFirstAnswer:
    """The first GET gets its headers and a first piece, then a byte at a time until
    `release` is set; every later GET gets the whole file at once."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.started = threading.Event()
        self.release = threading.Event()
        self._answered = 0
        self._lock = threading.Lock()

    def __call__(self, exchange: ss.Exchange) -> None:
        with self._lock:
            first = self._answered == 0
            self._answered += 1
        if not first:
            exchange.respond(200, self.data)
            return
        exchange.start(200, [("Content-Type", ss.OCTET_STREAM)], length=len(self.data))
        exchange.wfile.write(self.data[:FIRST_PIECE])
        exchange.wfile.flush()
        self.started.set()
        at = hold(exchange, self.data, FIRST_PIECE, self.release.is_set)
        if at is not None:
            exchange.wfile.write(self.data[at:])


def flock_attempts(trace: Path, lock_file: str) -> int:
    """The flock calls on `lock_file` in an strace -y log so far."""
    text = trace.read_text() if trace.exists() else ""
    return sum(1 for line in text.splitlines() if line.startswith("flock(") and lock_file in line)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_two_downloaders_started_directly_make_one_download(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """The second downloader meets the first one's lock mid-transfer (seen in its own
    flock calls, traced), waits, and then finds the UUID in the cache: one GET in all."""
    held = HeldFirstAnswer(HELLO_DWARF)
    server.route(HELLO_PATH, held)
    configure(config_file, server.url)
    lock_file = CachePaths(str(cache_dir)).lock_file(uuid_hex(HELLO_UUID))
    trace = tmp_path / "second.strace"
    download = [str(BIN / "dsymfind"), "_download", HELLO_UUID]
    traced = ["strace", "-y", "-qq", "-e", "trace=flock", "-o", str(trace)]
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(subprocess.Popen(download))
        assert held.started.wait(120), "the first downloader never asked"
        started.append(subprocess.Popen([*traced, *download]))
        # Until the second one has met the lock; a second GET or its end would come
        # instead if it did not wait (then the assertions below say what happened).
        while not (
            flock_attempts(trace, lock_file)
            or server.count(HELLO_PATH) > 1
            or started[1].poll() is not None
        ):
            time.sleep(0.02)
    finally:
        held.release.set()
        statuses = [process.wait(timeout=120) for process in started]

    assert statuses == [0, 0]
    assert server.count(HELLO_PATH) == 1
    assert flock_attempts(trace, lock_file) > 0
    assert cached(cache_dir, HELLO_UUID)


# --- the retry limit, as the downloader meets it ----------------------------------------


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param(ss.body(b"", 503), id="503"),
        pytest.param(ss.reset(HELLO_DWARF, 4096), id="reset-mid-body"),
    ],
)
def test_a_server_failing_every_try_is_asked_the_documented_number_of_times(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path, failing: ss.Route
) -> None:
    """A failure that may pass is retried, up to the limit and no further: a dead server
    must not hold the downloader (and the UUID's lock) for more tries than that."""
    server.route(HELLO_PATH, failing)
    configure(config_file, server.url)

    done = run_cli("fetch", HELLO_UUID)

    assert done.returncode == 1, done.stdout
    assert f"{HELLO_UUID}  failed" in done.stdout
    assert server.count(HELLO_PATH) == DOCUMENTED_ATTEMPTS
    assert not cached(cache_dir, HELLO_UUID)


# --- redirects: never from https down to http -------------------------------------------


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ss.SymbolServer]:
    """A store over HTTPS whose self-signed certificate the processes started here trust."""
    context, cert = ss.self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    with ss.SymbolServer(tls=context) as running:
        yield running


def test_an_https_store_redirecting_to_plain_http_is_not_followed(
    tls_server: ss.SymbolServer,
    other_server: ss.SymbolServer,
    config_file: Path,
    cache_dir: Path,
) -> None:
    """The file is really there, behind the http:// redirect: followed, its bytes (and any
    header or signed query) would cross the network in clear, open to change on the way."""
    other_server.route(HELLO_PATH, ss.body(HELLO_DWARF))
    tls_server.route(HELLO_PATH, ss.redirect(other_server.url + HELLO_PATH))
    configure(config_file, tls_server.url)

    done = run_cli("fetch", HELLO_UUID)

    assert tls_server.count(HELLO_PATH) == 1
    assert other_server.requests == []
    assert done.returncode == 1, done.stdout
    assert f"refused a redirect from https to {other_server.url}{HELLO_PATH}" in done.stdout
    assert not cached(cache_dir, HELLO_UUID)


# --- after a win, the losers leave nothing behind ----------------------------------------


def losing(data: bytes) -> ss.Route:
    """A resumable answer (a strong ETag, a Content-Length) that never ends: a first piece,
    then a byte at a time until the client hangs up. A transfer that can only lose."""

    def route(exchange: ss.Exchange) -> None:
        headers = [("Content-Type", ss.OCTET_STREAM), ("ETag", LOSER_ETAG)]
        exchange.start(200, headers, length=len(data))
        exchange.wfile.write(data[:FIRST_PIECE])
        exchange.wfile.flush()
        if hold(exchange, data, FIRST_PIECE, lambda: False) is not None:
            while exchange.pause(ss.POLL):
                pass
        exchange.close_connection = True

    return route


def winning_once_the_loser_has_a_partial_file(cache_dir: Path, data: bytes) -> ss.Route:
    """The whole file, its last bytes held until the cache keeps the loser's partial file,
    so that the loser is cut mid-transfer by this answer's win."""
    cache = CachePaths(str(cache_dir))

    def loser_has_one() -> bool:
        kept = [read_partial_meta(path) for _, path in cache.partial_files()]
        return any(meta is not None and meta.get("validator") == LOSER_ETAG for meta in kept)

    def route(exchange: ss.Exchange) -> None:
        exchange.start(200, [("Content-Type", ss.OCTET_STREAM)], length=len(data))
        exchange.wfile.write(data[:FIRST_PIECE])
        exchange.wfile.flush()
        at = hold(exchange, data, FIRST_PIECE, loser_has_one)
        if at is not None:
            exchange.wfile.write(data[at:])

    return route


def test_the_losing_candidates_partial_files_are_removed_after_a_win(
    server: ss.SymbolServer, other_server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    """A loser cancelled mid-transfer keeps its bytes only until the UUID is admitted:
    nobody will continue them, and nothing but gc (a day later) would remove them."""
    server.route(HELLO_PATH, losing(HELLO_DWARF))
    other_server.route(
        HELLO_PATH, winning_once_the_loser_has_a_partial_file(cache_dir, HELLO_DWARF)
    )
    configure(config_file, server.url, other_server.url)

    done = run_cli("fetch", HELLO_UUID)

    assert done.returncode == 0, done.stdout
    cache = CachePaths(str(cache_dir))
    assert str(records.read(cache, HELLO_UUID)["message"]).startswith(f"from {other_server.url}")
    assert server.count(HELLO_PATH) == 1  # the loser's transfer had begun
    assert cache.partial_files() == []
    assert not os.path.exists(cache.partial_dir(uuid_hex(HELLO_UUID)))


# --- a continued transfer: never two objects spliced -------------------------------------


def uploaded_again(data: bytes, around: int) -> bytes:
    """`data` with a byte changed on each side of `around`, in the zero padding between a
    dSYM's load commands and its DWARF: another object that still verifies."""
    changed = bytearray(data)
    for at in (around - 1, around + 1):
        assert changed[at] == 0
        changed[at] = 0x5A
    return bytes(changed)


def test_a_206_of_another_object_is_not_spliced_onto_the_kept_bytes(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    """The object was uploaded again between a cut and its continuation, and the store
    answers the Range whatever If-Range says: its 206 names the new ETag. The bytes kept
    from the old object must not be completed by the new one's tail (a file that verifies
    and lies); the whole new object is fetched instead."""
    cut = len(HELLO_DWARF) * 6 // 10
    served = ss.RangedFile(HELLO_DWARF)
    served.cut_after, served.fail_after_cut = cut, DOCUMENTED_ATTEMPTS - 1
    server.route(HELLO_PATH, served)
    configure(config_file, server.url)
    assert "DBGDSYMPath" not in run_helper(HELLO_UUID).entry(HELLO_UUID)
    settled_record(cache_dir, HELLO_UUID, timeout=60)
    assert CachePaths(str(cache_dir)).partial_files()  # the old object's first bytes
    newer = uploaded_again(HELLO_DWARF, cut)
    served.data, served.etag, served.honour_if_range = newer, '"v2"', False

    entry = run_helper("--ignoreNegativeCache", HELLO_UUID).entry(HELLO_UUID)

    assert Path(entry["DBGDSYMPath"]).read_bytes() == newer
    ranged = [r for r in served.requests() if r.range is not None]
    assert ranged[-1].status == 206 and ranged[-1].if_range == '"v1"'  # answered, refused
