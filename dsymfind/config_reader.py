"""Reading and checking the configuration: the TOML file and DebugSymbols' preferences.

Only run when settings.py finds its snapshot stale, so the costly imports live here.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict

from dsymfind import atomic, debugsymbols, paths, stores
from dsymfind.apple import plists
from dsymfind.errors import ConfigError
from dsymfind.stores import base, layouts

if TYPE_CHECKING:
    from dsymfind.stores.base import Server

DEFAULT_TIMEOUT = 10.0
# LLDB kills the helper after 640 s; a wait anywhere near that is a configuration mistake.
MAX_TIMEOUT = 600.0
# `defaults` is only a fallback for a preferences file not yet flushed by cfprefsd.
DEFAULTS_COMMAND_TIMEOUT = 2.0
DEBUGSYMBOLS_DOMAIN = "com.apple.DebugSymbols"
SERVERS_ENV = "DSYMFIND_SERVERS"
# Remember "no server has it" this long, as symbolicator does for private sources.
DEFAULT_NEGATIVE_CACHE_TTL = 3600.0
DEFAULT_MAX_DOWNLOAD_BYTES = base.MAX_BYTES
DEFAULT_DOWNLOAD_TIMEOUT = base.TOTAL_TIMEOUT
# A server that failed (timeouts, 5xx) is skipped this long so a dead host cannot slow lookups.
DEFAULT_SERVER_BACKOFF = 60.0
# `dsymfind gc` (run by the launchd agent) evicts downloads nobody used for this long.
DEFAULT_MAX_UNUSED_AGE = 90 * 86400.0
# The resident downloader stays this long after its last download (fetch/resident.py):
# the misses of one debugging session come within seconds of each other.
DEFAULT_RESIDENT_DOWNLOADER = 120.0
_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KIB": 1 << 10,
    "KB": 1000,
    "M": 1 << 20,
    "MIB": 1 << 20,
    "MB": 1000**2,
    "G": 1 << 30,
    "GIB": 1 << 30,
    "GB": 1000**3,
}


class Settings(TypedDict):
    """The effective settings, as read_settings makes them and settings.py keeps them."""

    config_file: str
    cache_dir: str
    file_mapped_paths: list[str]
    search_paths: list[str]
    debugsymbols_file_mapped_paths: list[str]
    debugsymbols_search_paths: list[str]
    timeout: float
    log_file: str
    servers: list[Server]
    negative_cache_ttl: float
    max_download_bytes: int
    download_timeout: float
    # Seconds a resident downloader waits for the next miss; 0: none is kept.
    resident_downloader: float
    server_backoff: float
    # For `dsymfind gc`: None is no size limit.
    max_cache_size: int | None
    max_unused_age: float
    # For `dsymfind pdb`: a Windows debugger symbol path (srv*, cache*, folders).
    symbol_path: str
    # Every answer asks for the executable, as --copyExecutable does (callers that
    # never send it, like LLDB 14's crashlog.py, need one).
    copy_executables: bool
    # The user's git clones, where the sources of builds from CI are checked out.
    source_checkouts: list[str]
    # What the negative cache's entries are written under: a digest of the servers'
    # settings, made once, when the configuration is read (stores_fingerprint below).
    stores_fingerprint: str
    # Where each value came from, for `dsymfind config`.
    origins: dict[str, str]


def read_settings(env: Mapping[str, str], config_file: str) -> Settings:
    table, origin = _read_toml(config_file, named=bool(env.get(paths.CONFIG_ENV)))
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{config_file}: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    settings = _defaults(env, config_file)
    for key, value in table.items():
        settings[key] = _KEYS[key](f"{config_file}: {key}", value)  # type: ignore[literal-required]
        settings["origins"][key] = origin
    if env.get(SERVERS_ENV, "").strip():
        settings["servers"] = parse_servers_env(env[SERVERS_ENV])
        settings["origins"]["servers"] = f"environment {SERVERS_ENV}"
    mapped, search = read_debugsymbols(env)
    settings["debugsymbols_file_mapped_paths"] = mapped
    settings["debugsymbols_search_paths"] = search
    settings["stores_fingerprint"] = stores_fingerprint(settings["servers"], env)
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
        "servers": [],
        "negative_cache_ttl": DEFAULT_NEGATIVE_CACHE_TTL,
        "max_download_bytes": DEFAULT_MAX_DOWNLOAD_BYTES,
        "download_timeout": DEFAULT_DOWNLOAD_TIMEOUT,
        "resident_downloader": DEFAULT_RESIDENT_DOWNLOADER,
        "server_backoff": DEFAULT_SERVER_BACKOFF,
        "max_cache_size": None,
        "max_unused_age": DEFAULT_MAX_UNUSED_AGE,
        "symbol_path": "",
        "copy_executables": False,
        "source_checkouts": [],
        "stores_fingerprint": "",  # made from the servers once they are read
        "origins": {},
    }
    settings["origins"] = {key: "default" for key in _KEYS}
    return settings


# Far beyond any real configuration; a bound so /dev/zero named as one cannot hang the helper.
MAX_CONFIG_BYTES = 1 << 20


def _read_toml(config_file: str, *, named: bool) -> tuple[dict[str, object], str]:
    """The table and its origin. Only the default file may be absent: a file the environment
    names and that does not exist is a typo, and defaults would hide every server in it."""
    try:
        data = atomic.read_small_file(config_file, MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{config_file}: larger than {MAX_CONFIG_BYTES} bytes")
        return tomllib.loads(data.decode("utf-8")), f"config file {config_file}"
    except FileNotFoundError:
        if named:
            raise ConfigError(
                f"environment {paths.CONFIG_ENV}: {config_file} does not exist"
            ) from None
        return {}, "default"
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{config_file}: not valid TOML: nested too deeply") from None
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


def _number(where: str, value: object, what: str) -> float:
    """A finite number: nan and inf are TOML floats, but no setting means them."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: expected {what}, got {value!r}")
    return float(value)


