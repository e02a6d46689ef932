"""Writable copies of a DeviceSupport tree built once per module (tests damage them), and
the cache's view of what `dsymfind index` recorded of one."""

from __future__ import annotations

from pathlib import Path

from dsymfind.cache import systems
from dsymfind.paths import CachePaths
from support.device_support import copied as copied


def recorded(cache_dir: Path) -> dict[str, systems.SystemImage]:
    """Every record in the cache's systems/ folder, by UUID."""
    cache = CachePaths(str(cache_dir))
    found = (systems.recorded(cache, name) for name in systems.names(cache))
    return {image.uuid: image for image in found if image is not None}
