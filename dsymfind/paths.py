"""Where things live: all path policy in one place (environment override, then platform).

Imported on the helper's hot path: `os` and `sys` only. The platform rules are the few
lines platformdirs would give us, without its import cost.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_ENV = "DSYMFIND_CONFIG"
CACHE_DIR_ENV = "DSYMFIND_CACHE_DIR"
APP = "dsymfind"


def is_macos() -> bool:
    return sys.platform == "darwin"


def home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def _xdg(env: Mapping[str, str], var: str, fallback: str) -> str:
    value = env.get(var, "")
    return value if os.path.isabs(value) else os.path.join(home(env), fallback)


def config_file(env: Mapping[str, str]) -> str:
    if env.get(CONFIG_ENV):
        return os.path.abspath(env[CONFIG_ENV])
    if is_macos():
        return os.path.join(home(env), "Library", "Application Support", APP, "config.toml")
    return os.path.join(_xdg(env, "XDG_CONFIG_HOME", ".config"), APP, "config.toml")


def default_cache_dir(env: Mapping[str, str]) -> str:
    if is_macos():
        # The location the DebugSymbols documentation uses in its example.
        return os.path.join(home(env), "Library", "SymbolCache", APP)
    return os.path.join(_xdg(env, "XDG_CACHE_HOME", ".cache"), APP)


def default_log_file(env: Mapping[str, str]) -> str:
    if is_macos():
        return os.path.join(home(env), "Library", "Logs", APP, f"{APP}.log")
    return os.path.join(
        _xdg(env, "XDG_STATE_HOME", os.path.join(".local", "state")), APP, f"{APP}.log"
    )


def state_dir(env: Mapping[str, str]) -> str:
    """What dsymfind keeps about the system it changed (install's backup)."""
    if is_macos():
        return os.path.join(home(env), "Library", "Application Support", APP)
    return os.path.join(_xdg(env, "XDG_STATE_HOME", os.path.join(".local", "state")), APP)


def launch_agents_dir(env: Mapping[str, str]) -> str:
    return os.path.join(home(env), "Library", "LaunchAgents")


def snapshot_dir(env: Mapping[str, str]) -> str:
    """Where compiled configuration snapshots go: derived data, so the platform's cache."""
    if is_macos():
        return os.path.join(home(env), "Library", "Caches", APP, "config-snapshots")
    # Not inside $XDG_CACHE_HOME/dsymfind: that is the symbol cache, whose size and
    # contents `status`, `gc` and `check` account for.
    return os.path.join(state_dir(env), "config-snapshots")


def debugsymbols_prefs(env: Mapping[str, str]) -> list[str]:
    """The com.apple.DebugSymbols preference files, the user's before the machine's."""
    if not is_macos():
        return []
    name = "com.apple.DebugSymbols.plist"
    return [os.path.join(home(env), "Library", "Preferences", name), f"/Library/Preferences/{name}"]


def short_name(text: str) -> str:
    """A stable file name standing for a path or URL (FNV-1a; hashlib would cost an import)."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


class CacheLayout:
    """The folders inside the cache directory; every writer and reader goes through here."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root

    @property
    def uuids(self) -> str:
        """The file-mapped UUID tree that DebugSymbols can read directly."""
        return os.path.join(self.root, "uuids")

    @property
    def answers(self) -> str:
        """Remembered helper answers, one file per UUID (see answers.py)."""
        return os.path.join(self.root, "answers")

    @property
    def index(self) -> str:
        """Persistent indexes of the search paths (see search_index.py)."""
        return os.path.join(self.root, "index")

    @property
    def dsyms(self) -> str:
        """Bundles dsymfind created itself (downloads, unpacked archives)."""
        return os.path.join(self.root, "dsyms")

    @property
    def executables(self) -> str:
        """Executables fetched for --copyExecutable."""
        return os.path.join(self.root, "executables")

    @property
    def locks(self) -> str:
        """One lock file per UUID; lock files are never deleted."""
        return os.path.join(self.root, "locks")

    @property
    def negative(self) -> str:
        """One empty marker per UUID that no server has; its mtime says since when."""
        return os.path.join(self.root, "negative")

    def negative_marker(self, uuid_hex: str, *, executable: bool = False) -> str:
        """No server has the dSYM (or, with `executable`, the executable) of a UUID."""
        return os.path.join(self.negative, uuid_hex + (".executable" if executable else ""))

    def failing_server_marker(self, server_url: str) -> str:
        return os.path.join(self.failing_servers, short_name(server_url))

    def lock_file(self, uuid_hex: str) -> str:
        return os.path.join(self.locks, f"{uuid_hex}.lock")

    @property
    def downloads(self) -> str:
        """One status record per download, for `dsymfind status` and waiting helpers."""
        return os.path.join(self.root, "downloads")

    @property
    def failing_servers(self) -> str:
        """One marker per server that recently failed, so lookups skip it for a while."""
        return os.path.join(self.root, "failing-servers")

    @property
    def tmp(self) -> str:
        """Staging area on the cache's own file system, so renames into place are atomic."""
        return os.path.join(self.root, "tmp")
