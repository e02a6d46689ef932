"""The negative cache's markers as tests see them: the one the current configuration reads
(under its store settings' fingerprint), and every one on disk."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dsymfind import settings
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex


def negative_marker(
    cache_dir: Path,
    uuid: str,
    *,
    executable: bool = False,
    env: Mapping[str, str] | None = None,
) -> Path:
    """Where the configuration of `env` (by default this process's environment) looks."""
    fingerprint = settings.load(os.environ if env is None else env)["stores_fingerprint"]
    cache = CachePaths(str(cache_dir))
    return Path(cache.negative_marker(fingerprint, uuid_hex(uuid), executable=executable))


def remember_absent(cache_dir: Path, uuid: str, env: Mapping[str, str] | None = None) -> Path:
    """A fresh, empty negative entry for `uuid`, as the configuration of `env` reads it."""
    marker = negative_marker(cache_dir, uuid, env=env)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return marker


def negative_markers(cache_dir: Path) -> list[Path]:
    """Every file under the cache's negative/, whatever settings or version wrote it."""
    folder = cache_dir / "negative"
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.exists() else []
