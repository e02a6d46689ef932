"""The per-UUID download lock: an flock on `<cache>/locks/<UUIDHEX>.lock`.

Free again the instant its holder dies, so a killed downloader blocks nobody. Lock
files are never deleted: deleting one would let two processes hold "the" lock at once.
A module of its own so the helper can probe the lock without loading the downloader.
"""

from __future__ import annotations

import os

import filelock

from dsymfind import paths
from dsymfind.uuids import uuid_hex


def download_lock(layout: paths.CacheLayout, uuid: str) -> filelock.BaseFileLock:
    os.makedirs(layout.locks, mode=0o700, exist_ok=True)
    return filelock.FileLock(layout.lock_file(uuid_hex(uuid)))


def is_held(layout: paths.CacheLayout, uuid: str) -> bool:
    """Whether a download of `uuid` is under way somewhere, without waiting for it."""
    lock = download_lock(layout, uuid)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        return True
    lock.release()
    return False
