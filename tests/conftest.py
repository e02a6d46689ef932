"""Shared test fixtures: an isolated home for every test, the real fixtures, the real helper."""

from __future__ import annotations

import json
import os
import plistlib
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "macho"
UUIDS = json.loads((FIXTURES / "uuids.json").read_text())
HELLO_UUID = UUIDS["hello"]["uuids"][0]["uuid"]
GREET_UUID = UUIDS["libgreet.dylib"]["uuids"][0]["uuid"]
UNIVERSAL_UUIDS = {u["arch"]: u["uuid"] for u in UUIDS["universal"]["uuids"]}
# How xnu's lldb macros read the helper's answer: a regex, not a plist parser.
XNU_PAIR = re.compile(r"<key>(.*?)</key>\s*<string>(.*?)</string>")
BIN = Path(sys.executable).parent
# Stand-ins for the macOS tools install and doctor drive (see tests/fakes).
FAKES = Path(__file__).parent / "fakes"


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


def write_config(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def toml_list(paths: list[Path] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(str(p)) for p in paths) + "]"


@pytest.fixture
def products(tmp_path: Path) -> Path:
    """A writable copy of the committed Mach-O fixtures (tests move and damage them)."""
    target = tmp_path / "products"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


def dwarf_of(bundle: Path) -> Path:
    files = sorted((bundle / "Contents" / "Resources" / "DWARF").iterdir())
    assert len(files) == 1
    return files[0]


def make_tree_link(root: Path, uuid: str, target: Path, *, relative: bool = True) -> Path:
    """A DebugSymbols file-mapped entry: uuids/XXXX/XXXX/XXXX/XXXX/XXXX/XXXXXXXXXXXX."""
    digits = uuid.replace("-", "")
    folder = root.joinpath(*(digits[i : i + 4] for i in range(0, 20, 4)))
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / digits[20:]
    link.symlink_to(os.path.relpath(target, folder) if relative else target)
    return link


class HelperRun:
    def __init__(self, done: subprocess.CompletedProcess[bytes]) -> None:
        self.stdout, self.stderr, self.returncode = done.stdout, done.stderr, done.returncode
        self.plist = plistlib.loads(done.stdout)

    def entry(self, uuid: str) -> dict[str, str]:
        value = self.plist[uuid]
        assert isinstance(value, dict)
        return value


def run_helper(*args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> HelperRun:
    """The installed `dsymForUUID` as a real process, held to the whole contract."""
    done = subprocess.run(
        [str(BIN / "dsymForUUID"), *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ if env is None else env),
        timeout=timeout,
        check=False,
    )
    assert done.stderr == b"", done.stderr
    assert done.returncode == 0
    assert done.stdout.startswith(b"<?xml"), done.stdout[:80]
    run = HelperRun(done)
    _check_xnu_view(run)
    return run


def _check_xnu_view(run: HelperRun) -> None:
    """Every string the plist holds is also what xnu's regex scrapes, pair by pair."""
    scraped = XNU_PAIR.findall(run.stdout.decode())
    expected = [
        (key, _xml_escaped(value)) for values in run.plist.values() for key, value in values.items()
    ]
    assert scraped == expected


def _xml_escaped(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    )


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dsymfind"), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ if env is None else env),
        timeout=timeout,
        check=False,
    )


# Imports that cost the helper more than its own start-up (issue #2's measurements).
COSTLY_MODULES = frozenset(
    {
        "httpx",
        "filelock",
        "macholib",
        "tomllib",
        "plistlib",
        "logging",
        "subprocess",
        "argparse",
        "json",
        "threading",
        "dataclasses",
    }
)


def modules_loaded_answering(uuid: str, expect: bytes) -> set[str]:
    """The modules a fresh interpreter has loaded after the helper answered `uuid`."""
    probe = (
        "import os, sys, time\n"
        "from dsymfind import helper\n"
        f"out = helper.respond([{uuid!r}], os.environ, started=time.monotonic())\n"
        f"assert {expect!r} in out, out\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())
