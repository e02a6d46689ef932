"""Progress for people: live bars on a terminal, plain final lines anywhere else; and the
one way every message spells a size (`human_size`: binary units, KiB, MiB, GiB).

Used by the admin commands that take long (fetch, prefetch, index, publish). Output goes to
stderr so that stdout stays the command's result, as in curl and pip.
"""

from __future__ import annotations

import sys
import time
from _thread import allocate_lock  # not threading: a waiting helper says sizes through here

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs an import the helper's miss path need not pay
    from collections.abc import Callable
    from typing import TextIO

# Redraw at most this often; a terminal cannot show more and it costs the fetch nothing.
REDRAW_INTERVAL = 0.1
BAR_WIDTH = 24
# In a log (CI) a long task says how far it got at each tenth of its bytes, and at least
# this often, so a stalled job is told from a slow one without a line per chunk.
LOG_STEPS = 10
LOG_INTERVAL = 10.0
# Below this a task's tenths come too fast to be news: only the LOG_INTERVAL lines remain,
# so a quick run adds nothing to its log.
LOG_STEPS_MIN_BYTES = 64 * 1024 * 1024
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

    def __init__(
        self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.live = _is_terminal(self.stream)
        self._lines: dict[str, str] = {}
        self._drawn = 0
        self._last_draw = 0.0
        self._lock = allocate_lock()

    def update(self, key: str, text: str) -> None:
        with self._lock:
            self._lines[key] = text
            if self.live and self.clock() - self._last_draw >= REDRAW_INTERVAL:
                self._redraw(finished=None)

    def finish(self, key: str, text: str) -> None:
        with self._lock:
            self._lines.pop(key, None)
            if self.live:
                self._redraw(finished=text)
            else:
                print(text, file=self.stream, flush=True)

    def emit(self, text: str, stream: TextIO) -> None:
        """A result line on `stream` (stdout), above the live lines, which a terminal shared
        by both would otherwise have the line written over."""
        with self._lock:
            if self.live and self._drawn:
                self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
                self.stream.flush()
                self._drawn = 0
            print(text, file=stream, flush=True)
            if self.live and self._lines:
                self._redraw(finished=None)

    def log(self, text: str) -> None:
        """A line for a log (no terminal): printed as it is."""
        with self._lock:
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
        self._last_draw = self.clock()


class ByteMeter:
    """How far one long task is through its known total of bytes: on a terminal, a bar that
    Progress redraws in place; in a log, a line at each tenth (for LOG_STEPS_MIN_BYTES and
    more) and whenever LOG_INTERVAL s have passed since the last line, whichever comes
    first. `add` may be called from several threads."""

    def __init__(self, progress: Progress, label: str, total: int) -> None:
        self.progress = progress
        self.label = label
        self.total = total
        self.doing = ""  # what the task is on now, shown after the bar
        self._done = 0
        self._logged_step = 0
        self._logged_at = progress.clock()
        self._steps = total >= LOG_STEPS_MIN_BYTES
        self._lock = allocate_lock()

    def add(self, count: int) -> None:
        """`count` more bytes are done."""
        with self._lock:
            self._done += count
            self._show()

    def reach(self, done: int) -> None:
        """`done` bytes are done in all: a piece of the task ended, however it ended."""
        with self._lock:
            self._done = done
            self._show()

    def _show(self) -> None:
        if self.progress.live:
            self.progress.update(
                self.label, f"{self.label} {bar(self._done, self.total)}  {self.doing}"
            )
            return
        step = self._done * LOG_STEPS // self.total if self.total else 0
        now = self.progress.clock()
        if (self._steps and step > self._logged_step) or now - self._logged_at >= LOG_INTERVAL:
            self._logged_step, self._logged_at = max(step, self._logged_step), now
            fraction = f"{self._done / self.total:.0%}, " if self.total else ""
            doing = f" ({self.doing})" if self.doing else ""
            self.progress.log(
                f"{self.label}: {fraction}{human_size(self._done)} of "
                f"{human_size(self.total)}{doing}"
            )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
