"""Writable copies of a DeviceSupport tree built once per module (tests damage them), and
the cache's view of what `dsymfind index` recorded of one."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from dsymfind.cache import systems
from dsymfind.paths import CachePaths
from support.device_support import DeviceSupportTree


def copied(built: DeviceSupportTree, parent: Path) -> DeviceSupportTree:
    """The tree copied under `parent` (links kept as links), its libraries' paths moved."""
    root = parent / built.root.name
    shutil.copytree(built.root, root, symlinks=True)
    libraries = [
        dataclasses.replace(lib, path=root / lib.path.relative_to(built.root))
        for lib in built.libraries
    ]
    return dataclasses.replace(
        built, root=root, build_dir=root / built.build_dir.name, libraries=libraries
    )


def recorded(cache_dir: Path) -> dict[str, systems.SystemImage]:
    """Every record in the cache's systems/ folder, by UUID."""
    cache = CachePaths(str(cache_dir))
    found = (systems.recorded(cache, name) for name in systems.names(cache))
    return {image.uuid: image for image in found if image is not None}
