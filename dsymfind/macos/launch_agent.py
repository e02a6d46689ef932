"""dsymfind's launchd agents, rendered from launchd/, loaded, removed: one line of AGENTS
and one template each.

- `gc` runs `dsymfind gc` daily.
- `resident` keeps a resident downloader from login on (fetch/resident.py), so that even
  the first miss of a session starts its download with a fork rather than an interpreter
  and its imports. It runs the helper's launcher, whose interpreter and import folders the
  resident must share with the helpers it serves. Installed unless `resident_downloader`
  is 0.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from dsymfind import _plist, atomic, paths, settings
from dsymfind.apple import plists
from dsymfind.errors import DsymfindError
from dsymfind.macos.system import System


class Agent(NamedTuple):
    label: str
    what: str  # what it does, for install's and doctor's lines

    @property
    def template_name(self) -> str:
        return f"{self.label}.plist"


GC = Agent("org.dsymfind.gc", "daily `dsymfind gc`")
RESIDENT = Agent("org.dsymfind.resident", "a resident downloader from login on")
AGENTS = (GC, RESIDENT)


class Values(NamedTuple):
    """What the templates' placeholders stand for."""

    dsymfind: str  # the dsymfind command
    helper: str  # the helper's launcher
    log_dir: str


def wanted(env: Mapping[str, str]) -> tuple[Agent, ...]:
    """The agents the config file wants: no resident when its resident_downloader is 0.
    launchd runs the agents without the shell's environment, so $DSYMFIND_RESIDENT_DOWNLOADER
    (one session's override) has no say."""
    from_file = {name: value for name, value in env.items() if name != settings.RESIDENT_ENV}
    if settings.load(from_file)["resident_downloader"] > 0:
        return AGENTS
    return tuple(agent for agent in AGENTS if agent is not RESIDENT)


def template_file(agent: Agent) -> Path:
    """Inside the installed package (the wheel carries it there), else the source tree's."""
    package = Path(__file__).parent.parent  # dsymfind/, this module being in dsymfind/macos
    for folder in (package / "launchd", package.parent / "launchd"):
        candidate = folder / agent.template_name
        if candidate.is_file():
            return candidate
    raise DsymfindError(
        f"the launchd agent template {agent.template_name} is missing from this install"
    )


def agent_file(agent: Agent, env: Mapping[str, str]) -> str:
    return os.path.join(paths.launch_agents_dir(env), agent.template_name)


def target(agent: Agent, system: System) -> str:
    """The agent as launchctl names it."""
    return f"{system.gui_domain()}/{agent.label}"


def render(agent: Agent, values: Values) -> bytes:
    filled = {"label": agent.label, **values._asdict()}
    text = string.Template(template_file(agent).read_text(encoding="utf-8")).substitute(
        {key: _plist.escape(value) for key, value in filled.items()}
    )
    data = text.encode("utf-8")
    try:
        plists.loads_dict(data)  # a damaged install's template: say so before launchd does
    except plists.UnreadablePlist as exc:
        raise DsymfindError(f"{template_file(agent)} renders to an {exc}") from None
    return data


def install(system: System, env: Mapping[str, str], agent: Agent, values: Values) -> str:
    """Write the agent and (re)load it; returns the agent file."""
    path = agent_file(agent, env)
    data = render(agent, values)
    system.note(f"write {path}")
    if not system.dry_run:
        os.makedirs(values.log_dir, mode=0o700, exist_ok=True)
        atomic.write_bytes(path, data)
    launchctl = system.tool("launchctl")
    # An agent from an earlier install must go first; not being loaded is fine.
    system.change([launchctl, "bootout", target(agent, system)], allow_failure=True)
    system.change([launchctl, "bootstrap", system.gui_domain(), path])
    return path


def uninstall(system: System, env: Mapping[str, str], agent: Agent) -> bool:
    """Boot the agent out and remove its file; False when there was none."""
    path = agent_file(agent, env)
    if not os.path.exists(path):
        return False
    system.change([system.tool("launchctl"), "bootout", target(agent, system)], allow_failure=True)
    system.note(f"remove {path}")
    if not system.dry_run:
        atomic.unlink_quietly(path)
    return True
