"""`dsymfind install` and `dsymfind uninstall`: DebugSymbols registration and the launchd agent."""

from __future__ import annotations

import os

from dsymfind import launch_agent, paths, registration, settings
from dsymfind.system import System


def install(*, link: bool, dry_run: bool) -> int:
    env = os.environ
    system = System(dry_run=dry_run)
    current = settings.load(env)
    helper = registration.installed_command("dsymForUUID")
    registered = registration.HELPER_LINK if link else helper
    # Everything that can refuse does so before the first change.
    system.tool("defaults")
    system.tool("launchctl")
    registration.check_helper_path(registered)
    if link:
        registration.make_link(system, registration.HELPER_LINK, helper)
    uuid_tree = paths.CacheLayout(current["cache_dir"]).uuids
    system.note(f"mkdir -p {uuid_tree}")
    if not dry_run:
        os.makedirs(uuid_tree, mode=0o755, exist_ok=True)
    changes = registration.register(system, env, registered, uuid_tree)
    if link:
        registration.remember_link(system, env, registration.HELPER_LINK, helper)
    agent = launch_agent.install(
        system,
        env,
        registration.installed_command("dsymfind"),
        os.path.dirname(current["log_file"]),
    )
    if not dry_run:
        _report(changes, "DebugSymbols already pointed at dsymfind")
        print(f"launchd agent: {agent} (daily `dsymfind gc`)")
        print("check with: dsymfind doctor")
    return 0


def uninstall(*, dry_run: bool) -> int:
    env = os.environ
    system = System(dry_run=dry_run)
    backup = registration.load_backup(env)
    uuid_tree = backup.get("uuid_tree") or paths.CacheLayout(settings.load(env)["cache_dir"]).uuids
    helper = backup.get("helper") or registration.installed_command("dsymForUUID")
    changes = registration.unregister(system, backup, uuid_tree, helper)
    link = backup.get("link")
    removed_link = isinstance(link, dict) and registration.remove_link(
        system, str(link.get("path")), str(link.get("target"))
    )
    removed_agent = launch_agent.uninstall(system, env)
    registration.forget(system, env)
    if not dry_run:
        _report(changes, "DebugSymbols had nothing of dsymfind's")
        if removed_link:
            print(f"removed {registration.HELPER_LINK}")
        if removed_agent:
            print("launchd agent removed")
        print("the cache is left in place; delete it yourself if you want the space back")
    return 0


def _report(changes: list[str], nothing: str) -> None:
    for line in changes or [nothing]:
        print(line)
