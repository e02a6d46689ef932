"""Shared test fixtures: an isolated home for every test, a stand-in macOS, cache paths,
symbol servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FAKES, FIXTURES
from support.seaweed import SeaweedS3, running_seaweed
from support.served import configure_native

from dsymfind import settings
from dsymfind.macos import registration


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` first (otherwise in their order): one started last would keep
    its worker busy long after the other has run out of tests."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME and XDG folders: nothing touches the real user's files."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".state"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    for var in ("DSYMFIND_CONFIG", "DSYMFIND_CACHE_DIR", "DSYMFIND_SERVERS"):
        monkeypatch.delenv(var, raising=False)
    # No resident downloader unless a test asks for one: each would outlive its test by
    # `resident_downloader` seconds (tests/fetch/test_resident.py tests them).
    monkeypatch.setenv(settings.RESIDENT_ENV, os.environ.get("TRY_RESIDENT", "0"))
    return home


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP clients honour proxy variables; 127.0.0.1 must never go through one."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def macos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in macOS: fake `defaults` and `launchctl` first on PATH, their state in a folder."""
    state = tmp_path / "macos"
    monkeypatch.setenv("FAKE_MACOS_STATE", str(state))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    return state


@pytest.fixture
def config_file(isolated_home: Path) -> Path:
    return isolated_home / ".config" / "dsymfind" / "config.toml"


@pytest.fixture
def cache_dir(isolated_home: Path) -> Path:
    return isolated_home / ".cache" / "dsymfind"


@pytest.fixture
def products(tmp_path: Path) -> Path:
    """A writable copy of the committed Mach-O fixtures (tests move and damage them)."""
    target = tmp_path / "products"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


@pytest.fixture
def spaced_products(products: Path, tmp_path: Path) -> Path:
    """The same copy under a folder whose name holds spaces, as the helper gets it: in words."""
    spaced = tmp_path / "My Build Products"
    shutil.copytree(products, spaced, symlinks=True)
    return spaced


@pytest.fixture
def server() -> Iterator[ss.SymbolServer]:
    """A symbol server with no files: a path answers what the test routes there, else 404.
    Modules whose server serves a folder define a `server` of their own."""
    with ss.SymbolServer() as running:
        yield running


@pytest.fixture
def native_server(server: ss.SymbolServer, config_file: Path) -> ss.SymbolServer:
    """The same server, configured as the one server (native layout, a 10 s timeout)."""
    configure_native(config_file, server, timeout=10)
    return server


@pytest.fixture
def helper_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where `install --link` puts the fixed path, moved under tmp_path (its folder not made)."""
    link = tmp_path / "usr-local-bin" / "dsymForUUID"
    monkeypatch.setattr(registration, "HELPER_LINK", str(link))
    return link


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    """One real S3 engine (SeaweedFS on loopback) for the whole run: it takes seconds to
    start, and tests keep apart by prefix."""
    with contextlib.closing(running_seaweed(tmp_path_factory.mktemp("seaweed"))) as engines:
        yield next(engines)
