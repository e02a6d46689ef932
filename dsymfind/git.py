"""git, the one program a store's metadata can lead dsymfind to run, and how it is run.

Always `git -C <repository> ...` on a folder the user named (a clone in `source_checkouts`,
the repository `publish` runs in) or one the cache made; a value that came from a store
is checked first (a commit is 40 hex digits, see `is_commit`), stands after `--` where
git reads paths or revisions, and is never an option. git never prompts (no terminal, no
askpass), and every run ends by its timeout, which the caller takes from its own deadline.
Remote URLs are compared normalised and shown without credentials.
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.parse
from collections.abc import Mapping

from dsymfind.errors import DsymfindError

# `rev-parse` and `status` answer at once; a wedged repository (a network mount) must not
# stall a CI step or a download.
QUICK_TIMEOUT = 10.0
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
        raise GitTimeout(f"no time left for git {args[0]}")
    try:
        done = subprocess.run(
            ["git", "-C", repository, *args],
            capture_output=True,
            text=True,
            errors="surrogateescape",
            stdin=subprocess.DEVNULL,
            env=_quiet_environment(env),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitTimeout(
            f"git {args[0]} in {repository} took longer than {timeout:.0f} s"
        ) from None
    except OSError as exc:
        raise GitError(f"cannot run git: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise GitError(f"git {args[0]} in {repository}: {lines[-1]}")
    return done.stdout


def _quiet_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """No prompt for credentials (a downloader has no terminal, CI no one to answer), and
    messages in English, as they are quoted."""
    env = {**os.environ, **(extra or {})}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "LC_ALL": "C"})
    return env


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
