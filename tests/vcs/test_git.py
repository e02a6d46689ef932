"""How dsymfind runs git, for real: a fetch over ssh from a host that accepts and never
answers ends at its deadline with every process it started, ssh runs in batch mode with
the user's own command kept, nothing ever prompts, and variables a hook sets do not point
git at another repository."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support import git_builds

from dsymfind.vcs import git

needs_ssh = pytest.mark.skipif(
    shutil.which("ssh") is None, reason="no ssh client (scripts/bootstrap installs it)"
)

# A fetch that no host answers is given this long; generous beside ssh's start-up.
FETCH_DEADLINE = 5.0
# How many times /proc is looked at, 0.1 s apart, for the ssh to appear or be gone.
PROC_LOOKS = 300
# An ssh told to wait this long for a greeting outlives the test unless it is killed.
LONGER_THAN_THE_TEST = 3600


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    git_builds.git(tmp_path, "init", "-q", str(repo))
    return repo


def fetching_in_thread(repo: Path, url: str) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def fetch() -> None:
        try:
            git.fetch_commit(
                str(repo), url, "0" * 40, timeout=FETCH_DEADLINE, settings_from=str(repo)
            )
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=fetch)
    thread.start()
    return thread, raised


def first_ssh(port: int) -> dict[int, list[str]]:
    for _ in range(PROC_LOOKS):
        found = git_builds.ssh_processes(port)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no ssh to port {port} appeared")


def no_ssh_left(port: int) -> dict[int, list[str]]:
    """The ssh processes still alive once their kill had every chance to land."""
    for _ in range(PROC_LOOKS):
        left = git_builds.ssh_processes(port)
        if not left:
            return left
        time.sleep(0.1)
    return left


@needs_ssh
def test_a_fetch_from_a_silent_ssh_host_ends_at_its_deadline_with_its_ssh(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to return at the deadline with ssh still running, re-parented to init. The
    user's own ConnectTimeout wins over ours: only the kill at the deadline ends this ssh."""
    monkeypatch.setenv("GIT_SSH_COMMAND", f"ssh -o ConnectTimeout={LONGER_THAN_THE_TEST}")
    with git_builds.SilentHost() as host:
        thread, raised = fetching_in_thread(repository, host.url())
        ssh = first_ssh(host.port)
        thread.join(timeout=FETCH_DEADLINE + 60)
        assert not thread.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], git.GitTimeout), raised
        assert no_ssh_left(host.port) == {}, ssh


@needs_ssh
def test_ssh_runs_in_batch_mode_after_the_users_own_options(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -o ServerAliveInterval=7")
    with git_builds.SilentHost() as host:
        thread, _ = fetching_in_thread(repository, host.url())
        ((_pid, argv),) = first_ssh(host.port).items()
        thread.join(timeout=FETCH_DEADLINE + 60)
    options = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "-o"]
    assert options[:3] == [
        "ServerAliveInterval=7",
        "BatchMode=yes",
        f"ConnectTimeout={git.SSH_CONNECT_TIMEOUT}",
    ], argv


def test_the_clones_core_ssh_command_is_kept_and_made_batch(repository: Path) -> None:
    git_builds.git(repository, "config", "core.sshCommand", "ssh -i '/keys/deploy key'")
    command = git.ssh_command(str(repository), timeout=git.QUICK_TIMEOUT)
    assert command == (
        f"ssh -i '/keys/deploy key' -o BatchMode=yes -o ConnectTimeout={git.SSH_CONNECT_TIMEOUT}"
    )


@pytest.mark.parametrize(
    ("command", "program", "expected"),
    [
        (None, None, "ssh -o BatchMode=yes -o ConnectTimeout={t}"),
        (None, "/opt/ssh tools/ssh", "'/opt/ssh tools/ssh' -o BatchMode=yes -o ConnectTimeout={t}"),
        ("/usr/bin/ssh -4", None, "/usr/bin/ssh -4 -o BatchMode=yes -o ConnectTimeout={t}"),
        ("plink -batch", None, None),  # not OpenSSH: its options are left alone
        (None, "/usr/bin/plink", None),
        ("ssh 'unbalanced", None, None),
    ],
)
def test_batch_options_go_to_openssh_only(
    command: str | None, program: str | None, expected: str | None
) -> None:
    wanted = None if expected is None else expected.format(t=git.SSH_CONNECT_TIMEOUT)
    assert git.batch_ssh_command(command, program) == wanted


class _AskingForAPassword(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="team"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def password_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AskingForAPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/team/app.git"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_asking_for_a_password_gets_no_prompt_and_fails(
    repository: Path, password_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every askpass a user may have set (git's, core.askPass, ssh's) would be run to ask."""
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f'#!/bin/sh\necho "$*" >> {asked}\necho secret\n')
    askpass.chmod(0o755)
    for variable in ("GIT_ASKPASS", "SSH_ASKPASS"):
        monkeypatch.setenv(variable, str(askpass))
    git_builds.git(repository, "config", "core.askPass", str(askpass))
    with pytest.raises(git.GitError) as failed:
        git.fetch_commit(
            str(repository), password_server, "0" * 40, timeout=60, settings_from=str(repository)
        )
    assert not isinstance(failed.value, git.GitTimeout)
    assert not asked.exists(), asked.read_text()


def test_a_hooks_git_dir_does_not_point_git_elsewhere(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook or `git rebase --exec` running dsymfind sets GIT_DIR and GIT_INDEX_FILE."""
    other = tmp_path / "other"
    git_builds.git(tmp_path, "init", "-q", str(other))
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert git.toplevel(str(repository)) == os.path.realpath(repository)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("../origin.git", "/home/me/src/origin.git"),
        ("origin", "/home/me/src/app/origin"),
        ("/srv/git/app.git", "/srv/git/app.git"),
        ("git@github.com:team/app.git", "git@github.com:team/app.git"),
        ("https://github.com/team/app", "https://github.com/team/app"),
        ("file:///srv/app.git", "file:///srv/app.git"),
    ],
)
def test_a_relative_remote_is_read_from_its_clone(url: str, expected: str) -> None:
    assert git.fetchable_url(url, "/home/me/src/app") == expected
