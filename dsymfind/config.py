"""Reading and checking the configuration: the TOML file and DebugSymbols' preferences.

Only run when settings.py finds its snapshot stale, so the costly imports live here.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from dsymfind import paths
from dsymfind.errors import ConfigError

if TYPE_CHECKING:
    from dsymfind.settings import Settings

DEFAULT_TIMEOUT = 10.0
# LLDB kills the helper after 640 s; a wait anywhere near that is a configuration mistake.
MAX_TIMEOUT = 600.0
# `defaults` is only a fallback for a preferences file not yet flushed by cfprefsd.
DEFAULTS_COMMAND_TIMEOUT = 2.0
DEBUGSYMBOLS_DOMAIN = "com.apple.DebugSymbols"


def read_settings(env: Mapping[str, str], config_file: str) -> Settings:
    table, origin = _read_toml(config_file)
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{config_file}: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    settings = _defaults(env, config_file)
    for key, value in table.items():
        settings[key] = _KEYS[key](f"{config_file}: {key}", value)  # type: ignore[literal-required]
        settings["origins"][key] = origin
    mapped, search = read_debugsymbols(env)
    settings["debugsymbols_file_mapped_paths"] = mapped
    settings["debugsymbols_search_paths"] = search
    return settings


def _defaults(env: Mapping[str, str], config_file: str) -> Settings:
    settings: Settings = {
        "config_file": config_file,
        "cache_dir": paths.default_cache_dir(env),
        "file_mapped_paths": [],
        "search_paths": [],
        "debugsymbols_file_mapped_paths": [],
        "debugsymbols_search_paths": [],
        "timeout": DEFAULT_TIMEOUT,
        "log_file": paths.default_log_file(env),
        "origins": {},
    }
    settings["origins"] = {key: "default" for key in _KEYS}
    return settings


def _read_toml(config_file: str) -> tuple[dict[str, object], str]:
    try:
        with open(config_file, "rb") as f:
            return tomllib.load(f), f"config file {config_file}"
    except FileNotFoundError:
        return {}, "default"
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{config_file}: cannot read: {exc}") from None


def _directory(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a path string, got {value!r}")
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        raise ConfigError(f"{where}: {value!r} is not an absolute path")
    return os.path.normpath(path)


def _directories(where: str, value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of paths, got {value!r}")
    return [_directory(f"{where}[{i}]", item) for i, item in enumerate(value)]


def _timeout(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: expected a number of seconds, got {value!r}")
    if not 0 < value <= MAX_TIMEOUT:
        raise ConfigError(f"{where}: {value!r} is outside 0 < timeout <= {MAX_TIMEOUT:g}")
    return float(value)


_KEYS: dict[str, Callable[[str, object], object]] = {
    "cache_dir": _directory,
    "file_mapped_paths": _directories,
    "search_paths": _directories,
    "timeout": _timeout,
    "log_file": _directory,
}


def read_debugsymbols(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """DBGFileMappedPaths and DBGSearchPaths from the com.apple.DebugSymbols defaults."""
    prefs = _read_prefs_files(paths.debugsymbols_prefs(env))
    if prefs is None and paths.is_macos():
        prefs = _read_defaults_command()
    prefs = prefs or {}
    return _path_list(prefs.get("DBGFileMappedPaths")), _path_list(prefs.get("DBGSearchPaths"))


def _read_prefs_files(files: list[str]) -> dict[str, object] | None:
    """The merged preference files, the first (the user's) winning; None when none exists."""
    merged: dict[str, object] | None = None
    for path in reversed(files):
        try:
            with open(path, "rb") as f:
                data = plistlib.load(f)
        except FileNotFoundError:
            continue
        except (OSError, plistlib.InvalidFileException, ValueError) as exc:
            raise ConfigError(f"{path}: unreadable DebugSymbols preferences: {exc}") from None
        if isinstance(data, dict):
            merged = {**(merged or {}), **data}
    return merged


def _read_defaults_command() -> dict[str, object] | None:
    defaults = shutil.which("defaults")
    if defaults is None:
        return None
    try:
        done = subprocess.run(
            [defaults, "export", DEBUGSYMBOLS_DOMAIN, "-"],
            capture_output=True,
            timeout=DEFAULTS_COMMAND_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        data = plistlib.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, plistlib.InvalidFileException, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _path_list(value: object) -> list[str]:
    """A DebugSymbols path value: a string or an array of strings; anything else is ignored."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [
        os.path.normpath(os.path.expanduser(item))
        for item in items
        if isinstance(item, str) and item.strip()
    ]
