"""One manifest per publishing run: what it published, from where, on which machine, at
which commit. Written last, under `_manifests/<UTC time>-<random>.json`, so a reader that
finds a manifest finds every object it lists."""

from __future__ import annotations

import datetime
import json
import os
import secrets
import socket
import subprocess

MANIFEST_FOLDER = "_manifests"
FORMAT = 1
# `git rev-parse` answers at once; a wedged repository (a network mount) must not stall CI.
GIT_TIMEOUT = 10.0


def manifest_key(now: datetime.datetime | None = None) -> str:
    """Sorted by time when listed; the random part keeps two runs in one second apart."""
    moment = now or datetime.datetime.now(datetime.UTC)
    return f"{MANIFEST_FOLDER}/{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}.json"


def build(inputs: list[str], objects: list[dict[str, object]]) -> bytes:
    """The manifest's bytes: inputs with their git commits, and every object with its state."""
    commits: dict[str, str | None] = {}
    described = []
    for path in inputs:
        folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
        if folder not in commits:
            commits[folder] = git_commit(folder)
        described.append({"path": path, "git_commit": commits[folder]})
    document = {
        "format": FORMAT,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "inputs": described,
        "objects": objects,
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def git_commit(folder: str) -> str | None:
    """HEAD of the git repository holding `folder`; None without git or a repository."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None
