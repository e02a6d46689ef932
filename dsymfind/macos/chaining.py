"""Keeping the helper a team already had: `install` chains it, `uninstall` gives it back.

DebugSymbols runs one helper, so registering dsymfind's would lose the one
DBGShellCommands named before (and whatever it reaches). install adds each such helper
(the string, or each entry of an array, with the arguments it carries) to the user's
config file as a `command:` server (stores/command.py), appended as a [[servers]] table
so the rest of the file stays as it was. The install backup keeps the file as it was and
as install left it; uninstall puts the first back while the file is still the second, and
otherwise takes out only the tables install appended. DBGShellCommands itself is put back by
registration.py, like every key it changes.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Mapping
from typing import Any

from dsymfind import atomic
from dsymfind.errors import DsymfindError
from dsymfind.macos import registration
from dsymfind.macos.system import System
from dsymfind.stores import command

# Where the install backup keeps the config file's record.
BACKUP_KEY = "config"
# A config file install makes: the user's own, as an editor would make it.
NEW_FILE_MODE = 0o644
_HEADING = "\n# Added by `dsymfind install`: the helper DBGShellCommands named before it.\n"


def helpers_in(value: object) -> list[str]:
    """The helpers a DBGShellCommands value names that are not dsymfind's, each the
    program and its own arguments as LLDB runs them: the string, each entry of an array."""
    lines = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    helpers = [_words(line) for line in lines]
    runnable = [w for w in helpers if w and _runnable(w[0]) and not command.is_own_helper(w[0])]
    return list(dict.fromkeys(" ".join(words) for words in runnable))


def _words(line: object) -> list[str]:
    return command.split_as_lldb_does(line) if isinstance(line, str) else []


def _runnable(program: str) -> bool:
    """What lldb could run: anything else never answered, and is not worth a server."""
    return os.path.isabs(program) and os.path.isfile(program) and os.access(program, os.X_OK)


def planned(
    config_file: str, helpers: list[str], configured: list[str]
) -> tuple[str | None, str] | None:
    """The config file's text now (None: there is none) and with a `command:` server for
    each helper not configured yet; None when every one is; DsymfindError when the
    result would not read."""
    tables = [server_table(h) for h in helpers if location(h) not in configured]
    if not tables:
        return None
    try:
        with open(config_file, encoding="utf-8") as f:
            before: str | None = f.read()
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise DsymfindError(f"{config_file}: cannot read ({exc.strerror})") from None
    after = (before or "") + "".join(tables)
    try:
        tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:
        raise DsymfindError(
            f"{config_file}: cannot append a [[servers]] table to it ({exc}); add "
            f"url = {json.dumps(location(helpers[0]))} to your servers yourself"
        ) from None
    return before, after


def location(helper: str) -> str:
    return command.location_of(command.split_as_lldb_does(helper))


def server_table(helper: str) -> str:
    # A JSON string is a TOML basic string for any path a file system gives.
    return f"{_HEADING}[[servers]]\nurl = {json.dumps(location(helper))}\n"


def write(
    system: System, env: Mapping[str, str], config_file: str, before: str | None, after: str
) -> None:
    """The config file as planned, and in the install backup what puts it back. An
    earlier install's record whose file this one found unchanged keeps what that one found."""
    system.note(f"append to {config_file}")
    if not system.dry_run:
        _replace(config_file, after)
    earlier = registration.load_backup(env).get(BACKUP_KEY)
    if isinstance(earlier, dict) and earlier.get("written") == before:
        before = earlier.get("previous")
    kept = {"path": config_file, "previous": before, "written": after}
    registration.remember(system, env, BACKUP_KEY, kept)


def restore(system: System, kept: Mapping[str, Any]) -> str:
    """Put the config file back as install found it; what was done, for the user."""
    path, previous, written = kept["path"], kept["previous"], kept["written"]
    try:
        with open(path, encoding="utf-8") as f:
            now: str | None = f.read()
    except FileNotFoundError:
        now = None
    appended = written[len(previous or "") :]
    if now == written:
        restored = previous
    elif now is not None and appended and appended in now:
        restored = now.replace(appended, "", 1)
    else:
        return f"{path}: changed since install, left as it is (its command: servers too)"
    system.note(f"restore {path}")
    if not system.dry_run:
        if restored is None:
            atomic.unlink_quietly(path)
        else:
            _replace(path, restored)
    return f"{path}: as it was before install"


def _replace(config_file: str, text: str) -> None:
    """The file's new text in one rename, through a symlink to it (a dotfiles checkout's)
    and with its permissions as they were."""
    real = os.path.realpath(config_file)
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    atomic.write_bytes(real, text.encode(), mode=mode)
