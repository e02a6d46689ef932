"""The admin commands' stdout under main.py's one error policy: a write that fails ends
the command with one line, `dsymfind: error: cannot write the output: No space left on
device`, and a reader that went away (`dsymfind id ... | head`) ends it quietly, as Unix
tools end.

Python says neither well by itself. A write that fails raises OSError wherever a print
happened, which the policy would call an internal error; one the interpreter's own flush
meets at exit prints "Exception ignored in: <_io.TextIOWrapper name='<stdout>'>" and makes
the status 120. So while a command runs, sys.stdout is a `Guarded` stream whose failed
writes and flushes raise OutputFailed, and main.py flushes it before the command's status
stands.
"""

from __future__ import annotations

import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

# The exit status of a command whose reader went away: a shell's for a death by SIGPIPE.
CLOSED_PIPE_STATUS = 128 + 13
# The most handed to the stream in one write. One larger write during which the pipe's
# reader leaves ends without an error (Python 3.11 on Linux: the kernel's partial write
# is taken, the rest dropped); written in pieces, the next piece meets EPIPE. A pipe's
# capacity on Linux.
WRITE_PIECE = 1 << 16


class OutputFailed(BaseException):
    """stdout could not be written. A BaseException, as KeyboardInterrupt is: it ends the
    command wherever it is met, and no handler of one item's errors takes it for that
    item's own."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error

    @property
    def reader_gone(self) -> bool:
        return self.error.errno == errno.EPIPE

    def __str__(self) -> str:
        return f"cannot write the output: {self.error.strerror or self.error}"


class Guarded:
    """A text or binary stream whose writes and flushes raise OutputFailed for an
    OSError; everything else is the stream's own."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: Any) -> int:
        written = 0
        try:
            for start in range(0, len(data), WRITE_PIECE):
                written += self._stream.write(data[start : start + WRITE_PIECE])
        except OSError as exc:
            raise OutputFailed(exc) from None
        return written

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputFailed(exc) from None

    @property
    def buffer(self) -> Guarded:
        return Guarded(self._stream.buffer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def run_guarded(command: Callable[[], int]) -> int:
    """`command`'s status with sys.stdout guarded and flushed before it stands (after
    argparse's --help and usage errors too, which end with SystemExit); 1 with one error
    line when the output could not be written, CLOSED_PIPE_STATUS and nothing said when
    its reader went away."""
    real = sys.stdout
    if real is None:  # no fd 1 at start: print() already writes nowhere
        return command()
    sys.stdout = Guarded(real)
    try:
        try:
            return command()
        finally:
            sys.stdout.flush()
    except OutputFailed as failed:
        _discard(real)
        if failed.reader_gone:
            return CLOSED_PIPE_STATUS
        print(f"dsymfind: error: {failed}", file=sys.stderr)
        return 1
    finally:
        sys.stdout = real


def _discard(stream: Any) -> None:
    """What is left in `stream`'s buffer goes to /dev/null, so the interpreter's final
    flush has nothing to fail on (a stream without a descriptor has no such flush)."""
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)
