"""The incremental state of `dsymfind index`, shared by its two kinds of input: dSYM
bundles (cache/index.py) and system images (cache/system_index.py). Each keeps a marshal
file in `index/` of records by path; a run replaces the records of the folders it walked.
Light on imports: an index of system images alone loads nothing of the bundle index."""

from __future__ import annotations

import os
from typing import Any

from dsymfind import atomic


def under_any(path: str, roots: list[str]) -> bool:
    """Whether `path` is one of `roots` or lies below one."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def save_state(
    path: str,
    state_format: int,
    key: str,
    old: dict[str, Any],
    fresh: dict[str, Any],
    walked: list[str],
) -> None:
    """This run's records (`fresh`), and the old ones outside the folders walked."""
    kept = {p: r for p, r in old.items() if not under_any(p, walked)}
    kept.update(fresh)
    if kept == old:
        return  # an unchanged tree: nothing to write
    atomic.write_marshal(path, {"format": state_format, key: kept})


def load_state(path: str, state_format: int, key: str) -> dict[str, Any]:
    """The records under `key` of an index state file of `state_format`; {} for a missing,
    damaged or other file (everything is read again)."""
    data = atomic.read_marshal(path)
    try:
        records = data[key]
        if data["format"] == state_format and isinstance(records, dict):
            return records
    except (TypeError, KeyError):
        pass
    return {}
