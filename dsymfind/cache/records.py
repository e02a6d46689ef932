"""What the cache records about downloads: status records, `<cache>/downloads/<UUIDHEX>.json`,
and the sidecars of partial downloads (written by stores/partial.py).

The downloader rewrites its record as it goes (atomically); waiting helpers read it to
learn the outcome and the progress they report, and `dsymfind status` lists them.
"""

from __future__ import annotations

import os
import time

from dsymfind import atomic
from dsymfind.cache import _json_reader
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

# Helpers waiting for a download read records while it runs: what only the downloader
# (threading, json) or `dsymfind status` (progress) needs loads with them, not here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RUNNING, DONE, NOT_FOUND, FAILED = "running", "done", "not-found", "failed"
TERMINAL = frozenset({DONE, NOT_FOUND, FAILED})
# Rewrite a record at most this often while bytes flow; readers poll about as often.
MIN_WRITE_INTERVAL = 0.1


# A record is a few hundred bytes; anything much larger is not one of ours.
MAX_RECORD_BYTES = 1 << 20


def read(cache: CachePaths, uuid: str) -> dict[str, Any] | None:
    # Regular files only: a FIFO planted as a record must not hang a waiting helper.
    return _read_object(cache.record_file(uuid_hex(uuid)), MAX_RECORD_BYTES)


def _read_object(path: str, limit: int) -> dict[str, Any] | None:
    """The JSON object in the file at `path`; None when it is missing, unreadable or not one."""
    try:
        data = _json_reader.loads(atomic.read_small_file(path, limit))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


class StatusWriter:
    """The record of one download, shared by the threads fetching its candidates."""

    def __init__(self, cache: CachePaths, uuid: str) -> None:
        self.path = cache.record_file(uuid_hex(uuid))
        now = time.time()
        self.record: dict[str, Any] = {
            "uuid": uuid,
            "pid": os.getpid(),
            "state": RUNNING,
            "started": now,
            "updated": now,
            "message": "",
            "transfers": {},
        }
        import threading

        self._lock = threading.Lock()
        self._last_write = 0.0
        self._write(force=True)

    def progress(self, url: str, done: int, total: int | None) -> None:
        with self._lock:
            self.record["transfers"][url] = [done, total]
            # The last bytes are news: waiting helpers then look more often (miss.py).
            self._write(force=total is not None and done >= total)

    def note(self, **fields: Any) -> None:
        """Fields the record carries from its next write on (the servers that refused
        our credentials: `refused`)."""
        with self._lock:
            self.record.update(fields)

    def finish(self, state: str, message: str = "") -> None:
        with self._lock:
            self.record.update(state=state, message=message, finished=time.time())
            self._write(force=True)

    def _write(self, *, force: bool) -> None:
        now = time.time()
        if not force and now - self._last_write < MIN_WRITE_INTERVAL:
            return
        self.record["updated"] = now
        self._last_write = now
        import json

        # No fsync: a record only reports, and one a crash cut short reads as stale.
        data = json.dumps(self.record).encode()
        try:
            try:
                # No makedirs on every write, the first included: the folder is there but
                # in a new cache (or when removed meanwhile), where this write finds it
                # missing.
                atomic.write_into_folder(self.path, data)
            except FileNotFoundError:
                atomic.write_bytes(self.path, data, fsync=False)  # the folder made first
        except OSError:
            pass  # a status that cannot be written must not stop the download


def bytes_done(record: dict[str, Any]) -> tuple[int, int | None]:
    """Progress of the leading transfer: bytes done and the total when known."""
    transfers = record.get("transfers") or {}
    best: tuple[int, int | None] = (0, None)
    for done, total in transfers.values():
        if done >= best[0]:
            best = (done, total)
    return best


def progress_text(done: int, total: int | None, speed: float | None) -> str:
    """`[####....]  42%  3.1 MiB/7.4 MiB  1.2 MiB/s`; the rate only once it is known."""
    from dsymfind.progress import bar, human_size

    return bar(done, total) + (f"  {human_size(speed)}/s" if speed else "")


def rate(record: dict[str, Any]) -> float | None:
    """Average bytes per second since the download started; None before any time passed."""
    elapsed = float(record.get("updated", 0)) - float(record.get("started", 0))
    if elapsed <= 0:
        return None
    return bytes_done(record)[0] / elapsed