def _timeout(where: str, value: object) -> float:
    value = _number(where, value, "a number of seconds")
    if not 0 < value <= MAX_TIMEOUT:
        raise ConfigError(f"{where}: {value!r} is outside 0 < timeout <= {MAX_TIMEOUT:g}")
    return float(value)


def _flag(where: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _seconds(where: str, value: object) -> float:
    seconds = _number(where, value, "a number of seconds >= 0")
    if seconds < 0:
        raise ConfigError(f"{where}: expected a number of seconds >= 0, got {value!r}")
    return seconds


def _positive_seconds(where: str, value: object) -> float:
    seconds = _seconds(where, value)
    if seconds == 0:
        raise ConfigError(f"{where}: must be more than 0 seconds")
    return seconds


def _size(where: str, value: object, *, zero: bool = False) -> int:
    """Bytes, as a number or a string such as "500MiB" or "2G"; 0 in any spelling only
    when `zero` says it is a size."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and (value > 0 or (zero and value == 0))
    ):
        return value
    match = re.fullmatch(
        r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value if isinstance(value, str) else ""
    )
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _SIZE_UNITS or (float(match.group(1)) == 0 and not zero):
        raise ConfigError(f"{where}: expected a size such as 2GiB or 500MiB, got {value!r}")
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def parse_size(where: str, value: object, *, zero: bool = False) -> int:
    """The public name of the size parser, for command-line options such as gc's --max-size.

    The configuration's max_cache_size = 0 means "no limit" (_optional_size); nobody types
    `--max-size 0` to mean that, so there `zero` takes 0 at its word.
    """
    return _size(where, value, zero=zero)


_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(where: str, value: object) -> float:
    """Seconds, as a number or a string such as "90d", "12h", "30m" or "2w"."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = _number(where, value, "a duration such as 90d, 12h or 30m")
        if seconds >= 0:
            return seconds
    match = re.fullmatch(
        r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value if isinstance(value, str) else ""
    )
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _DURATION_UNITS:
        raise ConfigError(f"{where}: expected a duration such as 90d, 12h or 30m, got {value!r}")
    return float(match.group(1)) * _DURATION_UNITS[unit]


def _optional_size(where: str, value: object) -> int | None:
    return None if value in (0, "", "unlimited") else _size(where, value)


def _text(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value


def _symbol_path(where: str, value: object) -> str:
    """A Windows debugger symbol path, checked now so that a mistake is named here."""
    from dsymfind.stores import symbol_path

    text = _text(where, value)
    try:
        symbol_path.parse(text, default_store="/")
    except symbol_path.SymbolPathError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return text


def _servers(where: str, value: object) -> list[Server]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected [[servers]] tables, got {value!r}")
    return [_server(f"{where}[{i}]", item) for i, item in enumerate(value)]


# Every server's keys; its kind reads the others it knows (stores/, SETTING_KEYS).
_SERVER_KEYS = ("name", "url", "layout", "casing", "headers", "template", "allow_scripts")


def _server(where: str, value: object) -> Server:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table with url and layout, got {value!r}")
    url = _url(f"{where}.url", value.get("url"))
    scheme = stores.scheme_of(url)
    kind = stores.kind_for(scheme)
    layout = _choice(f"{where}.layout", value.get("layout", kind.DEFAULT_LAYOUT), layouts.LAYOUTS)
    _refuse_unknown_keys(where, value, kind.SETTING_KEYS)
    casing = value.get("casing", "default")
    casing = layouts.CASING_ALIASES.get(casing, casing) if isinstance(casing, str) else casing
    own = {key: value[key] for key in kind.SETTING_KEYS if key in value}
    return {
        "name": str(value.get("name") or kind.default_name(url)),
        "url": url,
        "kind": scheme,
        "layout": layout,
        "casing": _choice(f"{where}.casing", casing, layouts.CASINGS),
        "headers": _headers(f"{where}.headers", value.get("headers", {})),
        "template": _template(f"{where}.template", value.get("template", ""), layout),
        "allow_scripts": _flag(f"{where}.allow_scripts", value.get("allow_scripts", False)),
        "settings": kind.read_settings(where, own),
    }


def _refuse_unknown_keys(where: str, table: Mapping[str, object], own: tuple[str, ...]) -> None:
    known = (*_SERVER_KEYS, *own)
    for key in sorted(set(table) - set(known)):
        readers = stores.kinds_reading(key)
        if readers:
            raise ConfigError(f"{where}.{key}: only for {', '.join(readers)} servers")
        raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(known)})")


