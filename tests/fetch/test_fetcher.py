"""A bug in one candidate source stays in that candidate: the other servers still answer,
the bug is logged with its traceback, and a partial download it leaves is dropped.

`dsymfind fetch` runs in-process (the same fetcher as the downloader) so that one
source's resume code can be made to fail as a real bug once did: a UnicodeEncodeError,
raised only when a kept partial download is continued.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, LAYOUT_PATHS, dwarf_of, link_of, write_config

from dsymfind.main import main
from dsymfind.paths import CachePaths
from dsymfind.stores import partial

DATA = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
CUT = len(DATA) * 6 // 10
NATIVE = LAYOUT_PATHS["native"]


def configure(config_file: Path, *urls: str) -> None:
    servers = "".join(f"[[servers]]\nurl = '{url}'\nlayout = 'native'\n" for url in urls)
    write_config(config_file, f"download_timeout = 30\n{servers}")


def partial_files(cache_dir: Path) -> list[tuple[str, str]]:
    return CachePaths(str(cache_dir)).partial_files()


# Far beyond the time the broken candidate needs to reach its bug, on any machine.
BUG_WAIT = 60.0


def break_resuming(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """From now on, continuing a kept partial download raises what no source should; the
    event is set once it has."""
    original = partial.Kept.request_headers
    raised = threading.Event()

    def broken(kept: partial.Kept) -> dict[str, str]:
        if kept.offset:
            raised.set()
            raise UnicodeEncodeError("ascii", '"caf\xe9"', 4, 5, "ordinal not in range(128)")
        return original(kept)

    monkeypatch.setattr(partial.Kept, "request_headers", broken)
    return raised


def after(event: threading.Event) -> ss.Route:
    """hello's DWARF file, once `event` is set: the other candidate reaches its bug before
    this one can win and cancel it, however the machine schedules them."""

    def route(exchange: ss.Exchange) -> None:
        event.wait(BUG_WAIT)
        exchange.respond(200, DATA, content_type=ss.OCTET_STREAM)

    return route


def test_a_bug_in_one_source_leaves_the_others_to_answer_and_drops_its_partial(
    server: ss.SymbolServer,
    config_file: Path,
    cache_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ranged = ss.RangedFile(DATA)
    ranged.cut_after, ranged.fail_after_cut = CUT, 3  # cut, and the retries get 503s
    server.route(f"/{NATIVE}", ranged)
    configure(config_file, f"{server.url}/")
    assert main(["fetch", HELLO_UUID]) == 1
    assert len(partial_files(cache_dir)) == 1  # a cut with a validator: kept to continue
    capsys.readouterr()
    bug = break_resuming(monkeypatch)

    with ss.SymbolServer() as other:
        other.route(f"/{NATIVE}", after(bug))
        configure(config_file, f"{server.url}/", f"{other.url}/")
        assert main(["fetch", "--ignore-negative-cache", HELLO_UUID]) == 0
    assert bug.is_set()

    assert link_of(cache_dir, HELLO_UUID).read_bytes() == DATA
    assert "Traceback" not in capsys.readouterr().err
    assert partial_files(cache_dir) == []  # the next lookup starts clean
    logged = (tmp_path / "home").rglob("dsymfind.log")
    text = "".join(path.read_text() for path in logged)
    assert f"bug in source {server.url}/{NATIVE}" in text, text
    assert "Traceback" in text and "UnicodeEncodeError" in text
