"""git, the one program a store's metadata can lead dsymfind to run, and how it is run.

Always `git -C <repository> ...` on a folder the user named (a clone in `source_checkouts`,
the repository `publish` runs in) or one the cache made; a value that came from a store
is checked first (a commit is 40 hex digits, see `is_commit`), stands after `--` where
git reads paths or revisions, and is never an option. git never prompts (no terminal, no
askpass, ssh in batch mode), and every run ends by its timeout, which the caller takes
from its own deadline: git runs in a session of its own, and at the deadline that whole
process group is killed, with everything git started (ssh, a credential helper).
Remote URLs are compared normalised and shown without credentials.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator, Mapping

from dsymfind import processes
from dsymfind.errors import DsymfindError

# `rev-parse` and `status` answer at once; a wedged repository (a network mount) must not
# stall a CI step or a download.
QUICK_TIMEOUT = 10.0
# Once its group is killed, git's pipes close at once; a process that left the group (a
# daemon it started) may hold them open, and is not waited for longer than this.
REAP_TIMEOUT = 2.0
# A host that has not finished ssh's greeting by then is down, for a fetch of one commit;
# the deadline's kill bounds a shorter wait anyway.
SSH_CONNECT_TIMEOUT = 15
# ssh never asks (a passphrase, a password, an unknown host key): it fails instead.
SSH_BATCH_OPTIONS = ("-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT}")
# The ssh programs that take those options; another (plink, a wrapper) is left as it is.
_OPENSSH_NAMES = frozenset({"ssh", "ssh.exe"})
# Variables that point git at another repository, index or object store (a hook or
# `git rebase --exec` running dsymfind sets them): `git -C` must mean that folder alone.
# `git rev-parse --local-env-vars` lists them.
_REPOSITORY_VARIABLES = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_CONFIG",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_PARAMETERS",
        "GIT_DIR",
        "GIT_GRAFT_FILE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_OBJECT_DIRECTORY",
        "GIT_PREFIX",
        "GIT_REPLACE_REF_BASE",
        "GIT_SHALLOW_FILE",
        "GIT_WORK_TREE",
    }
)
# No prompt from anything git runs: its own (terminal, askpass), ssh's askpass, Git
# Credential Manager's windows. Reads take no optional lock (`git status` would otherwise
# refresh a clone's index). Messages in English, as they are quoted.
_QUIET = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "SSH_ASKPASS_REQUIRE": "never",
    "GCM_INTERACTIVE": "never",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}
_COMMIT = re.compile(r"[0-9a-f]{40}")
# scp-like syntax, as git reads it: `[user@]host:path`, no slash before the colon.
_SCP_LIKE = re.compile(r"(?:[^@/]+@)?([^/:]+):(.*)")
# Schemes whose user name may be a token (https://TOKEN@host/...): never recorded.
_TOKEN_SCHEMES = frozenset({"http", "https", "ftp", "ftps"})


class GitError(DsymfindError):
    """git is missing, timed out or refused; the message says which and why."""


class GitTimeout(GitError):
    """git did not finish in the time it was given."""


def run(
    repository: str,
    *args: str,
    timeout: float = QUICK_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> str:
    """git's standard output for `git -C repository ARGS`; GitError when it fails."""
    if timeout <= 0:
        raise GitTimeout(f"no time left for git {_verb(args)}")
    try:
        child = subprocess.Popen(
            ["git", "-C", repository, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="surrogateescape",
            env=quiet_environment(env),
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH)") from None
    except OSError as exc:
        raise GitError(f"cannot run git: {exc.strerror or exc}") from None
    with _tracked(child):
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except BaseException as exc:
            _end(child)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise GitTimeout(
                    f"git {_verb(args)} in {repository} took longer than {timeout:.0f} s"
                ) from None
            raise
    if child.returncode != 0:
        lines = stderr.strip().splitlines() or [f"exit status {child.returncode}"]
        raise GitError(f"git {_verb(args)} in {repository}: {lines[-1]}")
    return stdout


def _verb(args: tuple[str, ...]) -> str:
    """The command of a git run, past its `-c NAME=VALUE` options."""
    words = list(args)
    while len(words) > 2 and words[0] == "-c":
        del words[:2]
    return words[0] if words else "(nothing)"


# The process groups of the git runs under way in this process, for `end_all`.
_RUNNING: set[subprocess.Popen[str]] = set()
_RUNNING_GUARD = threading.Lock()


@contextlib.contextmanager
def _tracked(child: subprocess.Popen[str]) -> Iterator[None]:
    with _RUNNING_GUARD:
        _RUNNING.add(child)
    try:
        yield
    finally:
        with _RUNNING_GUARD:
            _RUNNING.discard(child)


def _end(child: subprocess.Popen[str]) -> None:
    """Kill git's whole process group (its leader not reaped yet, so the group id is still
    its own), then reap it without waiting on a pipe a stray daemon may hold."""
    processes.kill_group(child.pid)
    try:
        child.communicate(timeout=REAP_TIMEOUT)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        child.wait()


def end_all() -> None:
    """Kill every git run under way in this process, with all it started: for a process
    about to end without waiting for the threads that run them (Ctrl-C in `fetch`)."""
    with _RUNNING_GUARD:
        running = list(_RUNNING)
    for child in running:
        processes.kill_group(child.pid)


def quiet_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git run: this process's, without variables that point git
    elsewhere, plus `extra`, with every prompt turned off."""
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARIABLES}
    env.update(extra or {})
    env.update(_QUIET)
    return env


def fetch_commit(
    repository: str, url: str, commit: str, *, timeout: float, settings_from: str
) -> None:
    """Fetch one commit from `url` into `repository`: no ref, no `FETCH_HEAD`, no tags, no
    gc or maintenance afterwards (a detached gc would outlive the deadline). ssh is the one
    `settings_from` (the user's clone) would run, in batch mode."""
    ssh = ssh_command(settings_from, timeout=min(timeout, QUICK_TIMEOUT))
    run(repository, "-c", "gc.auto=0", "-c", "maintenance.auto=false", "fetch", "--quiet",
        "--no-tags", "--no-write-fetch-head", "--", url, commit, timeout=timeout,
        env=None if ssh is None else {"GIT_SSH_COMMAND": ssh})  # fmt: skip


def ssh_command(repository: str, *, timeout: float) -> str | None:
    """The ssh command git would run for `repository` (`GIT_SSH_COMMAND`, its
    `core.sshCommand`, the program `GIT_SSH`, else `ssh`), in batch mode; None when that
    is not OpenSSH's."""
    command = os.environ.get("GIT_SSH_COMMAND") or config_value(
        repository, "core.sshCommand", timeout=timeout
    )
    return batch_ssh_command(command, os.environ.get("GIT_SSH") or None)


def config_value(repository: str, key: str, *, timeout: float = QUICK_TIMEOUT) -> str | None:
    """One configuration value as git reads it there (every scope); None when unset."""
    try:
        value = run(repository, "config", "--get", key, timeout=timeout).strip()
    except GitTimeout:
        raise
    except GitError:
        return None  # unset (exit status 1)
    return value or None


def batch_ssh_command(command: str | None, program: str | None) -> str | None:
    """`command` (else the program, else `ssh`) with SSH_BATCH_OPTIONS appended, so that
    every option the user gave still comes first and wins (ssh takes an option's first
    value); None, to leave git's choice alone, when the program is not OpenSSH's, whose
    options another (plink, a wrapper) may not take."""
    if command is None:
        command = shlex.quote(program) if program is not None else "ssh"
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or os.path.basename(words[0]) not in _OPENSSH_NAMES:
        return None
    return f"{command} {shlex.join(SSH_BATCH_OPTIONS)}"


def is_commit(value: object) -> bool:
    """Whether `value` is a full commit id: the only form a store's commit is used in."""
    return isinstance(value, str) and _COMMIT.fullmatch(value) is not None


def toplevel(folder: str, *, timeout: float = QUICK_TIMEOUT) -> str:
    """The top folder of the work tree holding `folder`."""
    return run(folder, "rev-parse", "--show-toplevel", timeout=timeout).strip()


def head(repository: str, *, timeout: float = QUICK_TIMEOUT) -> str:
    """The commit checked out; GitError when there is none (an unborn branch)."""
    commit = run(repository, "rev-parse", "--verify", "HEAD^{commit}", timeout=timeout).strip()
    if not is_commit(commit):
        raise GitError(f"{repository}: HEAD is {commit!r}, not a commit id")
    return commit


def tracked_changes(repository: str, *, timeout: float = QUICK_TIMEOUT) -> bool:
    """Whether tracked files differ from HEAD (untracked files, build products, do not count)."""
    return bool(run(repository, "status", "--porcelain", "--untracked-files=no", timeout=timeout))


def remotes(repository: str, *, timeout: float = QUICK_TIMEOUT) -> dict[str, str]:
    """Each remote's name and fetch URL."""
    found = {}
    for line in run(repository, "remote", "-v", timeout=timeout).splitlines():
        name, _, rest = line.partition("\t")
        url, _, role = rest.rpartition(" ")
        if role == "(fetch)":
            found[name] = url
    return found


def normalised_remote(url: str) -> str:
    """One spelling for every URL of one repository: host and path, without scheme, user,
    password, port or `.git` (https://github.com/o/app.git, git@github.com:o/app and
    ssh://git@github.com/o/app are all `github.com/o/app`); a local path made absolute."""
    url = url.strip()
    if "://" in url:
        parts = urllib.parse.urlsplit(url)
        host = "" if parts.scheme == "file" else (parts.hostname or "")
        path = urllib.parse.unquote(parts.path)
    elif (scp := _SCP_LIKE.fullmatch(url)) is not None and not url.startswith("/"):
        host, path = scp.group(1), scp.group(2)
    else:
        host, path = "", url
    path = path.rstrip("/").removesuffix(".git").rstrip("/")
    if not host:
        return os.path.normpath(os.path.abspath(path))
    return f"{host.lower()}/{path.lstrip('/')}"


def fetchable_url(url: str, base: str) -> str:
    """A remote URL as git in `base` reads it, usable from any folder: a relative local
    path made absolute from `base` (git reads it from the repository it runs in)."""
    if "://" in url or url.startswith("/") or _SCP_LIKE.fullmatch(url) is not None:
        return url
    return os.path.normpath(os.path.join(base, url))


def redacted_remote(url: str) -> str:
    """A remote URL fit to record and show: no password anywhere, no user name where one
    may be a token (http, https), no query or fragment."""
    if "://" not in url:
        return url  # a path, or scp-like `git@host:path`, whose user is no secret
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    user = "" if parts.scheme in _TOKEN_SCHEMES or not parts.username else f"{parts.username}@"
    return urllib.parse.urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))