# What a template may say; anything else in braces is a mistake that would be requested as is.
_TEMPLATE_PLACEHOLDER = re.compile(r"\{(UUID|uuid|UUIDHEX|uuidhex)\}")
_PLACEHOLDERS = "{UUID}, {uuid}, {UUIDHEX}, {uuidhex}"


def _template(where: str, value: object, layout: str) -> str:
    if not isinstance(value, str) or (layout == layouts.TEMPLATE) != bool(value):
        raise ConfigError(f"{where}: required with layout 'template' and only there")
    if value and not _TEMPLATE_PLACEHOLDER.search(value):
        raise ConfigError(f"{where}: {value!r} has no placeholder ({_PLACEHOLDERS})")
    stray = re.search(r"[{}]", _TEMPLATE_PLACEHOLDER.sub("", value))
    if stray:
        raise ConfigError(f"{where}: {value!r} has an unknown placeholder (known: {_PLACEHOLDERS})")
    return value


# RFC 9110's token characters: what a header name may be made of.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _headers(where: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: expected a table of strings")
    for name, text in value.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ConfigError(f"{where}: {name!r} is not a header name")
        problem = base.header_value_problem(text)
        if problem:
            raise ConfigError(f"{where}.{name}: {problem}")
    return {str(k): v for k, v in value.items()}


