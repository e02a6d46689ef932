"""The effective settings, fast: a compiled snapshot of the configuration.

The helper runs hundreds of times per debugging session, and parsing TOML (and the
DebugSymbols preferences plist) on every call would more than double its start-up
cost. So the parsed result is kept as a marshal file, keyed by the stat of every
file and the environment it was made from; only a change re-runs config_reader.py.

The snapshot is a memo of config_reader.read_settings, so this module imports the reader
(lazily: a hit must not load it) and never the other way: the reader knows nothing of
the snapshot, and the shape it makes, Settings, is its own.
"""

from dsymfind import __version__, _bare_os, atomic, paths
from dsymfind.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    # Callers name what load() hands out settings.Settings; config_reader, which makes it,
    # defines it.
    from dsymfind.config_reader import Settings as Settings


# Overrides `resident_downloader` (seconds; 0: no resident downloader), as
# DSYMFIND_CACHE_DIR overrides cache_dir: for one session, a script, a test suite.
RESIDENT_ENV = "DSYMFIND_RESIDENT_DOWNLOADER"

# Environment variables that change what the files mean (defaults derive from them).
# DEBUGINFOD_URLS: the servers of a debuginfod server, part of the stores' fingerprint.
_ENV_INPUTS = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "DSYMFIND_SERVERS",
    "DEBUGINFOD_URLS",
)
# 5: copy_executables; 6: a server's kind and its own settings; 7: source_checkouts;
# 8: stores_fingerprint; 9: resident_downloader
_SNAPSHOT_FORMAT = 9


def load(env: "Mapping[str, str] | None" = None) -> "Settings":
    """The effective settings; raises ConfigError for a bad configuration."""
    env = _bare_os.current_environ() if env is None else env
    config_file = paths.config_file(env)
    stamp = _stamp(env, config_file)
    snapshot_file = _bare_os.join(paths.snapshot_dir(env), paths.short_name(config_file))
    snapshot = _read_snapshot(snapshot_file, stamp)
    if snapshot is None:
        snapshot = _compile(env, config_file)
        atomic.write_marshal(snapshot_file, {"stamp": stamp, "body": snapshot})
    if "error" in snapshot:
        raise ConfigError(str(snapshot["error"]))
    # made by config_reader.read_settings, so of that shape
    settings: Settings = snapshot["settings"]  # type: ignore[assignment]
    return _apply_environment(settings, env)


def _apply_environment(settings: "Settings", env: "Mapping[str, str]") -> "Settings":
    override = env.get(paths.CACHE_DIR_ENV)
    if override:
        cache_dir = _bare_os.expanduser(override)
        if not _bare_os.isabs(cache_dir):
            # As for cache_dir in the file: lldb, launchd and a shell each start elsewhere.
            raise ConfigError(f"environment {paths.CACHE_DIR_ENV}: {override!r} is not absolute")
        settings["cache_dir"] = _bare_os.normpath(cache_dir)
        settings["origins"]["cache_dir"] = f"environment {paths.CACHE_DIR_ENV}"
    resident = env.get(RESIDENT_ENV)
    if resident:
        try:
            seconds = float(resident)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0:  # NaN too
            raise ConfigError(
                f"environment {RESIDENT_ENV}: {resident!r} is not a number of seconds >= 0"
            )
        settings["resident_downloader"] = seconds
        settings["origins"]["resident_downloader"] = f"environment {RESIDENT_ENV}"
    return settings


def _compile(env: "Mapping[str, str]", config_file: str) -> dict[str, object]:
    from dsymfind import config_reader  # only when the snapshot is stale: tomllib, plistlib

    try:
        return {"settings": config_reader.read_settings(env, config_file)}
    except ConfigError as exc:
        return {"error": str(exc)}


def _stamp(env: "Mapping[str, str]", config_file: str) -> tuple[object, ...]:
    files = [config_file, *paths.debugsymbols_prefs(env)]
    return (
        _SNAPSHOT_FORMAT,
        __version__,
        config_file,
        tuple(_file_stamp(f) for f in files),
        tuple(env.get(name, "") for name in _ENV_INPUTS),
    )


def _file_stamp(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = _bare_os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _read_snapshot(path: str, stamp: tuple[object, ...]) -> dict[str, object] | None:
    data = atomic.read_marshal(path)
    if not isinstance(data, dict) or data.get("stamp") != stamp:
        return None
    body = data.get("body")
    return body if isinstance(body, dict) else None
