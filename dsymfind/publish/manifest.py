"""One manifest per publishing run: what it published, from where, on which machine, at
which commit, and where each DWARF file's build was made (vcs/provenance.py). Written last,
under `_manifests/<UTC time>-<random>.json`, so a reader that finds a manifest finds every
object it lists."""

from __future__ import annotations

import datetime
import json
import os
import secrets
import socket

from dsymfind.stores.base import MANIFEST_FOLDER
from dsymfind.vcs import git

FORMAT = 1


def manifest_key(now: datetime.datetime | None = None) -> str:
    """Sorted by time when listed; the random part keeps two runs in one second apart."""
    moment = now or datetime.datetime.now(datetime.UTC)
    return f"{MANIFEST_FOLDER}/{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}.json"


def build(
    inputs: list[str],
    objects: list[dict[str, object]],
    sources: list[dict[str, object]] | None = None,
) -> bytes:
    """The manifest's bytes: inputs with their git commits, every object with its state, and
    the source records of the DWARF files."""
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
        "sources": sources or [],
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def git_commit(folder: str) -> str | None:
    """HEAD of the git repository holding `folder`; None without git or a repository."""
    try:
        return git.head(folder)
    except git.GitError:
        return None
