"""Big bodies from the socket to the disk (dsymfind.stores.body), against a real server.

Bodies of several MiB take many socket reads and the writer thread; the tests check what a user relies on: the bytes are
the server's, a published SHA-256 is met or the body refused, an overlong or short body is
refused, a full disk is an error and not a hang, and a cut transfer's sidecar never counts
more than is on disk, checkpointed by bytes as well as by time.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from support import symbol_server as ss
from support.tmpfs import small_file_system

from dsymfind import paths
from dsymfind.stores import body, http11, transfer
from dsymfind.stores.base import Limits, Partial, Terms, TransferError, Truncated, read_partial_meta
from dsymfind.stores.transfer import download, make_client

LIMITS = Limits(
    connect_timeout=2.0,
    first_byte_timeout=2.0,
    total_timeout=30.0,
    attempts=3,
    backoff_base=0.01,
    backoff_cap=0.05,
)
BIG = os.urandom(6 * 1024 * 1024 + 5)  # many READ_BYTES pieces, not a round number
BIG_SHA256 = hashlib.sha256(BIG).hexdigest()


def _headers(fields: dict[str, str]) -> http11.Headers:
    return http11.Headers([(name.encode(), value.encode()) for name, value in fields.items()])


B64 = base64.b64encode(hashlib.sha256(BIG).digest()).decode()
WRONG_B64 = base64.b64encode(hashlib.sha256(b"another object").digest()).decode()


@pytest.fixture
def client_limits() -> Limits:
    return LIMITS


@pytest.fixture
def dest(tmp_path: Path) -> str:
    return str(tmp_path / "download")


# -- the digests an answer publishes ------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "whole", "expected"),
    [
        ({"x-amz-meta-sha256": BIG_SHA256.upper()}, True, ("x-amz-meta-sha256", BIG_SHA256)),
        ({"repr-digest": f"sha-256=:{B64}:;note=1"}, True, ("repr-digest", BIG_SHA256)),
        (
            {"repr-digest": f"sha-256=:{WRONG_B64}:, sha-256=:{B64}:"},
            True,
            ("repr-digest", BIG_SHA256),
        ),
        ({"repr-digest": f"sha-256=:{B64}:"}, True, ("repr-digest", BIG_SHA256)),
        (
            {"repr-digest": f"sha-512=:{B64}{B64}:, sha-256=:{B64}:"},
            False,
            ("repr-digest", BIG_SHA256),
        ),
        ({"content-digest": f"sha-256=:{B64}:"}, True, ("content-digest", BIG_SHA256)),
        ({"digest": f"MD5=abc, SHA-256={B64}"}, True, ("digest", BIG_SHA256)),
        # Of the answer's content only: a 206 carries a part of the object.
        ({"content-digest": f"sha-256=:{B64}:"}, False, None),
        ({"digest": f"SHA-256={B64}"}, False, None),
        ({"repr-digest": "sha-512=:AAAA:"}, True, None),
        ({}, True, None),
    ],
)
def test_published_sha256_is_read_from_the_headers_that_carry_one(
    headers: dict[str, str], whole: bool, expected: tuple[str, str] | None
) -> None:
    assert body.published_sha256(_headers(headers), whole_body=whole) == expected


@pytest.mark.parametrize(
    "headers",
    [
        {"x-amz-meta-sha256": "not-a-digest"},
        {"repr-digest": "sha-256=:c2hvcnQ=:"},
        {"repr-digest": "sha-256=:!!!:"},
    ],
)
def test_a_digest_that_cannot_be_checked_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(body.DigestProblem):
        body.published_sha256(_headers(headers), whole_body=True)


# -- big bodies through a real server -----------------------------------------------------


def test_a_big_body_arrives_whole_and_meets_its_published_digest(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    server.route("/big", ss.body(BIG, headers=[("Repr-Digest", f"sha-256=:{B64}:")]))
    seen: list[int] = []
    got = download(
        client,
        f"{server.url}/big",
        dest,
        Terms(limits=LIMITS, progress=lambda d, t: seen.append(d)),
    )
    assert Path(dest).read_bytes() == BIG
    assert got.size == len(BIG) and got.sha256 == BIG_SHA256
    assert seen[-1] == len(BIG) and len(seen) > 2  # progress while it streamed


def test_a_big_body_that_misses_its_digest_is_refused_without_retrying(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    server.route("/big", ss.body(BIG, headers=[("Repr-Digest", f"sha-256=:{WRONG_B64}:")]))
    with pytest.raises(TransferError, match="sha256 mismatch: repr-digest says") as caught:
        download(client, f"{server.url}/big", dest, Terms(LIMITS))
    assert not caught.value.retryable
    assert server.count("/big") == 1


def test_a_big_body_longer_than_announced_is_refused(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    server.route("/big", ss.overlong(BIG, b"x" * 100_000))
    with pytest.raises(TransferError, match="sent more than the") as caught:
        download(client, f"{server.url}/big", dest, Terms(LIMITS))
    assert not caught.value.retryable


def test_a_big_body_cut_short_is_truncated_and_retried(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    server.route("/big", ss.sequence(ss.truncated(BIG, len(BIG) // 2), ss.body(BIG)))
    got = download(client, f"{server.url}/big", dest, Terms(LIMITS))
    assert got.attempts == 2 and Path(dest).read_bytes() == BIG


def test_a_cut_short_body_says_how_much_arrived(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    server.route("/big", ss.truncated(BIG, 3_000_000))
    with pytest.raises(Truncated, match=f"got 3000000 of {len(BIG)} bytes"):
        download(client, f"{server.url}/big", dest, Terms(Limits(attempts=1)))


def test_a_big_chunked_body_arrives_whole(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    server.route("/big", ss.chunked(BIG, size=100_000))
    download(client, f"{server.url}/big", dest, Terms(LIMITS))
    assert Path(dest).read_bytes() == BIG


def test_a_resumed_body_is_hashed_from_its_first_byte(
    client: http11.Client, server: ss.SymbolServer, tmp_path: Path, dest: str
) -> None:
    """The digest covers the kept start (read back once) and the rest as it arrives."""
    ranged = ss.RangedFile(BIG)
    ranged.cut_after = len(BIG) * 7 // 10
    server.route("/big", _with_headers(ranged, [("Repr-Digest", f"sha-256=:{B64}:")]))
    partial = Partial(str(tmp_path / "partial"), "the big one")
    got = download(client, f"{server.url}/big", dest, Terms(limits=LIMITS, partial=partial))
    assert got.sha256 == BIG_SHA256 and Path(dest).read_bytes() == BIG
    statuses = [s.status for s in ranged.requests()]
    assert statuses == [200, 206]


def test_a_kept_start_that_is_not_the_objects_fails_the_digest_of_the_resumed_body(
    client: http11.Client, server: ss.SymbolServer, tmp_path: Path, dest: str
) -> None:
    """The digest covers the kept bytes too: a partial file corrupted on disk, continued by
    a 206 that is the object's, is refused, and nothing of it is kept to continue again."""
    cut = len(BIG) * 7 // 10
    ranged = ss.RangedFile(BIG)
    server.route("/big", _with_headers(ranged, [("Repr-Digest", f"sha-256=:{B64}:")]))
    partial = Partial(str(tmp_path / "partial"), "the big one")
    corrupted = bytearray(BIG[:cut])
    corrupted[cut // 2] ^= 0xFF
    Path(partial.path).write_bytes(corrupted)
    sidecar = {"source": partial.identity, "validator": '"v1"', "total": len(BIG), "bytes": cut}
    Path(paths.partial_meta(partial.path)).write_text(json.dumps(sidecar))

    with pytest.raises(TransferError, match="sha256 mismatch: repr-digest says"):
        download(client, f"{server.url}/big", dest, Terms(limits=LIMITS, partial=partial))
    assert [s.status for s in ranged.requests()] == [206]
    assert not os.path.exists(partial.path)
    assert not os.path.exists(paths.partial_meta(partial.path))


class HeldDigest:
    """A SHA-256 whose updates wait until the test releases them."""

    def __init__(self) -> None:
        self.inner = hashlib.sha256()
        self.released = threading.Event()

    def update(self, data: bytes) -> None:
        assert self.released.wait(60), "never released"
        self.inner.update(data)


def test_the_writer_does_not_wait_for_the_digest(tmp_path: Path) -> None:
    """Hashing is CPU work beside the writes (about 120 ms for 199 MB): every byte reaches
    the disk while the digest is still held, and the digest still covers every byte."""
    pieces = [os.urandom(body.READ_BYTES) for _ in range(4)]
    total = len(pieces) * body.READ_BYTES
    path = tmp_path / "body"
    digest = HeldDigest()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        sink = body.Sink(fd, str(path), 0, digest, None)  # type: ignore[arg-type]
        for piece in pieces:
            sink.put(piece)
        deadline = time.monotonic() + 30  # generous: the writes are a few milliseconds
        while path.stat().st_size < total and time.monotonic() < deadline:
            time.sleep(0.01)
        written_while_held = path.stat().st_size
        digest.released.set()
        assert sink.close() == total
    finally:
        digest.released.set()
        os.close(fd)
    assert written_while_held == total
    assert digest.inner.hexdigest() == hashlib.sha256(b"".join(pieces)).hexdigest()


class Interrupted(Exception):
    """What the test raises in the reader while it waits for the hasher's queue."""


def test_a_batch_given_while_the_reader_is_interrupted_is_written_once(tmp_path: Path) -> None:
    """The reader stopped (a cancel, Ctrl-C) while the hasher's full queue holds it back:
    the batch the writer already has is not given again by close()."""
    piece = os.urandom(body.READ_BYTES)
    path = tmp_path / "body"
    digest = HeldDigest()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        # Only inside the hasher's blocked hand-over; anywhere else, a little later.
        while frame is not None and frame.f_code.co_name != "give":
            frame = frame.f_back
        if frame is not None and frame.f_locals.get("self") is hasher_worker:
            raise Interrupted
        signal.setitimer(signal.ITIMER_REAL, 0.05)

    previous = signal.signal(signal.SIGALRM, interrupt)
    given = 0
    try:
        sink = body.Sink(fd, str(path), 0, digest, None)  # type: ignore[arg-type]
        assert sink._hasher is not None
        hasher_worker = sink._hasher.worker
        with pytest.raises(Interrupted):
            while True:
                if sink._hasher.worker._queue.full():
                    # The hand-over of this piece blocks until the digest is released.
                    signal.setitimer(signal.ITIMER_REAL, 0.2)
                sink.put(piece)
                given += 1
        given += 1  # the piece whose hand-over was interrupted: the writer has it
        digest.released.set()
        assert sink.close() == given * len(piece)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        digest.released.set()
        os.close(fd)
    assert path.stat().st_size == given * len(piece)


def test_a_partial_file_holding_every_byte_asks_only_for_the_last_one(
    client: http11.Client, server: ss.SymbolServer, tmp_path: Path, dest: str
) -> None:
    """Killed after the last checkpoint but before the rename: one byte is asked for, with
    If-Range, rather than the whole file again."""
    ranged = ss.RangedFile(BIG)
    server.route("/big", ranged)
    partial = Partial(str(tmp_path / "partial"), "the big one")
    Path(partial.path).write_bytes(BIG)
    sidecar = {"source": partial.identity, "validator": ranged.etag, "total": len(BIG)}
    Path(paths.partial_meta(partial.path)).write_text(
        json.dumps({**sidecar, "bytes": len(BIG), "updated": 0})
    )
    download(client, f"{server.url}/big", dest, Terms(limits=LIMITS, partial=partial))
    (answer,) = ranged.requests()
    assert (answer.status, answer.range, answer.sent) == (206, f"bytes={len(BIG) - 1}-", 1)
    assert Path(dest).read_bytes() == BIG


def test_a_cut_keeps_every_byte_received_and_the_retry_asks_for_the_rest(
    client: http11.Client, server: ss.SymbolServer, tmp_path: Path, dest: str
) -> None:
    """A cut after 40 MiB: the writer's last checkpoint counts what arrived, and the retry
    continues from there, not from byte 0."""
    data = os.urandom(48 * 1024 * 1024)
    ranged = ss.RangedFile(data)
    ranged.cut_after = 40 * 1024 * 1024
    server.route("/big", ranged)
    partial = Partial(str(tmp_path / "partial"), "the big one")
    download(client, f"{server.url}/big", dest, Terms(limits=LIMITS, partial=partial))
    _, second = ranged.requests()
    assert second.status == 206 and second.range == f"bytes={ranged.cut_after}-"
    assert Path(dest).read_bytes() == data
    assert not os.path.exists(paths.partial_meta(partial.path))


def test_checkpoints_come_by_bytes_as_well_as_by_time(
    client: http11.Client,
    server: ss.SymbolServer,
    tmp_path: Path,
    dest: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the clock's checkpoints out of the way, a transfer that has received 40 MiB
    and stalls has a sidecar vouching for at least 32 MiB while it waits: what a SIGKILL at
    that instant would keep (a cut or a cancel checkpoints everything on the way out)."""
    monkeypatch.setattr(body, "CHECKPOINT_INTERVAL", 3600.0)
    data = os.urandom(48 * 1024 * 1024)
    ranged = ss.RangedFile(data)
    ranged.trickle_after, ranged.trickle, ranged.interval = 40 * 1024 * 1024, 1, 0.2
    server.route("/big", ranged)
    partial = Partial(str(tmp_path / "partial"), "the big one")
    cancel = threading.Event()

    def fetch() -> None:
        with contextlib.suppress(TransferError):
            download(
                client,
                f"{server.url}/big",
                dest,
                Terms(limits=LIMITS, partial=partial, cancel=cancel),
            )

    worker = threading.Thread(target=fetch, daemon=True)
    worker.start()
    vouched, deadline = 0, time.monotonic() + 20
    while vouched < body.CHECKPOINT_BYTES and time.monotonic() < deadline:
        meta = read_partial_meta(partial.path) or {}
        vouched = meta.get("bytes") or 0
        time.sleep(0.01)
    cancel.set()
    worker.join(timeout=20)
    assert body.CHECKPOINT_BYTES <= vouched <= ranged.trickle_after
    assert not worker.is_alive()


def test_a_body_larger_than_the_free_space_is_refused_before_it_is_read(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    """The announced length decides: the disk is not filled for a transfer that cannot end
    well (tests/scenarios/test_disk_full.py runs a whole lookup on a tiny file system)."""
    server.route("/huge", ss.stall(length=10**16))  # 10 PB announced, nothing sent
    limits = Limits(first_byte_timeout=5.0, total_timeout=5.0, attempts=3, max_bytes=10**17)
    with pytest.raises(TransferError, match=r"No space left on device: .*/huge needs 1") as caught:
        download(client, f"{server.url}/huge", dest, Terms(limits))
    assert not caught.value.retryable
    assert server.count("/huge") == 1
    assert os.path.getsize(dest) == 0  # nothing written; the caller discards the file


def test_a_full_disk_is_an_error_not_a_hang(server: ss.SymbolServer, tmp_path: Path) -> None:
    """The writer thread fails (here: the file size limit) while the reader has the queue
    full: the download ends at once with the writer's error."""
    server.route("/big", ss.body(os.urandom(24 * 1024 * 1024)))
    script = textwrap.dedent(
        """
        import resource, signal, sys
        from dsymfind.stores import transfer
        from dsymfind.stores.base import Limits, Terms, TransferError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, 1024 * 1024))
        try:
            transfer.download(transfer.make_client(), sys.argv[1], sys.argv[2],
                              Terms(Limits(total_timeout=20, attempts=1)))
        except TransferError as exc:
            print("refused:", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, f"{server.url}/big", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_PROXY": "*"},
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "cannot write (File too large)" in done.stdout


def _with_headers(route: ss.Route, extra: list[tuple[str, str]]) -> ss.Route:
    """`route`, with `extra` headers in every answer it starts."""

    def answer(exchange: ss.Exchange) -> None:
        start = exchange.start

        def start_with(status: int, headers: ss.Headers = (), *, length: int | None = None) -> None:
            start(status, [*headers, *extra], length=length)

        exchange.start = start_with  # type: ignore[method-assign]
        route(exchange)

    return answer


# -- HTTPS: the direct path reads the TLS stream, never the socket under it ----------------


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ss.SymbolServer]:
    """A symbol server over HTTPS whose self-signed certificate the client trusts."""
    context, cert = ss.self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    transfer._ssl_context.cache_clear()  # made once per process: make it again with the cert
    try:
        with ss.SymbolServer(tls=context) as server:
            yield server
    finally:
        transfer._ssl_context.cache_clear()


def test_a_big_body_over_https_arrives_whole_and_meets_its_digest(
    tls_server: ss.SymbolServer, dest: str
) -> None:
    tls_server.route("/big", ss.body(BIG, headers=[("Repr-Digest", f"sha-256=:{B64}:")]))
    with make_client(LIMITS) as client:
        got = download(client, f"{tls_server.url}/big", dest, Terms(LIMITS))
    assert tls_server.url.startswith("https://")
    assert got.sha256 == BIG_SHA256 and Path(dest).read_bytes() == BIG


def test_a_fetch_over_http_loads_no_ca_bundle(server: ss.SymbolServer, dest: str) -> None:
    # Loading the CA bundle costs about 20 ms before the first request: http:// never needs it.
    transfer._ssl_context.cache_clear()
    server.route("/big", ss.body(BIG))
    with make_client(LIMITS) as client:
        download(client, f"{server.url}/big", dest, Terms(LIMITS))
    assert Path(dest).read_bytes() == BIG
    assert transfer._ssl_context.cache_info().currsize == 0


def test_a_certificate_nobody_trusts_is_refused_for_good(tmp_path: Path, dest: str) -> None:
    context, _ = ss.self_signed(tmp_path)
    transfer._ssl_context.cache_clear()  # the default trust: certifi, not this certificate
    with ss.SymbolServer(tls=context) as untrusted, make_client(LIMITS) as client:
        untrusted.route("/big", ss.body(BIG))
        with pytest.raises(TransferError) as caught:
            download(client, f"{untrusted.url}/big", dest, Terms(LIMITS))
    assert not caught.value.retryable and not untrusted.requests


def test_certificates_that_cannot_be_loaded_fail_at_once_naming_the_setting(
    tmp_path: Path, dest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every https server would fail alike: not the server's fault, so no retry (and no
    backoff marker against it), and the message says what to fix."""
    context, _ = ss.self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
    transfer._ssl_context.cache_clear()
    with ss.SymbolServer(tls=context) as server, make_client(LIMITS) as client:
        server.route("/big", ss.body(BIG))
        with pytest.raises(TransferError) as caught:
            download(client, f"{server.url}/big", dest, Terms(LIMITS))
    transfer._ssl_context.cache_clear()
    assert not caught.value.retryable and not server.requests
    assert "SSL_CERT_FILE" in str(caught.value)


def test_a_big_body_over_https_cut_short_is_truncated(
    tls_server: ss.SymbolServer, dest: str
) -> None:
    tls_server.route("/big", ss.truncated(BIG, 3_000_000))
    with make_client(LIMITS) as client, pytest.raises(Truncated) as caught:
        download(client, f"{tls_server.url}/big", dest, Terms(Limits(attempts=1)))
    assert caught.value.retryable


# -- what a review found ------------------------------------------------------------------


def _partial_of(data: bytes, kept: int, folder: Path, etag: str) -> Partial:
    """A partial download holding `kept` bytes of `data`, its sidecar naming `etag`."""
    partial = Partial(str(folder / "partial"), "the object")
    Path(partial.path).write_bytes(data[:kept])
    sidecar = {"source": partial.identity, "validator": etag, "total": len(data), "bytes": kept}
    Path(paths.partial_meta(partial.path)).write_text(json.dumps(sidecar))
    return partial


def test_a_206_whose_length_disagrees_with_its_range_is_not_spliced_in(
    client: http11.Client, server: ss.SymbolServer, tmp_path: Path, dest: str
) -> None:
    """h11 frames a body by Content-Length: a 206 announcing 100 bytes for a range of
    600,000 must not let the direct reads splice the rest in after h11's bytes."""
    data, etag = os.urandom(1_000_000), '"v1"'

    def lying_store(exchange: ss.Exchange) -> None:
        if exchange.headers.get("Range"):
            exchange.start(
                206,
                [("ETag", etag), ("Content-Range", f"bytes 400000-999999/{len(data)}")],
                length=100,
            )
            exchange.wfile.write(data[400_000:])
            exchange.close_connection = True
        else:
            exchange.respond(200, data, headers=[("ETag", etag)])

    server.route("/obj", lying_store)
    partial = _partial_of(data, 400_000, tmp_path, etag)
    download(client, f"{server.url}/obj", dest, Terms(limits=LIMITS, partial=partial))
    assert Path(dest).read_bytes() == data
    ranged = [r.headers.get("range") for r in server.requests]
    assert ranged == ["bytes=400000-", None]  # discarded, then the whole object


def test_a_failing_last_checkpoint_is_an_error_not_a_hang(
    client: http11.Client,
    server: ss.SymbolServer,
    tmp_path: Path,
    dest: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writer fails after the reader's end marker (the fsync or the sidecar of the last
    checkpoint): close() returns with the error instead of waiting for a second marker."""

    def full_at_the_end(sink: body.Sink) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(body.Sink, "_last_checkpoint", full_at_the_end)
    server.route("/big", ss.body(BIG, headers=[("ETag", '"v1"')]))
    outcome: list[BaseException] = []

    def fetch() -> None:
        try:
            download(
                client,
                f"{server.url}/big",
                dest,
                Terms(limits=LIMITS, partial=Partial(str(tmp_path / "partial"), "big")),
            )
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=fetch, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "the download hung on its writer thread"
    assert len(outcome) == 1 and "No space left on device" in str(outcome[0])


def test_thousands_of_tiny_chunks_are_written(
    client: http11.Client, server: ss.SymbolServer, dest: str
) -> None:
    """More pieces than one writev takes (IOV_MAX, 1024)."""
    data = os.urandom(3000)
    server.route("/tiny", ss.chunked(data, size=1))
    download(client, f"{server.url}/tiny", dest, Terms(LIMITS))
    assert Path(dest).read_bytes() == data


def test_bytes_about_to_be_replaced_count_as_free_space(
    client: http11.Client, server: ss.SymbolServer, tmp_path: Path
) -> None:
    """On a 2 MiB file system holding a stale 1.5 MiB partial, a new 1.5 MiB object fits:
    the space is counted once the stale bytes are truncated away."""
    with small_file_system(tmp_path / "small", "2m") as small:
        data = os.urandom(1536 * 1024)
        server.route("/obj", ss.body(data, headers=[("ETag", '"new"')]))
        partial = _partial_of(os.urandom(len(data)), len(data) - 1, small, '"old"')
        dest = str(small / "download")
        download(client, f"{server.url}/obj", dest, Terms(limits=LIMITS, partial=partial))
        assert Path(dest).read_bytes() == data
