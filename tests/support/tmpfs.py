"""A tiny tmpfs, for what a full disk does: mounting needs root (CI runs as root)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_file_system(mount_point: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: "256k") at `mount_point`; skips the test when
    this machine cannot mount one."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; CI runs as root")
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