def _choice(where: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _url_forms() -> str:
    return ", ".join(stores.url_forms()) + " or a folder path"


def _url(where: str, value: object) -> str:
    """A store location: a URL whose scheme names a kind of store (stores/), or a folder."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a URL ({_url_forms()}), got {value!r}")
    if os.path.isabs(value):
        return os.path.normpath(value)
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - parsed on access: a bad port raises here, not mid-download
    except ValueError as exc:
        raise ConfigError(f"{where}: {value!r} is not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in stores.KINDS:
        raise ConfigError(f"{where}: expected a URL ({_url_forms()}), got {value!r}")
    return stores.kind_for(scheme).check_location(where, value)


def parse_servers_env(text: str) -> list[Server]:
    """`DSYMFIND_SERVERS`: whitespace-separated LAYOUT=URL words, the URL of a `template`
    server holding its placeholders, e.g. `ssqp=https://a/ template=https://b/{UUID}.zip`."""
    servers = []
    for i, word in enumerate(text.split()):
        layout, sep, url = word.partition("=")
        where = f"{SERVERS_ENV} word {i + 1}"
        if not sep:
            raise ConfigError(f"{where}: expected LAYOUT=URL, got {word!r}")
        if re.search(r",\s*[a-z_0-9]+=", url):
            raise ConfigError(f"{where}: separate servers with spaces, not commas: {word!r}")
        table: dict[str, object] = {"layout": layout, "url": url}
        if layout == layouts.TEMPLATE:
            table["template"] = url
        servers.append(_server(where, table))
    return servers


_KEYS: dict[str, Callable[[str, object], object]] = {
    "cache_dir": _directory,
    "file_mapped_paths": _directories,
    "search_paths": _directories,
    "timeout": _timeout,
    "log_file": _directory,
    "servers": _servers,
    "negative_cache_ttl": _seconds,
    "max_download_bytes": _size,
    "download_timeout": _positive_seconds,
    "resident_downloader": _seconds,
    "server_backoff": _seconds,
    "max_cache_size": _optional_size,
    "max_unused_age": parse_duration,
    "symbol_path": _symbol_path,
    "copy_executables": _flag,
    "source_checkouts": _directories,
}


def read_debugsymbols(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """DBGFileMappedPaths and DBGSearchPaths from the com.apple.DebugSymbols defaults."""
    prefs = _read_prefs_files(paths.debugsymbols_prefs(env))
    if prefs is None and paths.is_macos():
        prefs = _read_defaults_command()
    prefs = prefs or {}
    return _path_list(prefs.get(debugsymbols.FILE_MAPPED_PATHS)), _path_list(
        prefs.get(debugsymbols.SEARCH_PATHS)
    )


def _read_prefs_files(files: list[str]) -> dict[str, object] | None:
    """The merged preference files, the first (the user's) winning; None when none exists."""
    merged: dict[str, object] | None = None
    for path in reversed(files):
        try:
            data = plists.loads(atomic.read_small_file(path, MAX_CONFIG_BYTES))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ConfigError(f"{path}: unreadable DebugSymbols preferences: {exc!r}") from None
        except plists.UnreadablePlist as exc:
            why = exc.reason
            raise ConfigError(f"{path}: unreadable DebugSymbols preferences ({why})") from None
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
        data = plists.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, plists.UnreadablePlist):
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


def stores_fingerprint(servers: list[Server], env: Mapping[str, str]) -> str:
    """What a negative entry was written under: it names the entry's folder, so that a
    change of the server list, a server's location, layout or credentials setting makes
    every entry written before mean nothing (docs/cache-format.md).

    The credentials setting is what is configured, never a secret: a header's name and
    the `${VAR}` names its value refers to (not its text), an s3:// server's profile and
    `anonymous`; a URL counts without its user information or query. A secret that
    changes is not seen, and needs not be: a store that refuses credentials fails, which
    the negative cache never remembers. The order of the servers does not count.
    """
    import json  # when the settings snapshot is compiled, never on an answer's path

    from dsymfind.paths import short_name

    described = sorted(json.dumps(_described(server, env), sort_keys=True) for server in servers)
    return short_name("\n".join(described))


def _described(server: Server, env: Mapping[str, str]) -> dict[str, object]:
    from dsymfind.stores import base, debuginfod

    described: dict[str, object] = {
        "kind": server["kind"],
        "url": base.redact(server["url"]),
        "layout": server["layout"],
        "casing": server["casing"],
        "template": base.redact(server["template"]) if server["template"] else "",
        "headers": {
            name: base.ENV_REFERENCE.findall(value) for name, value in server["headers"].items()
        },
        "settings": {
            key: base.redact(value) if isinstance(value, str) else value
            for key, value in server["settings"].items()
        },
    }
    if server["url"] == debuginfod.LOCATION:
        # Its servers are the ones the variable lists when a request is made.
        described["listed"] = [base.redact(url) for url in env.get(debuginfod.VARIABLE, "").split()]
    return described
