"""The servers `$DEBUGINFOD_URLS` lists as one store (`url = "debuginfod:"`): real symbol
servers on 127.0.0.1 in the debuginfod layout, asked by the real helper and its detached
downloader."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import HELLO_UUID, LAYOUT_PATHS, link_of, write_config
from support.negative import negative_marker, negative_markers
from support.processes import run_cli, run_helper, settled_record
from support.served import HELLO_DWARF

from dsymfind import stores
from dsymfind.config_reader import read_settings
from dsymfind.errors import ConfigError
from dsymfind.stores import base, transfer
from dsymfind.uuids import uuid_hex

HEX = uuid_hex(HELLO_UUID)
KEY = "/" + LAYOUT_PATHS["debuginfod"]
# Enough for a 500's retries with backoff (stores/base.py ATTEMPTS), on a loaded machine.
TIMEOUT = 30


@pytest.fixture
def servers() -> Iterator[tuple[ss.SymbolServer, ss.SymbolServer]]:
    """Two empty servers: each answers 404 but what a test routes there."""
    with ss.SymbolServer() as first, ss.SymbolServer() as second:
        yield first, second


@pytest.fixture
def federation(config_file: Path) -> Path:
    """The configuration naming the kind: one server, `debuginfod:`, its layout by default."""
    write_config(config_file, f"timeout = {TIMEOUT}\n[[servers]]\nurl = 'debuginfod:'\n")
    return config_file


def env_listing(*urls: str) -> dict[str, str]:
    return dict(os.environ, DEBUGINFOD_URLS=" ".join(urls))


def has_hello(server: ss.SymbolServer) -> None:
    server.route(KEY, ss.body(HELLO_DWARF))


def always_failing(server: ss.SymbolServer) -> None:
    server.route(KEY, ss.statuses(*[500] * 20))


def log_text(isolated_home: Path) -> str:
    return (isolated_home / ".state" / "dsymfind" / "dsymfind.log").read_text()


def assert_fetched(env: dict[str, str], cache_dir: Path) -> None:
    path = Path(run_helper(HELLO_UUID, env=env).entry(HELLO_UUID)["DBGDSYMPath"])
    assert path.read_bytes() == HELLO_DWARF
    assert link_of(cache_dir, HELLO_UUID).resolve() == path.resolve()


def assert_not_found_and_not_remembered(env: dict[str, str], cache_dir: Path) -> None:
    """The helper answers why, and no negative entry is made: the next lookup asks again."""
    assert "DBGError" in run_helper(HELLO_UUID, env=env).entry(HELLO_UUID)
    record = settled_record(cache_dir, HELLO_UUID, timeout=TIMEOUT)
    assert record["state"] != "found"
    assert negative_markers(cache_dir) == []
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))


# -- the helper, end to end --------------------------------------------------------------


def test_the_second_server_has_it(
    servers: tuple[ss.SymbolServer, ss.SymbolServer], federation: Path, cache_dir: Path
) -> None:
    first, second = servers
    has_hello(second)

    assert_fetched(env_listing(first.url, second.url + "/"), cache_dir)
    assert first.count(KEY) == 1  # asked first, in the order listed


def test_a_failing_server_beside_one_that_has_it(
    servers: tuple[ss.SymbolServer, ss.SymbolServer], federation: Path, cache_dir: Path
) -> None:
    failing, good = servers
    always_failing(failing)
    has_hello(good)

    assert_fetched(env_listing(failing.url, good.url), cache_dir)


def test_a_failing_server_is_a_failure_not_a_miss(
    servers: tuple[ss.SymbolServer, ss.SymbolServer],
    federation: Path,
    cache_dir: Path,
    isolated_home: Path,
) -> None:
    failing, empty = servers
    always_failing(failing)

    assert_not_found_and_not_remembered(env_listing(empty.url, failing.url), cache_dir)
    assert empty.count(KEY) == 1
    assert "500" in log_text(isolated_home)


def test_none_has_it_is_remembered(
    servers: tuple[ss.SymbolServer, ss.SymbolServer], federation: Path, cache_dir: Path
) -> None:
    first, second = servers

    env = env_listing(first.url, second.url)
    assert run_helper(HELLO_UUID, env=env).plist == {}
    assert negative_marker(cache_dir, HELLO_UUID, env=env).exists()
    assert (first.count(KEY), second.count(KEY)) == (1, 1)


def test_a_non_http_entry_is_refused_and_the_others_asked(
    servers: tuple[ss.SymbolServer, ss.SymbolServer],
    federation: Path,
    cache_dir: Path,
    isolated_home: Path,
) -> None:
    empty, good = servers
    refused = "file:///srv/debuginfo"

    assert_not_found_and_not_remembered(env_listing(refused, empty.url), cache_dir)
    assert empty.count(KEY) == 1
    assert f"{refused}: refused" in log_text(isolated_home)

    has_hello(good)
    assert_fetched(env_listing(refused, "  ", good.url), cache_dir)


@pytest.mark.parametrize("value", [None, "", " \t\n "])
def test_no_servers_listed_is_a_failure_not_a_miss(
    federation: Path, cache_dir: Path, isolated_home: Path, value: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    if value is not None:
        env["DEBUGINFOD_URLS"] = value

    error = run_helper(HELLO_UUID, env=env).entry(HELLO_UUID)["DBGError"]
    assert "$DEBUGINFOD_URLS lists no servers" in error
    assert "$DEBUGINFOD_URLS lists no servers" in log_text(isolated_home)
    assert negative_markers(cache_dir) == []


# -- one fetch, in process ----------------------------------------------------------------


def test_a_cut_transfer_is_never_continued_from_another_server(
    servers: tuple[ss.SymbolServer, ss.SymbolServer],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The first server's bytes stay in a partial file of its own: the second server,
    whose file has the same ETag, is asked for all of its file, not for the rest."""
    cutting, whole = servers
    theirs, ours = ss.RangedFile(b"a" * 4096), ss.RangedFile(b"b" * 4096)
    theirs.cut_after, theirs.cuts = 1000, 10
    cutting.route(KEY, theirs)
    whole.route(KEY, ours)
    monkeypatch.setenv("DEBUGINFOD_URLS", f"{cutting.url} {whole.url}")
    limits = base.Limits(attempts=2, backoff_base=0.01)
    key = KEY.lstrip("/")

    with transfer.Session(limits) as session:
        source = stores.open_reader("debuginfod:", session)
        partial = base.Partial(str(tmp_path / "federation"), source.where(key))
        terms = base.Terms(limits=limits, partial=partial)
        source.get(key, str(tmp_path / "dest"), terms)

    assert (tmp_path / "dest").read_bytes() == b"b" * 4096
    assert [served.range for served in ours.requests()] == [None]
    assert any(served.range for served in theirs.requests())  # its own partial was continued


