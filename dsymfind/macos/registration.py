"""Registering dsymfind with DebugSymbols, and undoing exactly what was done.

install sets three keys of com.apple.DebugSymbols (see docs/helper-contract.md):
- DBGShellCommands, as a string: LLDB ignores the array form and splits the string on
  spaces, so the helper's path may not contain one. The helper registered is the
  launcher (macos/launcher.py), not the console script: it survives lldb's environment.
- DBGFileMappedPaths, with the cache's UUID tree appended: lookups of cached UUIDs then
  never start the helper.
- DBGSpotlightPaths, an empty array unless set: setting any DebugSymbols key turns
  Spotlight off otherwise.

Before the first change, the previous values are kept in a backup. uninstall puts each
key back, unless the user changed it since; then it only takes out what install added.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Mapping
from typing import Any

from dsymfind import atomic, paths
from dsymfind.debugsymbols import FILE_MAPPED_PATHS, SHELL_COMMANDS, SPOTLIGHT_PATHS
from dsymfind.errors import DsymfindError
from dsymfind.macos.system import PrefValue, System

# crashlog.py and the xnu lldb macros run the helper from this fixed path.
HELPER_LINK = "/usr/local/bin/dsymForUUID"
_BACKUP_FORMAT = 1


def backup_file(env: Mapping[str, str]) -> str:
    return os.path.join(paths.state_dir(env), "install-backup.json")


def installed_command(name: str) -> str:
    """A console script of this installation: beside its Python first, then on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    found = beside if os.access(beside, os.X_OK) else shutil.which(name)
    if found is None:
        raise DsymfindError(f"cannot find the installed `{name}` command (is dsymfind installed?)")
    return os.path.abspath(found)


def check_helper_path(helper: str) -> None:
    if " " in helper:
        raise DsymfindError(
            f"the helper path {helper!r} contains a space, and lldb splits DBGShellCommands on "
            f"spaces; use --link to register {HELPER_LINK} instead (or set XDG_STATE_HOME, "
            "where the helper is written, to a folder without spaces)"
        )


def as_list(value: object) -> list[str]:
    """A DebugSymbols path value (a string or an array) as a list of strings."""
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def register(
    system: System,
    env: Mapping[str, str],
    current: dict[str, object],
    helper: str,
    uuid_tree: str,
    *,
    launcher: str,
) -> list[str]:
    """Point DebugSymbols, whose preferences are `current`, at `helper` and `uuid_tree`;
    returns what changed, for the user.

    The backup also names the `launcher` written, which uninstall removes.
    """
    wanted: dict[str, PrefValue] = {
        SHELL_COMMANDS: helper,
        FILE_MAPPED_PATHS: _with_tree(current.get(FILE_MAPPED_PATHS), uuid_tree),
    }
    if SPOTLIGHT_PATHS not in current:
        wanted[SPOTLIGHT_PATHS] = []
    changes = {key: value for key, value in wanted.items() if current.get(key) != value}
    _save_backup(
        system, env, current, changes, helper=helper, uuid_tree=uuid_tree, launcher=launcher
    )
    report = []
    for key, value in changes.items():
        system.write_pref(key, value)
        report.append(f"{key}: {_show(current.get(key))} -> {_show(value)}")
    return report


def unregister(system: System, backup: dict[str, Any], uuid_tree: str, helper: str) -> list[str]:
    """Restore what `register` changed; returns what was done, for the user.

    Without a backup, only what is recognisably dsymfind's is taken out.
    """
    current = system.read_debugsymbols()
    # A backup says exactly what install changed (maybe nothing); without one, only what
    # is unmistakably ours: our helper and our tree.
    installed: dict[str, Any] = (
        backup["installed"] if backup else {SHELL_COMMANDS: helper, FILE_MAPPED_PATHS: None}
    )
    restore, kept = _restored(current, backup.get("previous", {}), installed, uuid_tree)
    report = []
    for key, value in restore.items():
        if value is None:
            system.delete_pref(key)
        else:
            system.write_pref(key, value)
        report.append(f"{key}: {_show(current.get(key))} -> {_show(value)}")
    report += [f"{key}: changed since install, left as {_show(current[key])}" for key in kept]
    return report


def _restored(
    current: dict[str, object],
    previous: dict[str, Any],
    installed: dict[str, Any],
    uuid_tree: str,
) -> tuple[dict[str, PrefValue | None], list[str]]:
    """The value to put back for each key (None: delete it), and the keys left alone."""
    restore: dict[str, PrefValue | None] = {}
    kept = []
    for key in (SHELL_COMMANDS, SPOTLIGHT_PATHS):
        if key not in installed or key not in current:
            continue
        if current[key] == installed[key]:
            restore[key] = previous.get(key)
        else:
            kept.append(key)
    mapped = as_list(current.get(FILE_MAPPED_PATHS))
    if FILE_MAPPED_PATHS in installed and uuid_tree in mapped:
        remaining = [path for path in mapped if path != uuid_tree]
        before = previous.get(FILE_MAPPED_PATHS)
        # The exact earlier value (its string or array form) when nothing else changed.
        restore[FILE_MAPPED_PATHS] = before if remaining == as_list(before) else remaining
    return restore, kept


def _with_tree(value: object, uuid_tree: str) -> list[str]:
    existing = as_list(value)
    return existing if uuid_tree in existing else [*existing, uuid_tree]


