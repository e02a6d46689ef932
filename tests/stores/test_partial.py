"""Big dSYMs: a transfer cut part-way is continued, not started again.

A real server on 127.0.0.1 that honours Range and If-Range (support.symbol_server's
RangedFile) and real helper and downloader processes: the first run is cut at about 60%,
and the next lookup of the UUID asks for the rest only. A changed object, a store without
range support, a 416 and a store that ignores If-Range start over from byte 0; a killed
downloader's bytes are continued too. The finished file is verified whole, as always.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, LAYOUT_PATHS, dwarf_of, link_of, write_config
from support.processes import downloader_pids, run_cli, run_helper, settled_record
from support.seaweed import SYMBOLS, SeaweedS3

from dsymfind import paths
from dsymfind.cache import locks
from dsymfind.cache.gc import STALE_PARTIAL_AGE, Collector
from dsymfind.paths import CachePaths
from dsymfind.stores import base as sources
from dsymfind.stores import http11, transfer
from dsymfind.stores.s3 import presign as s3_presign
from dsymfind.stores.s3 import store as s3_source
from dsymfind.uuids import uuid_hex

DATA = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
CUT = len(DATA) * 6 // 10
NATIVE = f"/{LAYOUT_PATHS['native']}"
HEX = uuid_hex(HELLO_UUID)


@pytest.fixture
def served(server: ss.SymbolServer, config_file: Path) -> ss.RangedFile:
    """hello's DWARF file, cut at 60% once; the two retries the downloader makes at once
    get 503s, so the run fails and the next lookup must continue it."""
    ranged = ss.RangedFile(DATA)
    ranged.cut_after, ranged.fail_after_cut = CUT, 2
    server.route(NATIVE, ranged)
    configure(config_file, server, timeout=20)
    return ranged


def configure(config_file: Path, server: ss.SymbolServer, *, timeout: float) -> None:
    write_config(
        config_file,
        f"timeout = {timeout:g}\ndownload_timeout = 60\n"
        f"[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
    )


def partial_files(cache_dir: Path) -> list[tuple[str, str]]:
    return CachePaths(str(cache_dir)).partial_files()


def cut_once(cache_dir: Path) -> str:
    """The first lookup: cut, retried in vain; what it leaves to continue."""
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "DBGDSYMPath" not in entry
    assert settled_record(cache_dir, HELLO_UUID, timeout=30)["state"] == "failed"
    ((owner, path),) = partial_files(cache_dir)
    assert owner == HEX
    assert os.path.getsize(path) == CUT
    meta = json.loads(Path(paths.partial_meta(path)).read_text())
    assert (meta["validator"], meta["total"], meta["bytes"]) == ('"v1"', len(DATA), CUT)
    return path


def assert_published(cache_dir: Path) -> None:
    link = link_of(cache_dir, HELLO_UUID)
    assert link.read_bytes() == DATA  # verified whole, as every download
    assert partial_files(cache_dir) == []
    assert not (cache_dir / "tmp" / f"partial-{HEX}").exists()


def look_up_again() -> dict[str, str]:
    # The failed run put the server in backoff: the flag asks it anyway.
    return run_helper("--ignoreNegativeCache", HELLO_UUID).entry(HELLO_UUID)


def test_a_cut_download_is_continued_by_the_next_lookup(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    cut_once(cache_dir)

    entry = look_up_again()

    assert "DBGDSYMPath" in entry, entry
    asked = served.requests()
    assert [(a.status, a.range, a.sent) for a in asked] == [
        (200, None, CUT),
        # The downloader's own retries ask for the rest too.
        (503, f"bytes={CUT}-", 0),
        (503, f"bytes={CUT}-", 0),
        (206, f"bytes={CUT}-", len(DATA) - CUT),
    ]
    assert asked[-1].if_range == '"v1"'
    assert_published(cache_dir)


def test_a_changed_object_starts_over_from_byte_zero(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    cut_once(cache_dir)
    served.etag = '"v2"'  # uploaded again: If-Range "v1" no longer holds

    assert "DBGDSYMPath" in look_up_again()

    last = served.requests()[-1]
    assert (last.status, last.range, last.if_range, last.sent) == (
        200,
        f"bytes={CUT}-",
        '"v1"',
        len(DATA),
    )
    assert_published(cache_dir)


@pytest.mark.parametrize(
    "etag",
    [
        pytest.param('"caf\xe9-\xff"', id="latin-1"),
        # Bytes that also read as UTF-8 ("é"): they must go back as sent, not re-encoded.
        pytest.param('"v\xc3\xa9"', id="utf-8-looking"),
    ],
)
def test_an_etag_with_bytes_past_ascii_goes_back_in_if_range_as_it_came(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path, etag: str
) -> None:
    """RFC 9110 lets an ETag hold bytes 0x80-0xFF (the test server sends its str as
    latin-1); the retry after the cut names those very bytes."""
    ranged = ss.RangedFile(DATA, etag=etag)
    ranged.cut_after = CUT
    server.route(NATIVE, ranged)
    configure(config_file, server, timeout=20)

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert "DBGDSYMPath" in entry, entry
    asked = [(a.status, a.range, a.if_range, a.sent) for a in ranged.requests()]
    assert asked == [(200, None, None, CUT), (206, f"bytes={CUT}-", etag, len(DATA) - CUT)]
    assert_published(cache_dir)


def test_a_store_without_range_support_starts_over(served: ss.RangedFile, cache_dir: Path) -> None:
    served.ranges = False
    cut_once(cache_dir)

    assert "DBGDSYMPath" in look_up_again()

    last = served.requests()[-1]
    assert (last.status, last.sent) == (200, len(DATA))
    assert_published(cache_dir)


def test_416_discards_the_partial_file_and_starts_over(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    cut_once(cache_dir)
    served.ranged_status = 416

    assert "DBGDSYMPath" in look_up_again()

    last_two = [(a.status, a.range, a.sent) for a in served.requests()[-2:]]
    assert last_two == [(416, f"bytes={CUT}-", 0), (200, None, len(DATA))]
    assert_published(cache_dir)


def test_a_206_with_another_validator_is_not_spliced(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    cut_once(cache_dir)
    served.etag, served.honour_if_range = '"v2"', False  # ranges of the new object

    assert "DBGDSYMPath" in look_up_again()

    last_two = [(a.status, a.range, a.sent) for a in served.requests()[-2:]]
    assert last_two[0][:2] == (206, f"bytes={CUT}-")  # refused: its ETag says "v2"
    assert last_two[1] == (200, None, len(DATA))
    assert_published(cache_dir)


def test_a_killed_downloader_leaves_a_partial_file_the_next_run_continues(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    ranged = ss.RangedFile(DATA)
    ranged.trickle_after, ranged.trickle, ranged.interval = CUT, 16, 0.2
    server.route(NATIVE, ranged)
    configure(config_file, server, timeout=1)  # the helper answers "continues" meanwhile
    run_helper(HELLO_UUID)
    path = wait_for_checkpoint(cache_dir, CUT)
    (pid,) = downloader_pids(HELLO_UUID)

    os.kill(pid, signal.SIGKILL)
    wait_until_lock_free(cache_dir)
    kept = json.loads(Path(paths.partial_meta(path)).read_text())["bytes"]
    ranged.trickle_after = None
    configure(config_file, server, timeout=20)
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert "DBGDSYMPath" in entry, entry
    last = ranged.requests()[-1]
    assert (last.status, last.range, last.sent) == (206, f"bytes={kept}-", len(DATA) - kept)
    assert_published(cache_dir)


def wait_for_checkpoint(cache_dir: Path, at_least: int) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for _, path in partial_files(cache_dir):
            try:
                meta = json.loads(Path(paths.partial_meta(path)).read_text())
            except (OSError, ValueError):
                continue
            if meta["bytes"] >= at_least:
                return path
        time.sleep(0.05)
    raise AssertionError("no checkpoint of the partial download")


def wait_until_lock_free(cache_dir: Path) -> None:
    cache = CachePaths(str(cache_dir))
    deadline = time.monotonic() + 10
    while locks.is_held(cache, HELLO_UUID):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_check_calls_a_partial_download_a_leftover_and_status_lists_it(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    path = cut_once(cache_dir)

    checked = run_cli("check")
    shown = run_cli("status")
    as_json = json.loads(run_cli("status", "--json").stdout)

    assert checked.returncode == 0, checked.stdout
    assert f"leftover: {path}: a resumable partial download ({CUT} of {len(DATA)} bytes, " in (
        checked.stdout
    )
    assert "invalid" not in checked.stdout.replace("0 invalid", "")
    assert f"partial download {HELLO_UUID}: " in shown.stdout
    assert "resumable" in shown.stdout
    (partial,) = as_json["partial_downloads"]
    assert partial["uuid"] == HELLO_UUID
    assert (partial["bytes_done"], partial["bytes_total"]) == (CUT, len(DATA))
    assert partial["resumable"] is True


def test_a_new_run_keeps_the_partial_files_but_not_other_staging(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    cut_once(cache_dir)
    stale = cache_dir / "tmp" / f"{HEX}-killedrun"
    stale.mkdir()
    served.fail_next(3)  # this run fails too, before it finishes anything

    look_up_again()
    settled_record(cache_dir, HELLO_UUID, timeout=30)

    assert not stale.exists()
    assert [owner for owner, _ in partial_files(cache_dir)] == [HEX]


def test_gc_removes_partial_downloads_a_day_old(served: ss.RangedFile, cache_dir: Path) -> None:
    path = cut_once(cache_dir)
    cache = CachePaths(str(cache_dir))

    fresh = Collector(cache, max_size=None, max_age=1e9, dry_run=False).run()
    assert fresh.partials == [] and os.path.exists(path)
    later = time.time() + STALE_PARTIAL_AGE + 60
    old = Collector(cache, max_size=None, max_age=1e9, dry_run=False, now=later).run()

    assert old.partials == [path]
    assert partial_files(cache_dir) == []
    assert not os.path.exists(paths.partial_meta(path))


def test_check_repair_keeps_a_fresh_partial_download_and_removes_a_stale_one(
    served: ss.RangedFile, cache_dir: Path
) -> None:
    path = cut_once(cache_dir)

    fresh = run_cli("check", "--repair")
    assert "kept until it is a day old" in fresh.stdout, fresh.stdout
    assert os.path.exists(path) and os.path.exists(paths.partial_meta(path))

    two_days_ago = time.time() - 2 * STALE_PARTIAL_AGE
    for written in (path, paths.partial_meta(path)):
        os.utime(written, (two_days_ago, two_days_ago))
    stale = run_cli("check", "--repair")
    assert f"repaired leftover: {path}: a resumable partial download" in stale.stdout
    assert "stale" in stale.stdout
    assert partial_files(cache_dir) == []
    assert not os.path.exists(paths.partial_meta(path))


# -- S3: presigned GETs go through the same transfer ------------------------------------


def test_an_s3_download_continues_a_partial_file(
    s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SeaweedFS: the presigned GET carries Range and If-Range (the object's ETag),
    the 206 continues the file, and the whole body still meets its x-amz-meta-sha256."""
    key = f"t{uuid.uuid4().hex[:12]}/{LAYOUT_PATHS['unified']}"
    writer = s3.client("ci")
    writer.put_object(
        Bucket=SYMBOLS, Key=key, Body=DATA, Metadata={"sha256": hashlib.sha256(DATA).hexdigest()}
    )
    etag = writer.head_object(Bucket=SYMBOLS, Key=key)["ETag"]
    reader = s3.identities["reader"]
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", reader.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", reader.secret_key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(s3_presign, "_signers", {})  # none made with another test's keys
    options = sources.Options(settings={"endpoint_url": s3.endpoint_url, "region": "us-east-1"})
    with transfer.Session() as session:
        store = s3_source.S3Reader(f"s3://{SYMBOLS}/", session, options)
        partial = sources.Partial(str(tmp_path / "partial"), store.where(key))
        Path(partial.path).write_bytes(DATA[:CUT])
        sidecar = {"source": partial.identity, "validator": etag, "total": len(DATA), "bytes": CUT}
        Path(paths.partial_meta(partial.path)).write_text(json.dumps(sidecar))
        answers: list[tuple[int, str | None, str | None]] = []

        client = session.http_client
        stream = client.stream

        @contextlib.contextmanager
        def seen(
            url: http11.Url, headers: Mapping[str, str], *args: Any, **kwargs: Any
        ) -> Iterator[http11.Response]:
            with stream(url, headers, *args, **kwargs) as response:
                answers.append(
                    (response.status_code, headers.get("Range"), headers.get("If-Range"))
                )
                yield response

        client.stream = seen  # type: ignore[method-assign]
        dest = str(tmp_path / "download")
        got = store.get(key, dest, sources.Terms(partial=partial))

    assert answers == [(206, f"bytes={CUT}-", etag)]
    assert Path(dest).read_bytes() == DATA
    assert got.sha256 == hashlib.sha256(DATA).hexdigest()
    assert not os.path.exists(partial.path)
    assert not os.path.exists(paths.partial_meta(partial.path))
