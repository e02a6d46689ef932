"""The login agent's resident downloader (`dsymForUUID --resident-downloader`, which launchd
runs from login on): real helpers, a real agent process, a real HTTP server on 127.0.0.1.

With the agent running, even the first miss is downloaded by a child the agent forks, with
no downloader spawned; it answers a helper of another installation `stale` and stays; it
waits for a resident that holds the socket, serves a cache made again, and goes on SIGTERM
(what `launchctl bootout` sends) with its socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import GREET_UUID, HELLO_UUID, write_config
from support.processes import (
    BIN,
    children_of,
    run_cli,
    run_helper,
    started_as_downloader,
    wait_for,
)
from support.served import native_tree, url_path

from dsymfind import helper, paths, processes, settings
from dsymfind.fetch import resident
from dsymfind.paths import CachePaths


def _agent_listening(cache_dir: Path) -> bool:
    return resident.listening(resident.socket_path(CachePaths(str(cache_dir))))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer(native_tree(tmp_path / "served")) as server:
        yield server


@pytest.fixture
def configured(served: ss.SymbolServer, config_file: Path) -> ss.SymbolServer:
    write_config(
        config_file, f"timeout = 30\n[[servers]]\nurl = '{served.url}/'\nlayout = 'native'\n"
    )
    return served


class Agents:
    """The agents a test starts, stopped (and reaped) at its end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, resident_setting: str | None = "60") -> subprocess.Popen[bytes]:
        """An agent; `resident_setting`: its $DSYMFIND_RESIDENT_DOWNLOADER, None for none
        (as launchd starts it: the config file decides)."""
        env = {name: value for name, value in os.environ.items() if name != settings.RESIDENT_ENV}
        if resident_setting is not None:
            env[settings.RESIDENT_ENV] = resident_setting
        agent = subprocess.Popen(
            [str(BIN / "dsymForUUID"), *helper.RESIDENT_AGENT_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.started.append(agent)
        return agent


@pytest.fixture
def agents(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agents]:
    # Helpers ask a resident only where one is wanted (the suite turns it off).
    monkeypatch.setenv(settings.RESIDENT_ENV, "60")
    started = Agents()
    try:
        yield started
    finally:
        for agent in started.started:
            for pid in children_of(agent.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            agent.kill()
            agent.communicate(timeout=30)
        for uuid in (HELLO_UUID, GREET_UUID):
            for leftover in started_as_downloader(uuid, str(isolated_home)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(leftover, signal.SIGKILL)


def _serving_agent(
    agents: Agents, cache_dir: Path, resident_setting: str | None = "60"
) -> subprocess.Popen[bytes]:
    agent = agents.start(resident_setting)
    wait_for(lambda: _agent_listening(cache_dir) or agent.poll() is not None)
    assert agent.poll() is None, agent.communicate()
    return agent


def _miss_downloaded_by_a_child_of(
    agent: subprocess.Popen[bytes],
    uuid: str,
    served: ss.SymbolServer,
    home: Path,
    helper_command: Sequence[str] = (str(BIN / "dsymForUUID"),),
) -> None:
    """A helper's miss of `uuid`, its download held until checked to run in a child the
    agent forked, with no downloader spawned; the helper's answer names the dSYM."""
    # The child of an earlier miss may still be exiting on a loaded machine.
    wait_for(lambda: children_of(agent.pid) == [])
    gate = threading.Event()

    def held(exchange: ss.Exchange) -> None:
        gate.wait(30)
        ss.serve_root(exchange)

    served.route(url_path(uuid), held)
    asking = subprocess.Popen(
        [*helper_command, uuid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: served.count(url_path(uuid)) > 0)
        assert len(children_of(agent.pid)) == 1
        assert started_as_downloader(uuid, str(home)) == []
    finally:
        gate.set()
        out, err = asking.communicate(timeout=60)
    assert err == b"" and asking.returncode == 0
    assert b"DBGDSYMPath" in out and uuid.encode() in out


def test_the_first_miss_is_downloaded_by_a_child_of_the_agent(
    agents: Agents, configured: ss.SymbolServer, cache_dir: Path, isolated_home: Path
) -> None:
    agent = _serving_agent(agents, cache_dir)
    _miss_downloaded_by_a_child_of(agent, HELLO_UUID, configured, isolated_home)
    _miss_downloaded_by_a_child_of(agent, GREET_UUID, configured, isolated_home)
    assert agent.poll() is None
    # Nothing forked a resident of its own beside the agent.
    assert started_as_downloader(HELLO_UUID, str(isolated_home)) == []


def test_a_helper_of_another_installation_is_answered_stale_and_the_agent_stays(
    agents: Agents, configured: ss.SymbolServer, cache_dir: Path, isolated_home: Path
) -> None:
    agent = _serving_agent(agents, cache_dir)
    # This test's interpreter imports from other folders than the installed helper: what a
    # helper of another installation sends. It gets no download (a spawned one instead).
    words = processes.downloader_words(
        HELLO_UUID, ignore_negative_cache=False, copy_executable=False, answer_by=time.time()
    )
    assert resident.ask(CachePaths(str(cache_dir)), words, timeout=30) is None
    assert agent.poll() is None and _agent_listening(cache_dir)
    _miss_downloaded_by_a_child_of(agent, GREET_UUID, configured, isolated_home)


def test_sigterm_ends_the_agent_and_removes_its_socket(
    agents: Agents, configured: ss.SymbolServer, cache_dir: Path
) -> None:
    agent = _serving_agent(agents, cache_dir)
    agent.send_signal(signal.SIGTERM)
    out, err = agent.communicate(timeout=30)
    assert (agent.returncode, out, err) == (0, b"", b"")
    assert not os.path.lexists(resident.socket_path(CachePaths(str(cache_dir))))


def test_an_agent_turned_off_exits_at_once_and_cleanly(
    agents: Agents, configured: ss.SymbolServer, cache_dir: Path
) -> None:
    agent = agents.start(resident_setting="0")
    out, err = agent.communicate(timeout=60)
    assert (agent.returncode, out, err) == (0, b"", b"")
    assert not os.path.lexists(resident.socket_path(CachePaths(str(cache_dir))))


def test_an_unreadable_config_makes_the_agent_exit_for_launchd_to_retry(
    agents: Agents, config_file: Path, cache_dir: Path
) -> None:
    write_config(config_file, "timeout = 'soon'\n")
    agent = agents.start()
    agent.communicate(timeout=60)
    assert agent.returncode == 1
    assert not os.path.lexists(resident.socket_path(CachePaths(str(cache_dir))))


def test_the_agent_waits_for_a_resident_holding_the_socket_then_takes_it(
    agents: Agents,
    configured: ss.SymbolServer,
    cache_dir: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A miss before the agent started: its downloader forks a resident idle for 3 s.
    monkeypatch.setenv(settings.RESIDENT_ENV, "3")
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)
    wait_for(lambda: len(started_as_downloader(HELLO_UUID, str(isolated_home))) == 1)
    (forked,) = started_as_downloader(HELLO_UUID, str(isolated_home))
    agent = agents.start()
    wait_for(lambda: started_as_downloader(HELLO_UUID, str(isolated_home)) == [])
    wait_for(lambda: _agent_listening(cache_dir))
    assert agent.poll() is None
    _miss_downloaded_by_a_child_of(agent, GREET_UUID, configured, isolated_home)
    assert forked not in children_of(agent.pid)


def test_the_agent_serves_a_cache_made_again(
    agents: Agents, configured: ss.SymbolServer, cache_dir: Path, isolated_home: Path
) -> None:
    agent = _serving_agent(agents, cache_dir)
    shutil.rmtree(cache_dir)
    wait_for(lambda: _agent_listening(cache_dir))
    _miss_downloaded_by_a_child_of(agent, HELLO_UUID, configured, isolated_home)


def test_the_installed_agent_run_as_launchd_runs_it_serves_the_installed_helper(
    agents: Agents,
    configured: ss.SymbolServer,
    cache_dir: Path,
    isolated_home: Path,
    macos: Path,
) -> None:
    """What `dsymfind install` loads, started as launchd starts it (its ProgramArguments, an
    environment of HOME and PATH only), serves the first miss of the launcher DebugSymbols
    runs: both run the same interpreter on the same import folders, so their stamps agree."""
    done = run_cli("install")
    assert done.returncode == 0, done.stderr
    state = json.loads((macos / "launchd.json").read_text())
    program = state[f"gui/{os.getuid()}/org.dsymfind.resident"]["ProgramArguments"]
    agent = subprocess.Popen(
        program,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"HOME": str(isolated_home), "PATH": "/usr/bin:/bin"},
        cwd="/",
    )
    agents.started.append(agent)
    wait_for(lambda: _agent_listening(cache_dir) or agent.poll() is not None)
    assert agent.poll() is None, agent.communicate()
    launcher = paths.launcher_file(os.environ)
    _miss_downloaded_by_a_child_of(agent, HELLO_UUID, configured, isolated_home, [launcher])


def test_status_names_the_resident_listening_and_none_once_it_went(
    agents: Agents, configured: ss.SymbolServer, cache_dir: Path
) -> None:
    agent = _serving_agent(agents, cache_dir)
    done = run_cli("status", "--json")
    assert done.returncode == 0, done.stderr
    listening = json.loads(done.stdout)["resident_downloader"]
    assert listening == {
        "socket": resident.socket_path(CachePaths(str(cache_dir))),
        "pid": agent.pid,
    }
    assert f"resident downloader: pid {agent.pid} on " in run_cli("status").stdout
    agent.send_signal(signal.SIGTERM)
    agent.communicate(timeout=30)
    assert json.loads(run_cli("status", "--json").stdout)["resident_downloader"] is None
    assert "resident downloader: none listening" in run_cli("status").stdout


def test_the_agent_follows_its_config_to_another_cache_and_out(
    agents: Agents, configured: ss.SymbolServer, config_file: Path, tmp_path: Path
) -> None:
    """The agent reads the config file, not the shell's environment: a cache_dir changed
    there moves it, and resident_downloader = 0 there ends it, cleanly (launchd leaves a
    clean exit be)."""
    first = tmp_path / "first-cache"
    second = tmp_path / "second-cache"
    server = f"[[servers]]\nurl = '{configured.url}/'\nlayout = 'native'\n"
    write_config(config_file, f"cache_dir = '{first}'\ntimeout = 30\n{server}")
    agent = _serving_agent(agents, first, resident_setting=None)
    write_config(config_file, f"cache_dir = '{second}'\ntimeout = 30\n{server}")
    wait_for(lambda: _agent_listening(second))
    assert not os.path.lexists(resident.socket_path(CachePaths(str(first))))
    write_config(
        config_file, f"cache_dir = '{second}'\nresident_downloader = 0\ntimeout = 30\n{server}"
    )
    out, err = agent.communicate(timeout=60)
    assert (agent.returncode, out, err) == (0, b"", b"")
    assert not os.path.lexists(resident.socket_path(CachePaths(str(second))))
