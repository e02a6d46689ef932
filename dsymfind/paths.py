"""Where things live: all path policy in one place (environment override, then platform).

Imported on the helper's hot path: bare_os and `sys` only. The platform rules are the few
lines platformdirs would give us, without its import cost.
"""

import sys

from dsymfind import bare_os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_ENV = "DSYMFIND_CONFIG"
CACHE_DIR_ENV = "DSYMFIND_CACHE_DIR"
APP = "dsymfind"


def is_macos() -> bool:
    return sys.platform == "darwin"


def home(env: "Mapping[str, str]") -> str:
    return env.get("HOME") or bare_os.expanduser("~")


def _xdg(env: "Mapping[str, str]", var: str, fallback: str) -> str:
    value = env.get(var, "")
    return value if bare_os.isabs(value) else bare_os.join(home(env), fallback)


def config_file(env: "Mapping[str, str]") -> str:
    if env.get(CONFIG_ENV):
        return bare_os.abspath(env[CONFIG_ENV])
    if is_macos():
        return bare_os.join(home(env), "Library", "Application Support", APP, "config.toml")
    return bare_os.join(_xdg(env, "XDG_CONFIG_HOME", ".config"), APP, "config.toml")


def default_cache_dir(env: "Mapping[str, str]") -> str:
    if is_macos():
        # The location the DebugSymbols documentation uses in its example.
        return bare_os.join(home(env), "Library", "SymbolCache", APP)
    return bare_os.join(_xdg(env, "XDG_CACHE_HOME", ".cache"), APP)


def default_log_file(env: "Mapping[str, str]") -> str:
    if is_macos():
        return bare_os.join(home(env), "Library", "Logs", APP, f"{APP}.log")
    return bare_os.join(
        _xdg(env, "XDG_STATE_HOME", bare_os.join(".local", "state")), APP, f"{APP}.log"
    )


def state_dir(env: "Mapping[str, str]") -> str:
    """What dsymfind keeps about the system it changed (install's backup)."""
    if is_macos():
        return bare_os.join(home(env), "Library", "Application Support", APP)
    return bare_os.join(_xdg(env, "XDG_STATE_HOME", bare_os.join(".local", "state")), APP)


def launcher_file(env: "Mapping[str, str]") -> str:
    """The helper `dsymfind install` writes and registers (macos/launcher.py).

    Under the user's home, so install can always write it and tests stay in theirs. Not in
    state_dir on macOS: lldb splits DBGShellCommands on spaces, and "Application Support"
    has one. The XDG state folder (~/.local/state) has none on either platform.
    """
    state = _xdg(env, "XDG_STATE_HOME", bare_os.join(".local", "state"))
    return bare_os.join(state, APP, "dsymForUUID")


def launch_agents_dir(env: "Mapping[str, str]") -> str:
    return bare_os.join(home(env), "Library", "LaunchAgents")


def snapshot_dir(env: "Mapping[str, str]") -> str:
    """Where compiled configuration snapshots go: derived data, so the platform's cache."""
    if is_macos():
        return bare_os.join(home(env), "Library", "Caches", APP, "config-snapshots")
    # Not inside $XDG_CACHE_HOME/dsymfind: that is the symbol cache, whose size and
    # contents `status`, `gc` and `check` account for.
    return bare_os.join(state_dir(env), "config-snapshots")


def debugsymbols_prefs(env: "Mapping[str, str]") -> list[str]:
    """The com.apple.DebugSymbols preference files, the user's before the machine's."""
    if not is_macos():
        return []
    name = "com.apple.DebugSymbols.plist"
    return [bare_os.join(home(env), "Library", "Preferences", name), f"/Library/Preferences/{name}"]


def short_name(text: str) -> str:
    """A stable file name standing for a path or URL (FNV-1a; hashlib would cost an import)."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"
