"""A TCP proxy on 127.0.0.1 that lets a budget of request bytes through, then holds every
client's further bytes until released: an upload caught in the middle, for as long as a test
needs, whatever the machine's speed. Answers always pass."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
_CHUNK = 64 * 1024


class LoopbackProxy:
    """A listener on 127.0.0.1 whose every connection goes to `_connected`, in the
    accepting thread; leaving closes the listener and every socket kept in `_sockets`."""

    scheme = "http"

    def __init__(self) -> None:
        self._listener = socket.create_server((HOST, 0))
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"{self.scheme}://{HOST}:{self._listener.getsockname()[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stopping()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _stopping(self) -> None:
        """Before the sockets close."""

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._sockets.append(client)
            self._connected(client)

    def _connected(self, client: socket.socket) -> None:
        raise NotImplementedError


class StallingProxy(LoopbackProxy):
    def __init__(self, target_port: int, budget: int) -> None:
        super().__init__()
        self.target = (HOST, target_port)
        self.budget = budget
        self.stalled = threading.Event()  # some client's bytes are being held
        self._released = False
        self._condition = threading.Condition()

    def release(self) -> None:
        """Every byte held, and every byte after, goes through."""
        with self._condition:
            self._released = True
            self._condition.notify_all()

    def _stopping(self) -> None:
        self.release()

    def _connected(self, client: socket.socket) -> None:
        server = socket.create_connection(self.target)
        self._sockets.append(server)
        threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
        threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, metered: bool) -> None:
        try:
            while data := source.recv(_CHUNK):
                while data:
                    allowed = self._take(len(data)) if metered else len(data)
                    sink.sendall(data[:allowed])
                    data = data[allowed:]
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.close()

    def _take(self, wanted: int) -> int:
        """How many of `wanted` bytes may go now: waits while the budget is spent."""
        with self._condition:
            while not self._released and self.budget == 0:
                self.stalled.set()
                self._condition.wait()
            if self._released:
                return wanted
            allowed = min(wanted, self.budget)
            self.budget -= allowed
            return allowed
