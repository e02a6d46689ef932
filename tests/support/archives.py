"""Xcode's build products made around the real fixtures: an `.xcarchive` with its Info.plist."""

from __future__ import annotations

import plistlib
import shutil
from pathlib import Path

from support.fixtures import FIXTURES


def write_plist(path: Path, value: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(plistlib.dumps(value))


def xcarchive(folder: Path, *, name: str = "MyApp") -> Path:
    """An archive as Xcode makes one: its Info.plist, the app, the app's and a framework's
    dSYMs (real ones, renamed)."""
    archive = folder / f"{name}.xcarchive"
    app_path = f"Applications/{name}.app"
    write_plist(
        archive / "Info.plist",
        {
            "ApplicationProperties": {
                "ApplicationPath": app_path,
                "CFBundleIdentifier": "com.example.myapp",
                "CFBundleShortVersionString": "2.3",
                "CFBundleVersion": "812",
            },
            "ArchiveVersion": 2,
            "Name": name,
        },
    )
    write_plist(
        archive / "Products" / app_path / "Info.plist",
        {"CFBundleName": name, "CFBundleShortVersionString": "9.9", "CFBundleVersion": "9"},
    )
    shutil.copytree(FIXTURES / "hello.dSYM", archive / "dSYMs" / f"{name}.app.dSYM")
    shutil.copytree(FIXTURES / "libgreet.dylib.dSYM", archive / "dSYMs" / "Greet.framework.dSYM")
    return archive
