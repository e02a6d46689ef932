"""An HTTP proxy on 127.0.0.1 for tests: forwards absolute-form GETs (http:// URLs) and
tunnels CONNECTs (https:// URLs), over TLS itself when given a server context (an https://
proxy). `requests` holds each request head it received; `refuse` answers every one with
that status instead."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import urllib.parse

from support.stalling_proxy import LoopbackProxy


class ForwardProxy(LoopbackProxy):
    def __init__(self, *, tls: ssl.SSLContext | None = None, refuse: int | None = None) -> None:
        super().__init__()
        self.tls, self.refuse = tls, refuse
        self.scheme = "https" if tls else "http"
        self.requests: list[bytes] = []

    def _connected(self, client: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if self.tls is not None:
                client = self.tls.wrap_socket(client, server_side=True)
                self._sockets.append(client)
            head = read_head(client)
            if b"\r\n\r\n" not in head:
                return
            head, rest = head.split(b"\r\n\r\n", 1)
            self.requests.append(head)
            if self.refuse is not None:
                client.sendall(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n" % self.refuse)
                return
            method, target, version = head.split(b"\r\n", 1)[0].split(b" ")
            if method == b"CONNECT":
                host, _, port = target.decode().rpartition(":")
                upstream = socket.create_connection((host, int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                url = urllib.parse.urlsplit(target.decode())
                upstream = socket.create_connection((url.hostname, url.port or 80))
                origin_form = (url.path or "/") + (f"?{url.query}" if url.query else "")
                fields = head.split(b"\r\n", 1)[1]
                line = b"%s %s %s\r\n" % (method, origin_form.encode(), version)
                upstream.sendall(line + fields + b"\r\n\r\n")
            self._sockets.append(upstream)
            if rest:
                upstream.sendall(rest)
            threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
            _pipe(client, upstream)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def read_head(connection: socket.socket) -> bytes:
    """What a client sent up to the end of its request's head (and any bytes after it in
    the same reads), or all it sent before closing without one."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = connection.recv(65536)
        if not data:
            break
        head += data
    return head
