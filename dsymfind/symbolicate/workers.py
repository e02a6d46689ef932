"""A long batch's reports read, looked up and written by worker processes, one per core
(docs/symbolicate.md, "Batches").

Each worker takes a contiguous share of the inputs and works in two rounds: it reads its
reports and sends what the batch must know of each (its images); the parent, having
every report's, fetches and opens what they need once and sends its findings to every
worker; each then looks its reports up and writes them. For each input of each round a
worker sends what it said on stderr and what came of it; the parent says these in input
order, so the lines and the outcomes are those of one process doing the inputs in turn.
A worker that dies loses only what it had not sent: those inputs are said to be lost,
each on its line, and the others stand.

A worker pickles all its messages with one Pickler, and the parent reads them with one
Unpickler a worker: an object sent before (the images of a report, most of them those of
the reports before it) goes again as a reference to what was sent, not whole. Unpickling
a report's images again and again was a third of the parent's work in a batch of 1,000.
So what a worker has sent, it must not change, nor the parent what it received; and both
memos hold what was sent until the batch ends (the parent keeps each report's outcome for
its summary anyway).
"""

from __future__ import annotations

import io
import os
import pickle
import selectors
import struct
import sys
from typing import Generic, NamedTuple, TypeVar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

T = TypeVar("T")  # an input
A = TypeVar("A")  # what the first round sends of an input
S = TypeVar("S")  # what the parent sends between the rounds
R = TypeVar("R")  # what the second round sends of an input

# Below this many reports a batch is done in one process: forking and merging would
# cost more than a second core saves.
MIN_REPORTS = 100
# Each message: its length, then the pickled (index, stderr text, result), which only the
# Unpickler that loaded the same worker's earlier messages can load, in order.
_LENGTH = struct.Struct("<I")
_READ_SIZE = 1 << 16


def count(reports: int) -> int:
    """How many workers a batch of `reports` gets: one a core the process may run on, none
    for a short batch, on one core, or where there is no fork."""
    if reports < MIN_REPORTS or not hasattr(os, "fork"):
        return 0
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    return cores if cores > 1 else 0


def shares(total: int, workers: int) -> list[range]:
    """`total` indexes cut into `workers` contiguous ranges, the first ones an index longer."""
    size, extra = divmod(total, workers)
    starts = [number * size + min(number, extra) for number in range(workers + 1)]
    return [range(starts[number], starts[number + 1]) for number in range(workers)]


class Lost(NamedTuple):
    """An input whose worker ended before sending what came of it."""

    how: str  # how the worker ended: "exit status 1", "signal 9"


class _Worker(NamedTuple):
    pid: int
    share: range
    down: int  # the write end of the pipe the parent sends on


