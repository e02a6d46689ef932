"""Progress for people: live bars on a terminal, plain final lines anywhere else; and the
one way every message spells a size (`human_size`: binary units, KiB, MiB, GiB).

Used by the admin commands that take long (fetch, prefetch, index). Output goes to
stderr so that stdout stays the command's result, as in curl and pip.
"""

from __future__ import annotations

import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs an import the helper's miss path need not pay
    from typing import TextIO

# Redraw at most this often; a terminal cannot show more and it costs the fetch nothing.
REDRAW_INTERVAL = 0.1
BAR_WIDTH = 24
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_size(size: float) -> str:
    """`512 B`, `3.1 MiB`, `120.4 GiB`: 1024-based, named so (never a decimal MB beside a
    binary one). Every size a message shows goes through here."""
    for unit in _UNITS:
        if abs(size) < 1024 or unit == _UNITS[-1]:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def bar(done: int, total: int | None) -> str:
    """`[#######.....]  42%  3.1 MiB/7.4 MiB`, or the bytes alone when the total is unknown."""
    if not total:
        return human_size(done)
    fraction = min(max(done / total, 0.0), 1.0)
    filled = round(fraction * BAR_WIDTH)
    return (
        f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%}"
        f"  {human_size(done)}/{human_size(total)}"
    )


class Progress:
    """Named live lines (one per task) under the finished lines, redrawn in place on a TTY.

    Without a terminal, `update` prints nothing and `finish` prints the task's final line,
    so logs and pipes get one line per task.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = _is_terminal(self.stream)
        self._lines: dict[str, str] = {}
        self._drawn = 0
        self._last_draw = 0.0
        self._lock = threading.Lock()

    def update(self, key: str, text: str) -> None:
        with self._lock:
            self._lines[key] = text
            if self.live and time.monotonic() - self._last_draw >= REDRAW_INTERVAL:
                self._redraw(finished=None)

    def finish(self, key: str, text: str) -> None:
        with self._lock:
            self._lines.pop(key, None)
            if self.live:
                self._redraw(finished=text)
            else:
                print(text, file=self.stream, flush=True)

    def close(self) -> None:
        """Clear the live lines that were never finished."""
        with self._lock:
            self._lines.clear()
            if self.live:
                self._redraw(finished=None)

    def _redraw(self, finished: str | None) -> None:
        # Up to the first live line, clear to the end of the screen, draw again.
        out = f"\x1b[{self._drawn}F\x1b[J" if self._drawn else ""
        if finished is not None:
            out += finished + "\n"
        out += "".join(line + "\n" for line in self._lines.values())
        self.stream.write(out)
        self.stream.flush()
        self._drawn = len(self._lines)
        self._last_draw = time.monotonic()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