def _without(value: object, uuid_tree: str) -> object:
    """A previous value as the user had it: our tree is never part of it."""
    if isinstance(value, list) and uuid_tree in value:
        return [item for item in value if item != uuid_tree]
    return value


def _show(value: object) -> str:
    return "(unset)" if value is None else json.dumps(value)


def load_backup(env: Mapping[str, str]) -> dict[str, Any]:
    """The backup of an earlier install; empty when there was none."""
    try:
        with open(backup_file(env), "rb") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise DsymfindError(f"{backup_file(env)}: unreadable install backup: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != _BACKUP_FORMAT:
        raise DsymfindError(f"{backup_file(env)}: not an install backup of this dsymfind")
    return data


def _backup_or_new(env: Mapping[str, str]) -> dict[str, Any]:
    return load_backup(env) or {"format": _BACKUP_FORMAT, "previous": {}, "installed": {}}


def _save_backup(
    system: System,
    env: Mapping[str, str],
    current: dict[str, object],
    changes: dict[str, PrefValue],
    **installed_paths: str,
) -> None:
    """Keep the values from before install changed them.

    On a re-install, a key whose value is no longer what install wrote was set by the
    user since: that value is what uninstall must give back.
    """
    backup = _backup_or_new(env)
    for key, value in changes.items():
        if key not in backup["installed"] or current.get(key) != backup["installed"][key]:
            backup["previous"][key] = _without(current.get(key), installed_paths["uuid_tree"])
        backup["installed"][key] = value
    backup.update(installed_paths)
    system.note(f"write {backup_file(env)}")
    if not system.dry_run:
        atomic.write_bytes(backup_file(env), json.dumps(backup, indent=2).encode())


def remember_link(
    system: System, env: Mapping[str, str], link: str, target: str, replaced: str | None
) -> None:
    """Note the link install made, and what it pointed at before, for uninstall.

    A target an earlier install recorded was its own doing: what that install found
    there is still what uninstall must give back.
    """
    earlier = load_backup(env).get("link") or {}
    previous = earlier.get("previous") if replaced == earlier.get("target") else replaced
    remember(system, env, "link", {"path": link, "target": target, "previous": previous})


def remember(system: System, env: Mapping[str, str], what: str, value: object) -> None:
    """Keep `value` in the install backup under `what`, for uninstall to undo."""
    backup = _backup_or_new(env)
    backup[what] = value
    if not system.dry_run:
        atomic.write_bytes(backup_file(env), json.dumps(backup, indent=2).encode())


def replaceable_link_targets(env: Mapping[str, str]) -> set[str]:
    """Where a link dsymfind may point elsewhere can lead: this installation's console
    script (what install linked before the launcher existed) and what an earlier install
    recorded. crashlog.py and the xnu macros run the link, so it must reach the launcher.
    """
    targets = set()
    with contextlib.suppress(DsymfindError):  # no console script: nothing of ours to replace
        targets.add(installed_command("dsymForUUID"))
    earlier = load_backup(env).get("link") or {}
    if isinstance(earlier.get("target"), str):
        targets.add(earlier["target"])
    return targets


def forget(system: System, env: Mapping[str, str]) -> None:
    system.note(f"remove {backup_file(env)}")
    if not system.dry_run:
        atomic.unlink_quietly(backup_file(env))


def check_link(link: str, replaceable: set[str]) -> None:
    """Refuse, before any change, to replace what is at `link` unless it leads somewhere
    `replaceable` (or is absent)."""
    current = os.readlink(link) if os.path.islink(link) else None
    if os.path.lexists(link) and current not in replaceable:
        raise DsymfindError(
            f"{link} already exists and is not dsymfind's; move it away or install without --link"
        )


def make_link(
    system: System, link: str, target: str, replaceable: set[str]
) -> tuple[bool, str | None]:
    """`link` -> `target`, unless something else is already there.

    Returns whether we made or changed it, and the target it had before (a link to a
    `replaceable` target is pointed at `target`; anything else is left and refused).
    """
    current = os.readlink(link) if os.path.islink(link) else None
    if current == target:
        return False, None  # the user's own link, or an earlier install's (already remembered)
    check_link(link, replaceable)
    _point(system, link, target)
    return True, current


def remove_link(system: System, link: str, target: str, previous: str | None) -> bool:
    """Take `link` back to `previous` (or away) if it still points at `target`; True if so."""
    if not (os.path.islink(link) and os.readlink(link) == target):
        return False
    if previous:
        _point(system, link, previous)
        return True
    system.note(f"rm {link}")
    if system.dry_run:
        return True
    try:
        os.unlink(link)
    except OSError as exc:
        raise DsymfindError(f"cannot remove {link}: {exc.strerror}; run `sudo rm {link}`") from None
    return True


def _point(system: System, link: str, target: str) -> None:
    """Make `link` point at `target`, replacing a link already there in one rename."""
    system.note(f"ln -sf {target} {link}")
    if system.dry_run:
        return
    temporary = f"{link}.dsymfind-{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(link), exist_ok=True)
        atomic.unlink_quietly(temporary)
        os.symlink(target, temporary)
        os.replace(temporary, link)
    except OSError as exc:
        atomic.unlink_quietly(temporary)
        raise DsymfindError(
            f"cannot create {link}: {exc.strerror}; run `sudo ln -sf {target} {link}`, then "
            "this command again"
        ) from None
