"""`dsymfind install`: DebugSymbols registration and the launchd agent, and their undoing
(uninstall.py parses `dsymfind uninstall` and runs `uninstall` here)."""

from __future__ import annotations

import argparse
import os
import sys

from dsymfind import debugsymbols, paths, permissions, settings
from dsymfind.errors import DsymfindError
from dsymfind.macos import chaining, launch_agent, launcher, registration
from dsymfind.macos.system import System
from dsymfind.paths import CachePaths

DETAILS = (
    "Sets DBGShellCommands to the installed dsymForUUID, appends the cache's UUID tree "
    "to DBGFileMappedPaths, keeps Spotlight on, and loads launchd agents: one runs "
    "`dsymfind gc` daily, one keeps a resident downloader from login on (unless "
    "resident_downloader is 0). What it changes is backed up; `dsymfind uninstall` "
    "restores it."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--link",
        action="store_true",
        help="also symlink /usr/local/bin/dsymForUUID (the path crashlog.py and xnu macros use)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the defaults/launchctl commands, run none"
    )


def run(args: argparse.Namespace) -> int:
    return install(link=args.link, dry_run=args.dry_run)


def install(*, link: bool, dry_run: bool) -> int:
    env = os.environ
    system = System(dry_run=dry_run)
    current = settings.load(env)
    _refuse_environment_only_settings(current)
    # The launcher, not the console script: lldb's environment cannot break it.
    helper = paths.launcher_file(env)
    python = launcher.interpreter()
    dsymfind_command = registration.installed_command("dsymfind")
    registered = registration.HELPER_LINK if link else helper
    # Everything that can refuse does so before the first change.
    system.tool("defaults")
    system.tool("launchctl")
    registration.check_helper_path(registered)
    agents = launch_agent.wanted(env)
    for agent in launch_agent.AGENTS:
        launch_agent.template_file(agent)
    folders = launcher.import_folders(python)
    replaceable = registration.replaceable_link_targets(env) | {helper}
    if link:
        registration.check_link(registration.HELPER_LINK, replaceable)
    uuid_tree = CachePaths(current["cache_dir"]).uuids
    prefs = system.read_debugsymbols()
    # The helper(s) it names that are not ours are kept, as command: servers.
    chained = chaining.helpers_in(prefs.get(debugsymbols.SHELL_COMMANDS))
    config = chaining.planned(
        current["config_file"], chained, [s["url"] for s in current["servers"]]
    )
    if not dry_run:
        permissions.secure_cache(current["cache_dir"])
        os.makedirs(uuid_tree, mode=permissions.PRIVATE_DIR_MODE, exist_ok=True)
    launcher.write(system, helper, python, folders)
    uncompiled = launcher.compile_package(system, launcher.package_folder())
    made_link, replaced = (
        registration.make_link(system, registration.HELPER_LINK, helper, replaceable)
        if link
        else (False, None)
    )
    if config is not None:
        chaining.write(system, env, current["config_file"], *config)
    changes = registration.register(system, env, prefs, registered, uuid_tree, launcher=helper)
    if made_link:
        registration.remember_link(system, env, registration.HELPER_LINK, helper, replaced)
    values = launch_agent.Values(dsymfind_command, helper, os.path.dirname(current["log_file"]))
    installed = []
    for agent in launch_agent.AGENTS:
        if agent in agents:
            installed.append((agent, launch_agent.install(system, env, agent, values)))
        else:
            launch_agent.uninstall(system, env, agent)  # turned off since an earlier install
    if not dry_run:
        print(f"helper: {helper} (runs {python} {launcher.FLAGS}, isolated from PYTHON* variables)")
        _report(changes, "DebugSymbols already pointed at dsymfind")
        for program in chained:
            print(
                f"chained: {program} answers what dsymfind does not find, as server "
                f'url = "command:{program}" in {current["config_file"]}'
            )
        for agent, path in installed:
            print(f"launchd agent: {path} ({agent.what})")
        _report_bytecode(uncompiled)
        print("check with: dsymfind doctor")
    return 0


def _report_bytecode(uncompiled: list[str]) -> None:
    if uncompiled:
        print(
            f"bytecode: {len(uncompiled)} modules could not be compiled (first: "
            f"{uncompiled[0]}), so every lookup compiles them: run `dsymfind install` as "
            "the owner of the package folder"
        )


def _refuse_environment_only_settings(current: settings.Settings) -> None:
    """lldb runs the helper, and launchd the agent, without the shell's environment."""
    origins = current["origins"]
    if origins.get("cache_dir", "").startswith("environment"):
        raise DsymfindError(
            f"cache_dir comes from ${paths.CACHE_DIR_ENV}, which lldb's helper and the launchd "
            f"agent do not see; set cache_dir in {current['config_file']} instead"
        )
    if os.environ.get(paths.CONFIG_ENV):
        default = paths.config_file({**os.environ, paths.CONFIG_ENV: ""})
        raise DsymfindError(
            f"the config file is chosen by ${paths.CONFIG_ENV}, which lldb's helper does not "
            f"see; put it at {default}"
        )
    if origins.get("servers", "").startswith("environment"):
        print(
            "warning: servers come from $DSYMFIND_SERVERS, which lldb's helper does not see; "
            f"list them in {current['config_file']}",
            file=sys.stderr,
        )


def uninstall(*, dry_run: bool) -> int:
    env = os.environ
    system = System(dry_run=dry_run)
    backup = registration.load_backup(env)
    uuid_tree = backup.get("uuid_tree") or CachePaths(settings.load(env)["cache_dir"]).uuids
    helper_file = backup.get("launcher") or paths.launcher_file(env)
    helper = backup.get("helper") or helper_file
    changes = registration.unregister(system, backup, uuid_tree, helper)
    link = backup.get("link")
    removed_link = isinstance(link, dict) and registration.remove_link(
        system, str(link.get("path")), str(link.get("target")), link.get("previous")
    )
    # After the link: nothing of ours leads to it any more.
    config = backup.get(chaining.BACKUP_KEY)
    restored_config = chaining.restore(system, config) if isinstance(config, dict) else None
    removed_helper = launcher.remove(system, helper_file)
    removed_agents = [
        agent for agent in launch_agent.AGENTS if launch_agent.uninstall(system, env, agent)
    ]
    registration.forget(system, env)
    if not dry_run:
        _report(changes, "DebugSymbols had nothing of dsymfind's")
        if removed_link and isinstance(link, dict):
            print(_link_outcome(link))
        if restored_config:
            print(restored_config)
        if removed_helper:
            print(f"removed {helper_file}")
        for agent in removed_agents:
            print(f"launchd agent removed: {agent.label}")
        print("the cache is left in place; delete it yourself if you want the space back")
    return 0


def _link_outcome(link: dict[str, object]) -> str:
    previous = link.get("previous")
    return f"{link['path']} -> {previous} again" if previous else f"removed {link['path']}"


def _report(changes: list[str], nothing: str) -> None:
    for line in changes or [nothing]:
        print(line)
