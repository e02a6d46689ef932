"""A long batch's reports looked up and written by worker processes, one per core
(docs/symbolicate.md, "Batches").

The workers are forked once every report is read and every SymCache opened, so they
share the parsed reports and the tables copy-on-write: nothing is sent to them. Each
takes a contiguous share of the reports and sends back, for each, what it said on stderr
and what came of it; the parent says it in input order, so the lines and the outcomes are
those of one process doing the reports in turn. A worker that dies loses only what it had
not sent: those reports are said to be lost, each on its line, and the others stand.
"""

from __future__ import annotations

import io
import os
import pickle
import selectors
import struct
import sys
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import TypeVar

    T = TypeVar("T")
    R = TypeVar("R")

# Below this many reports a batch is done in one process: forking and merging would
# cost more than a second core saves.
MIN_REPORTS = 100
# Each message to the parent: its length, then the pickled (index, stderr text, result).
_LENGTH = struct.Struct("<I")
_READ_SIZE = 1 << 16


def count(reports: int) -> int:
    """How many workers a batch of `reports` gets: one a core the process may run on, none
    for a short batch or where there is no fork."""
    if reports < MIN_REPORTS or not hasattr(os, "fork"):
        return 0
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    return cores if cores > 1 else 0


def shares(total: int, workers: int) -> list[range]:
    """`total` indexes cut into `workers` contiguous ranges, the first ones a report longer."""
    size, extra = divmod(total, workers)
    starts = [number * size + min(number, extra) for number in range(workers + 1)]
    return [range(starts[number], starts[number + 1]) for number in range(workers)]


class Worker(NamedTuple):
    pid: int
    share: range


class Lost(NamedTuple):
    """A report whose worker ended before sending its result."""

    how: str  # how the worker ended: "exit status 1", "signal 9"


def run(
    items: Sequence[T], work: Callable[[T], R], workers: int
) -> Iterator[tuple[int, str, R | Lost]]:
    """For each item in order: its index, what `work(item)` printed on stderr, and its
    result, or Lost when its worker died first. The results come as the workers send
    them, waiting only for the ones before."""
    pipes: dict[int, Worker] = {}  # by the read end of its pipe, in share order
    for share in shares(len(items), workers):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            os.close(read_end)
            for other in pipes:
                os.close(other)
            _work_share(items, share, work, write_end)
        os.close(write_end)
        pipes[read_end] = Worker(pid, share)
    yield from _merged(pipes)


def _work_share(items: Sequence[T], share: range, work: Callable[[T], R], pipe: int) -> None:
    """The worker's life: each item of its share done and sent, then exit (atexit handlers,
    buffered files and the parent's other state are the parent's to finish)."""
    status = 1
    try:
        with open(pipe, "wb") as to_parent:
            for index in share:
                said = sys.stderr = io.StringIO()
                result = work(items[index])
                message = pickle.dumps((index, said.getvalue(), result))
                to_parent.write(_LENGTH.pack(len(message)) + message)
                # Sent as done: a worker dying later loses no report already written.
                to_parent.flush()
        status = 0
    except BaseException as exc:  # noqa: BLE001 - the parent says which reports were lost
        _log_failure(exc)
    finally:
        os._exit(status)


def _log_failure(exc: BaseException) -> None:
    """A bug in a worker goes to the log file, as main.py logs one in a single process."""
    try:
        from dsymfind.log import log_internal_error

        log_internal_error(exc, os.environ)
    except BaseException:  # noqa: BLE001, S110 - the parent reports the lost reports anyway
        pass


def _merged(pipes: dict[int, Worker]) -> Iterator[tuple[int, str, R | Lost]]:
    """The workers' messages in input order; Lost for each item no worker sent."""
    arrived: dict[int, tuple[str, R]] = {}
    buffers = {fd: bytearray() for fd in pipes}
    ended: dict[int, str] = {}  # read end -> how its worker ended
    selector = selectors.DefaultSelector()
    for fd in pipes:
        selector.register(fd, selectors.EVENT_READ)
    try:
        for owner, worker in pipes.items():
            for index in worker.share:
                while index not in arrived and owner not in ended:
                    _receive(selector, buffers, arrived, pipes, ended)
                if index in arrived:
                    said, result = arrived.pop(index)
                    yield index, said, result
                else:
                    yield index, "", Lost(ended[owner])
    finally:
        selector.close()
        for fd in pipes:
            if fd not in ended:
                os.close(fd)
                os.waitpid(pipes[fd].pid, 0)


def _receive(
    selector: selectors.BaseSelector,
    buffers: dict[int, bytearray],
    arrived: dict[int, tuple[str, R]],
    pipes: dict[int, Worker],
    ended: dict[int, str],
) -> None:
    """Read what the workers have sent; a closed pipe's worker reaped."""
    for key, _ in selector.select():
        fd = int(key.fd)
        data = os.read(fd, _READ_SIZE)
        if not data:
            selector.unregister(fd)
            os.close(fd)
            ended[fd] = _reaped(pipes[fd].pid)
            continue
        buffer = buffers[fd]
        buffer += data
        while len(buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(buffer)
            if len(buffer) < _LENGTH.size + length:
                break
            index, said, result = pickle.loads(buffer[_LENGTH.size : _LENGTH.size + length])  # noqa: S301 - our own worker's
            del buffer[: _LENGTH.size + length]
            arrived[index] = (said, result)


def _reaped(pid: int) -> str:
    status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