# -- configuration, config and doctor ----------------------------------------------------


@pytest.mark.parametrize("url", ["debuginfod:", "debuginfod://", "DEBUGINFOD:"])
def test_the_kind_is_named_by_its_scheme(config_file: Path, url: str) -> None:
    write_config(config_file, f"[[servers]]\nurl = '{url}'\n")
    (server,) = read_settings({}, str(config_file))["servers"]
    assert (server["url"], server["kind"]) == ("debuginfod:", "debuginfod")
    assert (server["name"], server["layout"]) == ("DEBUGINFOD_URLS", "debuginfod")


def test_a_host_in_the_location_is_refused(config_file: Path) -> None:
    write_config(config_file, "[[servers]]\nurl = 'debuginfod://debuginfod.example/'\n")
    with pytest.raises(ConfigError, match=r"servers\[0\]\.url: .*\$DEBUGINFOD_URLS lists"):
        read_settings({}, str(config_file))


def test_config_and_doctor_show_it(
    servers: tuple[ss.SymbolServer, ss.SymbolServer], federation: Path
) -> None:
    first, second = servers
    has_hello(second)
    env = env_listing(first.url, second.url)

    shown = run_cli("config", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "debuginfod:" in shown.stdout and "DEBUGINFOD_URLS" in shown.stdout

    line = next(
        text
        for text in run_cli("doctor", env=env).stdout.splitlines()
        if "server DEBUGINFOD_URLS" in text
    )
    assert line.startswith("ok"), line

    empty = dict(env, DEBUGINFOD_URLS="")
    line = next(
        text
        for text in run_cli("doctor", env=empty).stdout.splitlines()
        if "server DEBUGINFOD_URLS" in text
    )
    assert not line.startswith("ok") and "lists no servers" in line, line
