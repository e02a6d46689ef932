"""The launchd agent that runs `dsymfind gc` daily: rendered from launchd/, loaded, removed."""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from pathlib import Path

from dsymfind import _plist, atomic, paths
from dsymfind.apple import plists
from dsymfind.errors import DsymfindError
from dsymfind.macos.system import System

LABEL = "org.dsymfind.gc"
TEMPLATE_NAME = f"{LABEL}.plist"


def template_file() -> Path:
    """Inside the installed package (the wheel carries it there), else the source tree's."""
    package = Path(__file__).parent.parent  # dsymfind/, this module being in dsymfind/macos
    for folder in (package / "launchd", package.parent / "launchd"):
        candidate = folder / TEMPLATE_NAME
        if candidate.is_file():
            return candidate
    raise DsymfindError(f"the launchd agent template {TEMPLATE_NAME} is missing from this install")


def agent_file(env: Mapping[str, str]) -> str:
    return os.path.join(paths.launch_agents_dir(env), TEMPLATE_NAME)


def render(dsymfind_command: str, log_dir: str) -> bytes:
    values = {"label": LABEL, "dsymfind": dsymfind_command, "log_dir": log_dir}
    text = string.Template(template_file().read_text(encoding="utf-8")).substitute(
        {key: _plist.escape(value) for key, value in values.items()}
    )
    data = text.encode("utf-8")
    try:
        plists.loads_dict(data)  # a damaged install's template: say so before launchd does
    except plists.UnreadablePlist as exc:
        raise DsymfindError(f"{template_file()} renders to an {exc}") from None
    return data


def install(system: System, env: Mapping[str, str], dsymfind_command: str, log_dir: str) -> str:
    """Write the agent and (re)load it; returns the agent file."""
    target = agent_file(env)
    data = render(dsymfind_command, log_dir)
    system.note(f"write {target}")
    if not system.dry_run:
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        atomic.write_bytes(target, data)
    launchctl = system.tool("launchctl")
    # An agent from an earlier install must go first; not being loaded is fine.
    system.change([launchctl, "bootout", f"{system.gui_domain()}/{LABEL}"], allow_failure=True)
    system.change([launchctl, "bootstrap", system.gui_domain(), target])
    return target


def uninstall(system: System, env: Mapping[str, str]) -> bool:
    """Boot the agent out and remove its file; False when there was none."""
    target = agent_file(env)
    if not os.path.exists(target):
        return False
    system.change(
        [system.tool("launchctl"), "bootout", f"{system.gui_domain()}/{LABEL}"], allow_failure=True
    )
    system.note(f"remove {target}")
    if not system.dry_run:
        atomic.unlink_quietly(target)
    return True
