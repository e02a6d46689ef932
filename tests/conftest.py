"""Shared test fixtures: an isolated home for every test, a stand-in macOS, cache paths."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.fixtures import FAKES, FIXTURES


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
    return home


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
