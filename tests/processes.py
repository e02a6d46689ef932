"""Finding the detached downloaders (not our children): for tests and scripts/bench."""

from __future__ import annotations

import os
from pathlib import Path


def downloader_pids(uuid: str) -> list[int]:
    """Downloaders at work on `uuid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            words = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"_download" in words and uuid.encode() in words:
            found.append(int(entry))
    return found