class Pool(Generic[T, A, S, R]):
    """The forked workers of one batch; a context manager that reaps them."""

    def __init__(
        self,
        items: Sequence[T],
        first: Callable[[T], A],
        second: Callable[[T, S], R],
        workers: int,
    ) -> None:
        """Fork the workers: each runs `first(item)` on its share, then, once the parent
        has sent `settled`, `second(item, settled)`; what it keeps from one round to the
        other it keeps itself (it is a fork of the caller)."""
        self._workers: dict[int, _Worker] = {}  # by the read end of its pipe, in share order
        self._ended: dict[int, str] = {}  # read end -> how its worker ended
        self._streams: dict[int, _Stream] = {}
        self._selector = selectors.DefaultSelector()
        for share in shares(len(items), workers):
            up_read, up_write = os.pipe()
            down_read, down_write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                for fd in (up_read, down_write, *self._descriptors()):
                    os.close(fd)
                _work(items, share, (first, second), up_write, down_read)
            os.close(up_write)
            os.close(down_read)
            self._workers[up_read] = _Worker(pid, share, down_write)
            self._streams[up_read] = _Stream()
            self._selector.register(up_read, selectors.EVENT_READ)

    def __enter__(self) -> Pool[T, A, S, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._selector.close()
        for fd, worker in self._workers.items():
            if fd not in self._ended:
                os.close(fd)
                os.close(worker.down)
                os.waitpid(worker.pid, 0)

    def _descriptors(self) -> list[int]:
        """The pipes of the workers forked before (a worker keeps none of them open)."""
        return [fd for up, worker in self._workers.items() for fd in (up, worker.down)]

    def first(self) -> Iterator[tuple[int, str, A | Lost]]:
        """Each input's first round, in input order: its index, its stderr, its result."""
        return self._merged()

    def settle(self, settled: S) -> None:
        """Send `settled` to every worker still alive: its second round begins."""
        message = pickle.dumps(settled)
        for fd, worker in self._workers.items():
            if fd in self._ended:
                continue
            try:
                with open(worker.down, "wb", closefd=False) as down:
                    down.write(_LENGTH.pack(len(message)) + message)
            except BrokenPipeError:
                continue  # it died meanwhile: its inputs are said lost in the second round

    def second(self) -> Iterator[tuple[int, str, R | Lost]]:
        """Each input's second round, in input order, as first() gives the first."""
        return self._merged()

    def _merged(self) -> Iterator[tuple[int, str, Any]]:
        """The workers' messages of a round in input order (each worker's share in turn,
        the others' kept as they come); Lost for each input its worker did not send."""
        arrived: dict[int, tuple[str, Any]] = {}
        for fd, worker in self._workers.items():
            for index in worker.share:
                while index not in arrived and fd not in self._ended:
                    self._receive(arrived)
                if index in arrived:
                    said, result = arrived.pop(index)
                    yield index, said, result
                else:
                    yield index, "", Lost(self._ended[fd])

    def _receive(self, arrived: dict[int, tuple[str, Any]]) -> None:
        """Read what the workers have sent; a closed pipe's worker reaped."""
        for key, _ in self._selector.select():
            fd = int(key.fd)
            data = os.read(fd, _READ_SIZE)
            if not data:
                self._selector.unregister(fd)
                os.close(fd)
                os.close(self._workers[fd].down)
                self._ended[fd] = _reaped(self._workers[fd].pid)
                continue
            for index, said, result in self._streams[fd].messages(data):
                arrived[index] = (said, result)


class _Stream:
    """What one worker sends: its messages, each read by the Unpickler of all of them
    (the module's text says why one)."""

    def __init__(self) -> None:
        self._buffer = bytearray()  # what came of a message not yet whole
        self._message = io.BytesIO()
        self._unpickler = pickle.Unpickler(self._message)  # noqa: S301 - our own worker's

    def messages(self, data: bytes) -> list[Any]:
        """The whole messages `data` completes, in order."""
        buffer = self._buffer
        buffer += data
        found = []
        while len(buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(buffer)
            end = _LENGTH.size + length
            if len(buffer) < end:
                break
            self._message.seek(0)
            self._message.truncate()
            self._message.write(buffer[_LENGTH.size : end])
            self._message.seek(0)
            found.append(self._unpickler.load())
            del buffer[:end]
        return found


def _work(
    items: Sequence[T],
    share: range,
    rounds: tuple[Callable[[T], A], Callable[[T, S], R]],
    up: int,
    down: int,
) -> None:
    """A worker's life: both rounds over its share, then exit (atexit handlers and buffered
    files are the parent's to finish)."""
    status = 1
    try:
        with open(up, "wb") as to_parent:
            sender = _Sender(to_parent)
            first, second = rounds
            for index in share:
                sender.send(index, first, items[index])
            settled = _settled(down)
            for index in share:
                sender.send(index, second, items[index], settled)
        status = 0
    except BaseException as exc:  # noqa: BLE001 - the parent says which inputs were lost
        _log_failure(exc)
    finally:
        os._exit(status)


class _Sender:
    """A worker's messages, pickled by the Pickler of all of them (the module's text says
    why one)."""

    def __init__(self, to_parent: io.BufferedWriter) -> None:
        self._to_parent = to_parent
        self._message = io.BytesIO()
        self._pickler = pickle.Pickler(self._message, protocol=pickle.HIGHEST_PROTOCOL)

    def send(self, index: int, work: Callable[..., object], *args: object) -> None:
        """What `work(*args)` said on stderr and returned, sent as soon as it is done: a
        worker dying later loses nothing of it."""
        said = sys.stderr = io.StringIO()
        result = work(*args)
        self._message.seek(0)
        self._message.truncate()
        self._pickler.dump((index, said.getvalue(), result))
        message = self._message.getvalue()
        self._to_parent.write(_LENGTH.pack(len(message)) + message)
        self._to_parent.flush()


def _settled(down: int) -> Any:
    """What the parent sent between the rounds (EOFError when it sent nothing)."""
    with open(down, "rb") as from_parent:
        header = from_parent.read(_LENGTH.size)
        if len(header) < _LENGTH.size:
            raise EOFError("the batch ended before the second round")
        (length,) = _LENGTH.unpack(header)
        return pickle.loads(from_parent.read(length))  # noqa: S301 - our own parent's


def _log_failure(exc: BaseException) -> None:
    """A bug in a worker goes to the log file, as main.py logs one in a single process;
    a worker the parent stopped (it closed the pipes) has nothing to log."""
    if isinstance(exc, EOFError | BrokenPipeError | KeyboardInterrupt):
        return
    try:
        from dsymfind.log import log_internal_error

        log_internal_error(exc, os.environ)
    except BaseException:  # noqa: BLE001, S110 - the parent says the lost inputs anyway
        pass


def _reaped(pid: int) -> str:
    status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
