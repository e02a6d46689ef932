"""`dsymfind doctor`: what is wrong with this setup, and the fix for each problem.

Each check gives findings; each problem comes with its fix.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsymfind import debugsymbols, permissions, settings
from dsymfind.errors import ConfigError, DsymfindError
from dsymfind.macos import launch_agent, launcher, registration
from dsymfind.macos.system import System
from dsymfind.paths import CachePaths, home
from dsymfind.progress import human_size

if TYPE_CHECKING:
    from dsymfind.settings import Settings
    from dsymfind.stores.base import Server

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
# A reachable symbol server answers a miss in well under a second; 5 s says it is not.
PROBE_TIMEOUT = 5.0
PROBE_MAX_BYTES = 64 * 1024
# What a store that does not answer a probe is told, unless its kind advises otherwise.
NETWORK_FIX = "check the url, the network and proxies"
# A store that holds nothing answers every lookup "not found", as a mistyped prefix does.
EMPTY_STORE_FIX = "correct the url if it names the wrong place, else publish into it"
# Below this, a large dSYM (hundreds of MB) may not fit.
LOW_DISK_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class Finding:
    level: str
    subject: str
    text: str
    fix: str = ""


DETAILS = "Exit status 0 when everything is in order, 1 when something needs fixing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """doctor takes no options."""


def run(args: argparse.Namespace) -> int:
    return doctor()


def doctor() -> int:
    """Exit 1 when anything failed; warnings alone leave it 0."""
    failed = False
    for finding in examine(os.environ):
        print(f"{finding.level:<5} {finding.subject}: {finding.text}", flush=True)
        if finding.fix and finding.level != OK:
            print(f"      fix: {finding.fix}")
        failed |= finding.level == FAIL
    return 1 if failed else 0


def examine(env: Mapping[str, str]) -> Iterator[Finding]:
    try:
        current = settings.load(env)
    except ConfigError as exc:
        yield Finding(
            FAIL, "config", str(exc), "correct the file; `dsymfind config` shows what is used"
        )
        return
    yield _config(current)
    yield from _cache(current)
    yield _log(current)
    yield from _servers(current, env)
    yield from _source_checkouts(current)
    yield from _system_images(current, env)
    yield from _registration(current, env)


def _config(current: Settings) -> Finding:
    where = current["config_file"]
    origin = "" if os.path.exists(where) else " (absent: defaults in use)"
    return Finding(
        OK,
        "config",
        f"{where}{origin}: {len(current['servers'])} server(s), "
        f"{len(current['search_paths'])} search path(s)",
    )


def _cache(current: Settings) -> Iterator[Finding]:
    folder = current["cache_dir"]
    # The folders above it, the root and its own folders, then every folder inside: the
    # helper and every writer refuse the cache while any of them is unsafe.
    problem = permissions.unsafe(folder)
    if problem is not None:
        unsafe = [problem]
    elif os.path.isdir(folder):
        unsafe = [found for _, found, _ in permissions.folder_problems(folder, limit=6)]
    else:
        unsafe = []
    for what, fix in unsafe[:5]:
        yield Finding(FAIL, "cache", what, fix)
    if len(unsafe) > 5:
        yield Finding(FAIL, "cache", "and more like these", "`dsymfind status` lists them all")
    if unsafe:
        return
    if not os.path.isdir(folder):
        yield Finding(OK, "cache", f"{folder} (created at the first download or index)")
        return
    if not os.access(folder, os.W_OK | os.X_OK):
        yield Finding(FAIL, "cache", f"{folder} is not writable", f"chmod u+rwx {folder}")
        return
    free = shutil.disk_usage(folder).free
    yield Finding(OK, "cache", f"{folder} ({human_size(free)} free)")
    if free < LOW_DISK_BYTES:
        yield Finding(WARN, "disk", f"only {human_size(free)} free", "`dsymfind gc --max-size ...`")


def _source_checkouts(current: Settings) -> Iterator[Finding]:
    """Each clone the sources of builds from CI are checked out of: a git work tree, and
    its remotes (a fetched dSYM's remote must be one of them). Warnings only: sources are
    a bonus, never a reason for a lookup to fail."""
    from dsymfind.vcs import git

    fix = "name a git clone's folder in source_checkouts"
    for clone in current["source_checkouts"]:
        subject = f"source checkout {clone}"
        try:
            top = git.toplevel(clone)
            remotes = git.remotes(top)
        except git.GitError as exc:
            missing = "not installed" in str(exc)
            yield Finding(WARN, subject, str(exc), "install git" if missing else fix)
            continue
        if not remotes:
            yield Finding(WARN, subject, f"{top} has no remote to match a build's", fix)
            continue
        listed = ", ".join(f"{n} {git.redacted_remote(u)}" for n, u in sorted(remotes.items()))
        yield Finding(OK, subject, f"git work tree {top}; remotes: {listed}")


def _system_images(current: Settings, env: Mapping[str, str]) -> Iterator[Finding]:
    """Each DeviceSupport folder and simulator runtime folder on this Mac, and whether
    `dsymfind index` has read its OS builds (the helper answers their images then)."""
    from dsymfind.apple import device_support
    from dsymfind.cache import system_index

    indexed = system_index.indexed_files(CachePaths(current["cache_dir"]))
    for root in device_support.default_roots(home(env)):
        subject = f"system images {root}"
        try:
            builds = device_support.os_builds(root)
        except device_support.DeviceSupportError:
            yield Finding(OK, subject, "no OS build in it")
            continue
        missing = [b.label for b in builds if not _any_under(indexed, b.symbols)]
        if missing:
            text = f"{len(missing)} of {len(builds)} OS builds not indexed: {', '.join(missing)}"
            yield Finding(WARN, subject, text, "`dsymfind index` records their images")
        else:
            yield Finding(OK, subject, f"{len(builds)} OS builds, all indexed")


def _any_under(files: list[str], folder: str) -> bool:
    prefix = folder.rstrip(os.sep) + os.sep
    return any(path.startswith(prefix) for path in files)


def _log(current: Settings) -> Finding:
    log_dir = os.path.dirname(current["log_file"])
    probe = log_dir
    while not os.path.isdir(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.access(probe, os.W_OK | os.X_OK):
        return Finding(FAIL, "log", f"{log_dir} cannot be written", "set log_file in the config")
    return Finding(OK, "log", current["log_file"])


def _servers(current: Settings, env: Mapping[str, str]) -> Iterator[Finding]:
    servers = current["servers"]
    if not servers:
        yield Finding(
            WARN, "servers", "none configured: only local dSYMs are found", "add [[servers]]"
        )
        return
    with ThreadPoolExecutor(max_workers=min(len(servers), 8)) as pool:
        for findings in pool.map(lambda server: _examined(server, env), servers):
            yield from findings
    yield from _backoffs(current)


def _examined(server: Server, env: Mapping[str, str]) -> list[Finding]:
    """The probe's finding; for a store that answered and can be listed, a warning when it
    holds nothing at all (a mistyped prefix answers "not found" as an empty store does)."""
    probed = _probe(server, env)
    surveyed = _survey(server) if probed.level == OK else None
    return [probed] if surveyed is None else [probed, surveyed]


def _survey(server: Server) -> Finding | None:
    from dsymfind import stores
    from dsymfind.stores import base

    look = getattr(stores.kind_for(server["kind"]), "surroundings", None)
    found = None if look is None else look(server["url"], base.Options(settings=server["settings"]))
    if found is None or found.holds_something:
        return None
    text = f"no symbols under {base.redact(server['url'])}"
    if found.neighbours:
        text += f"; one level up, these hold some: {', '.join(found.neighbours)}"
    return Finding(WARN, f"server {server['name']}", text, EMPTY_STORE_FIX)


def _backoffs(current: Settings) -> Iterator[Finding]:
    """Servers that lookups skip for now, having failed: a probe above may say they are back."""
    from dsymfind.fetch import backoff

    how = backoff.asking(on_purpose=True, ignore=False)
    servers = backoff.Backoff(CachePaths(current["cache_dir"]), current, how)
    for server in current["servers"]:
        waiting = servers.waiting(server["url"])
        if waiting is not None:
            yield Finding(
                WARN,
                f"server {server['name']}",
                f"in backoff: lookups skip it for {waiting:.0f} s more after it failed",
                "wait, or run `dsymfind forget --all` to ask it again now",
            )


def _probe(server: Server, env: Mapping[str, str]) -> Finding:
    """Ask for a UUID no server can have: a "not found" in good time is a healthy server."""
    from dsymfind.fetch import fetcher
    from dsymfind.stores import base, layouts, transfer

    subject = f"server {server['name']}"
    limits = base.Limits(total_timeout=PROBE_TIMEOUT, attempts=1, max_bytes=PROBE_MAX_BYTES)
    started = time.monotonic()
    with transfer.Session(limits) as session, tempfile.TemporaryDirectory() as scratch:
        random_uuid = str(uuidlib.uuid4()).upper()
        chosen, skipped = fetcher.candidates(
            [server], random_uuid, layouts.DSYM, env, session, servers_backoff=None
        )
        if not chosen:
            return Finding(
                FAIL, subject, "; ".join(skipped) or "no key", "set the variable it needs"
            )
        probe = chosen[0]
        try:
            got = probe.reader.get(probe.key, os.path.join(scratch, "probe"), base.Terms(limits))
        except (base.NotFound, base.TooLarge) as exc:
            how = str(exc)
        except base.AuthFailed as exc:
            return Finding(FAIL, subject, str(exc), _credentials_fix(server))
        except DsymfindError as exc:
            return Finding(FAIL, subject, str(exc), _failure_fix(server))
        else:
            if got.in_place is not None:  # a chained helper's file, for a UUID nobody has
                text = f"{probe.label} named {got.in_place} for a random UUID"
                return Finding(FAIL, subject, text, _failure_fix(server))
            how = f"{got.size} bytes"
    elapsed = (time.monotonic() - started) * 1000
    where = base.redact(server["url"])
    return Finding(OK, subject, f"{where} answered in {elapsed:.0f} ms ({how})")


def _failure_fix(server: Server) -> str:
    """The fix its kind of store advises for a failure, a network's by default."""
    from dsymfind import stores

    return getattr(stores.kind_for(server["kind"]), "FAILURE_FIX", NETWORK_FIX)


def _credentials_fix(server: Server) -> str:
    """The fix its kind of store advises: an S3 server signs with botocore's credentials,
    an HTTP one sends its headers."""
    from dsymfind import stores

    return stores.kind_for(server["kind"]).CREDENTIALS_FIX


def _registration(current: Settings, env: Mapping[str, str]) -> Iterator[Finding]:
    system = System(dry_run=False)
    if not system.has("defaults"):
        yield Finding(SKIP, "DebugSymbols", "not macOS (no `defaults`): nothing to register")
        return
    try:
        prefs = system.read_debugsymbols()
    except DsymfindError as exc:
        yield Finding(FAIL, "DebugSymbols", str(exc))
        return
    yield _shell_command(prefs.get(debugsymbols.SHELL_COMMANDS))
    tree = CachePaths(current["cache_dir"]).uuids
    if tree in registration.as_list(prefs.get(debugsymbols.FILE_MAPPED_PATHS)):
        yield Finding(OK, debugsymbols.FILE_MAPPED_PATHS, f"holds {tree}")
    else:
        yield Finding(
            WARN,
            debugsymbols.FILE_MAPPED_PATHS,
            f"lacks {tree}: every cached UUID starts the helper",
            "dsymfind install",
        )
    if debugsymbols.SPOTLIGHT_PATHS not in prefs:
        yield Finding(
            WARN,
            debugsymbols.SPOTLIGHT_PATHS,
            "unset: Spotlight finds no dSYMs",
            "dsymfind install",
        )
    yield _helper_link()
    wanted = launch_agent.wanted(env)
    for agent in launch_agent.AGENTS:
        yield _agent(system, env, agent, wanted=agent in wanted)


def _shell_command(value: object) -> Finding:
    subject, fix = debugsymbols.SHELL_COMMANDS, "dsymfind install"
    if value is None:
        return Finding(FAIL, subject, "unset: lldb does not run dsymForUUID", fix)
    if not isinstance(value, str):
        return Finding(FAIL, subject, f"{value!r} is an array, which lldb ignores", fix)
    helper = value.split(" ")[0]
    if not os.access(helper, os.X_OK):
        return Finding(FAIL, subject, f"{value} is not an executable file", fix)
    python = launcher.interpreter_of(helper)  # through a link such as /usr/local/bin/...
    if python is None:
        return _not_a_launcher(value, helper)
    # By folder: python and python3 of one venv are the same installation.
    if os.path.dirname(python) != os.path.dirname(os.path.abspath(sys.executable)):
        return Finding(WARN, subject, f"{value} runs another installation's Python, {python}", fix)
    return Finding(OK, subject, value)


def _not_a_launcher(value: str, helper: str) -> Finding:
    """A helper install did not write: this dsymfind's console script, or someone else's."""
    subject, fix = debugsymbols.SHELL_COMMANDS, "dsymfind install"
    try:
        ours = registration.installed_command("dsymForUUID")
    except DsymfindError as exc:
        return Finding(FAIL, subject, str(exc), "reinstall dsymfind (pipx install ...)")
    if os.path.realpath(helper) != os.path.realpath(ours):
        return Finding(WARN, subject, f"{value} is not this dsymfind's helper", fix)
    return Finding(
        WARN,
        subject,
        f"{value} is the console script, which dies before answering when lldb passes on "
        "a PYTHONHOME or PYTHONPATH; install registers an isolated launcher",
        fix,
    )


def _helper_link() -> Finding:
    link = registration.HELPER_LINK
    if os.access(link, os.X_OK):
        return Finding(OK, link, f"-> {os.path.realpath(link)}")
    return Finding(
        WARN,
        link,
        "absent: crashlog.py and xnu macros use it",
        "dsymfind install --link",
    )


def _agent(
    system: System, env: Mapping[str, str], agent: launch_agent.Agent, *, wanted: bool
) -> Finding:
    subject = f"launchd agent {agent.label}"
    target = launch_agent.target(agent, system)
    if not wanted:
        return Finding(OK, subject, "not wanted (resident_downloader = 0)")
    if not os.path.exists(launch_agent.agent_file(agent, env)):
        return Finding(
            WARN, subject, f"not installed: nothing runs {agent.what}", "dsymfind install"
        )
    if system.run([system.tool("launchctl"), "print", target]).returncode != 0:
        return Finding(WARN, subject, f"{target} is not loaded", "dsymfind install")
    return Finding(OK, subject, f"{target} loaded")
