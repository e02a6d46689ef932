"""What `dsymfind install` reads and writes as the tests see it: DebugSymbols' preferences
in the stand-in macOS (tests/fakes), and the interpreter install takes its paths from."""

from __future__ import annotations

import plistlib
import sys
from pathlib import Path

import pytest

from support.processes import BIN

DOMAIN = "com.apple.DebugSymbols"


def prefs(state: Path) -> dict[str, object]:
    """DebugSymbols' preferences as the stand-in `defaults` keeps them in `state`."""
    path = state / f"{DOMAIN}.plist"
    return plistlib.loads(path.read_bytes()) if path.exists() else {}


def set_prefs(state: Path, values: dict[str, object]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / f"{DOMAIN}.plist").write_bytes(plistlib.dumps(values))


def python_in(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.executable moved to `folder` (made), beside links to this installation's scripts."""
    folder.mkdir(parents=True)
    for name in ("dsymForUUID", "dsymfind", "python"):
        (folder / name).symlink_to(BIN / name)
    monkeypatch.setattr(sys, "executable", str(folder / "python"))
