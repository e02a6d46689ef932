"""A real HTTP/1.1 symbol server on 127.0.0.1, with faults to inject per path.

Serves the files under a folder by URL path (over HTTPS with `tls`, a server-side SSL
context: see self_signed), records every request, and lets a
test replace the answer for one path with a fault: a status sequence, a short or
overlong body, a trickle, a stall, a reset, a redirect. Used by the tests and by
the demo, so it depends on the standard library only.

    with SymbolServer(root) as server:
        server.route("/67E9/247C", statuses(500))   # one 500, then the file
        download(client, server.url + "/67E9/247C", dest)
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import ssl
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO, NamedTuple
from urllib.parse import unquote, urlsplit

from support.services import Service

HOST = "127.0.0.1"
# How often hanging handlers look at the stop flag and the client: stop() waits about this.
POLL = 0.02
# A keep-alive connection left idle this long is closed, so its thread ends.
IDLE_TIMEOUT = 10.0
OCTET_STREAM = "application/octet-stream"
# serve_root counts the bytes it sends after each piece of this size.
SENDFILE_PIECE = 4 * 1024 * 1024

Route = Callable[["Exchange"], None]
Headers = Iterable[tuple[str, str]]


class RequestRecord(NamedTuple):
    method: str
    path: str  # the request target as sent, query included
    headers: dict[str, str]  # names lowercased


class Exchange(BaseHTTPRequestHandler):
    """One request being answered; routes get it and answer through its helpers."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real stores do
    timeout = IDLE_TIMEOUT
    server: _HTTPServer

    @property
    def owner(self) -> SymbolServer:
        return self.server.owner

    def setup(self) -> None:
        super().setup()
        self.owner._opened(self.connection)

    def finish(self) -> None:
        self.owner._closed(self.connection)
        super().finish()

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def log_message(self, format: str, *args: object) -> None:
        pass  # requests are in SymbolServer.requests; stderr stays readable

    def _dispatch(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.owner._record(RequestRecord(self.command, self.path, headers))
        route = self.owner._route_for(urlsplit(self.path).path)
        try:
            route(self)
        except (ConnectionError, TimeoutError):  # the client gave up: expected with faults
            self.close_connection = True

    def respond(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str = OCTET_STREAM,
        headers: Headers = (),
    ) -> None:
        """A complete answer with a Content-Length; no body for HEAD."""
        self.start(status, [("Content-Type", content_type), *headers], length=len(body))
        if self.command != "HEAD":
            self.wfile.write(body)

    def start(self, status: int, headers: Headers = (), *, length: int | None = None) -> None:
        """The status line and headers only: faults write (or withhold) the body."""
        self.send_response(status)
        if length is not None:
            self.send_header("Content-Length", str(length))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def pause(self, seconds: float) -> bool:
        """Wait; False as soon as the server stops or the client hangs up."""
        remaining = seconds
        while remaining > 0:
            step = min(POLL, remaining)
            if self.owner.stopping.wait(step) or self._client_gone():
                return False
            remaining -= step
        return True

    def reset(self) -> None:
        """Close with an RST instead of a FIN: the client sees 'connection reset'."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # it holds a reference that would delay the real close
        self.connection.close()
        self.close_connection = True

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True
        return not peeked


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: SymbolServer

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client that hung up or was reset on purpose
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class SymbolServer(Service):
    """Files under `root` by URL path (GET and HEAD), 404 for the rest, faults by route."""

    def __init__(
        self, root: str | os.PathLike[str] | None = None, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.root = None if root is None else os.path.realpath(root)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RequestRecord] = []
        self._routes: dict[str, Route] = {}
        self._bytes_sent: dict[str, int] = {}
        # What paths without a route of their own get.
        self.fallback: Route = serve_root
        self._connections: set[socket.socket] = set()
        self._http = _HTTPServer((HOST, 0), Exchange)
        self._http.owner = self
        scheme = "http"
        if tls is not None:  # HTTPS: each connection's handshake is made as it is accepted
            self._http.socket = tls.wrap_socket(self._http.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://{HOST}:{self._http.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> SymbolServer:
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": POLL}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends hanging faults and open connections too, so no thread outlives it for long."""
        self.stopping.set()
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            # Wakes a handler thread blocked reading the connection's next request.
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._http.server_close()

    @property
    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._requests)

    def count(self, path: str) -> int:
        """GETs of `path` so far."""
        return sum(1 for r in self.requests if r.method == "GET" and r.path == path)

    def bytes_sent(self, path: str) -> int:
        """Body bytes of files under the root sent for `path` so far (serve_root's answers)."""
        with self._lock:
            return self._bytes_sent.get(path, 0)

    def route(self, path: str, handler: Route) -> None:
        with self._lock:
            self._routes[path] = handler

    def _route_for(self, path: str) -> Route:
        with self._lock:
            return self._routes.get(path, self.fallback)

    def _sent(self, path: str, count: int) -> None:
        with self._lock:
            self._bytes_sent[path] = self._bytes_sent.get(path, 0) + count

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self._requests.append(record)

    def _opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)


def serve_root(exchange: Exchange) -> None:
    """The default route: the file under the server's root, or 404.

    As a static file server does (nginx, S3): a strong ETag from the file's size and
    modification time, `Range: bytes=N-` and `bytes=N-M` honoured unless a stale `If-Range`
    asks for the whole file, and the body sent with sendfile(2), so that the server is not
    what a benchmark of a client measures.
    """
    path = _file_for(exchange.owner.root, exchange.path)
    if path is None:
        exchange.respond(404, b"not found\n", content_type="text/plain")
        return
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        size, etag = st.st_size, f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        headers = [("Content-Type", OCTET_STREAM), ("ETag", etag), ("Accept-Ranges", "bytes")]
        asked = _byte_range(exchange.headers.get("Range"), size)
        if asked is not None and exchange.headers.get("If-Range", etag) != etag:
            asked = None  # the client's copy is of another version: all of this one
        if asked == "unsatisfiable":
            exchange.respond(416, headers=[("ETag", etag), ("Content-Range", f"bytes */{size}")])
            return
        start, end, status = 0, size, 200
        if asked is not None:
            start, end, status = asked[0], asked[1], 206
            headers.append(("Content-Range", f"bytes {start}-{end - 1}/{size}"))
        exchange.start(status, headers, length=end - start)
        if exchange.command != "HEAD":
            _send_file(exchange, f, start, end - start)


def _send_file(exchange: Exchange, f: BinaryIO, offset: int, count: int) -> None:
    """sendfile(2) in pieces, counting what went out (a cut answer counts the pieces sent)."""
    sent = 0
    try:
        while sent < count:
            piece = exchange.connection.sendfile(
                f, offset + sent, min(SENDFILE_PIECE, count - sent)
            )
            if piece == 0:
                break
            sent += piece
    finally:
        exchange.owner._sent(exchange.path, sent)


def _byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """A single `bytes=N-` or `bytes=N-M` range as [start, end); "unsatisfiable" past the
    end; None for no range or one this server ignores (suffix and multiple ranges)."""
    found = re.fullmatch(r"bytes=(\d+)-(\d*)", (header or "").strip())
    if found is None:
        return None
    start = int(found[1])
    end = min(size, int(found[2]) + 1) if found[2] else size
    if start >= size:
        return "unsatisfiable"
    return (start, end) if start < end else None


def _file_for(root: str | None, target: str) -> str | None:
    if root is None:
        return None
    path = os.path.realpath(os.path.join(root, unquote(urlsplit(target).path).lstrip("/")))
    inside = path.startswith(root + os.sep)  # no escaping the root with ../ or links
    return path if inside and os.path.isfile(path) else None


# Faults: each returns a route for SymbolServer.route().


def body(
    data: bytes, status: int = 200, *, content_type: str = OCTET_STREAM, headers: Headers = ()
) -> Route:
    """A fixed answer."""
    fixed = list(headers)
    return lambda exchange: exchange.respond(status, data, content_type=content_type, headers=fixed)


def sequence(*routes: Route) -> Route:
    """The n-th request gets the n-th route; the last one repeats."""
    lock = threading.Lock()
    served = 0

    def route(exchange: Exchange) -> None:
        nonlocal served
        with lock:
            current = routes[min(served, len(routes) - 1)]
            served += 1
        current(exchange)

    return route


def statuses(*codes: int, then: Route = serve_root) -> Route:
    """Answer with each status in turn (empty body), then hand over to `then`."""
    return sequence(*(body(b"", code) for code in codes), then)


def retry_after(seconds: int, status: int = 429) -> Route:
    return body(b"", status, headers=[("Retry-After", str(seconds))])


def truncated(data: bytes, sent: int) -> Route:
    """Content-Length says len(data); only `sent` bytes follow, then a clean close."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM)], length=len(data))
        exchange.wfile.write(data[:sent])
        exchange.close_connection = True

    return route


def overlong(data: bytes, extra: bytes) -> Route:
    """Content-Length says len(data); `extra` bytes follow the body, then a close."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM)], length=len(data))
        exchange.wfile.write(data + extra)
        exchange.close_connection = True

    return route


def chunked(data: bytes, size: int = 64 * 1024) -> Route:
    """No Content-Length: Transfer-Encoding: chunked, as dynamic servers send."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM), ("Transfer-Encoding", "chunked")])
        for at in range(0, len(data), size):
            _write_chunk(exchange, data[at : at + size])
        _write_chunk(exchange, b"")

    return route


def endless(piece: bytes = b"\0" * 64 * 1024) -> Route:
    """A chunked body that never ends, until the client hangs up or the server stops."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM), ("Transfer-Encoding", "chunked")])
        while not exchange.owner.stopping.is_set():
            _write_chunk(exchange, piece)  # raises once the client has gone
        exchange.close_connection = True

    return route


def slow(data: bytes, step: int, interval: float) -> Route:
    """Content-Length as usual, then `step` bytes every `interval` seconds."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM)], length=len(data))
        for at in range(0, len(data), step):
            if not exchange.pause(interval):
                break
            exchange.wfile.write(data[at : at + step])
        exchange.close_connection = True

    return route


def slow_pieces(data: bytes, pieces: int, interval: float) -> Route:
    """`data` in at most `pieces` writes of equal size (the last shorter), `interval` apart."""
    return slow(data, len(data) // pieces + 1, interval)


def stall(length: int = 1024) -> Route:
    """Headers announcing `length` bytes, then silence until the client or server gives up."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM)], length=length)
        while exchange.pause(POLL):
            pass
        exchange.close_connection = True

    return route


def informational_forever(interval: float) -> Route:
    """`HTTP/1.1 100 Continue` every `interval` seconds, and never a final answer."""

    def route(exchange: Exchange) -> None:
        while exchange.pause(interval):
            exchange.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        exchange.close_connection = True

    return route


def trickled_headers(interval: float) -> Route:
    """A status line and headers sent one byte every `interval` seconds (a slowloris)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-Padding: " + b"x" * 4096 + b"\r\n\r\n"

    def route(exchange: Exchange) -> None:
        for at in range(len(head)):
            if not exchange.pause(interval):
                break
            exchange.wfile.write(head[at : at + 1])
        exchange.close_connection = True

    return route


def reset(data: bytes, sent: int) -> Route:
    """Content-Length says len(data); `sent` bytes follow, then a TCP reset."""

    def route(exchange: Exchange) -> None:
        exchange.start(200, [("Content-Type", OCTET_STREAM)], length=len(data))
        exchange.wfile.write(data[:sent])
        exchange.reset()

    return route


def s3_error(code: str, status: int, *, drip: float | None = None) -> Route:
    """What an S3-compatible endpoint answers on an error: `status` and an XML body naming
    `code`, no other header (a 301 PermanentRedirect without x-amz-bucket-region, say).
    With `drip`, the body goes out one byte every `drip` seconds."""
    xml = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{code} (test endpoint)</Message><RequestId>0</RequestId></Error>"
    ).encode()

    def route(exchange: Exchange) -> None:
        exchange.start(status, [("Content-Type", "application/xml")], length=len(xml))
        if exchange.command == "HEAD":
            return
        for at in range(len(xml)):
            if drip is not None and not exchange.pause(drip):
                break
            exchange.wfile.write(xml[at : at + 1])
        exchange.close_connection = True

    return route


def redirect(location: str, status: int = 302) -> Route:
    """Location as given: relative, or absolute (another port is another origin)."""
    return body(b"", status, content_type="text/plain", headers=[("Location", location)])


def redirect_loop(status: int = 302) -> Route:
    """A redirect to the very path requested."""
    return lambda exchange: redirect(exchange.path, status)(exchange)


def require_auth(authorization: str, then: Route = serve_root) -> Route:
    """401 unless the Authorization header is exactly `authorization`."""

    def route(exchange: Exchange) -> None:
        if exchange.headers.get("Authorization") == authorization:
            then(exchange)
            return
        challenge = [("WWW-Authenticate", 'Bearer realm="symbols"')]
        exchange.respond(401, b"unauthorized\n", content_type="text/plain", headers=challenge)

    return route


class Served(NamedTuple):
    """One answer of a RangedFile: what was asked and how many body bytes went out."""

    status: int
    range: str | None
    if_range: str | None
    sent: int


class RangedFile:
    """`data` with a strong ETag, honouring `Range: bytes=N-` and `If-Range` as RFC 9110
    says (a stale If-Range gets the whole file with 200), recording every answer in `served`.

    Faults, each changeable between requests: `ranges=False` ignores Range (200 always);
    `cut_after` closes the connection after that many body bytes, for the next `cuts`
    answers, and the `fail_after_cut` answers after a cut are 503s; `trickle_after` sends
    the rest of a body one `trickle` piece per `interval` after that many bytes;
    `ranged_status` answers every ranged request with that status (416);
    `honour_if_range=False` serves the range whatever If-Range says (a broken store).
    """

    def __init__(self, data: bytes, *, etag: str = '"v1"') -> None:
        self.data, self.etag = data, etag
        self.ranges = True
        self.cut_after: int | None = None
        self.cuts = 1
        self.fail_after_cut = 0
        self.trickle_after: int | None = None
        self.trickle, self.interval = 64, 0.1
        self.ranged_status: int | None = None
        self.honour_if_range = True
        self._lock = threading.Lock()
        self._failing = 0
        self.served: list[Served] = []

    def __call__(self, exchange: Exchange) -> None:
        asked = exchange.headers.get("Range")
        if_range = exchange.headers.get("If-Range")
        with self._lock:
            failing = self._failing > 0
            self._failing -= 1 if failing else 0
        if failing:
            self._answer(exchange, 503, asked, if_range)
            return
        start, status = 0, 200
        match = re.fullmatch(r"bytes=(\d+)-", asked or "")
        fresh = not self.honour_if_range or if_range in (None, self.etag)
        if self.ranges and match is not None and fresh:
            if self.ranged_status is not None:
                self._answer(exchange, self.ranged_status, asked, if_range)
                return
            start, status = int(match[1]), 206
            if start >= len(self.data):
                self._answer(exchange, 416, asked, if_range)
                return
        rest = self.data[start:]
        headers = [("Content-Type", OCTET_STREAM), ("ETag", self.etag)]
        if self.ranges:
            headers.append(("Accept-Ranges", "bytes"))
        if status == 206:
            headers.append(
                ("Content-Range", f"bytes {start}-{len(self.data) - 1}/{len(self.data)}")
            )
        exchange.start(status, headers, length=len(rest))
        with self._lock:
            cut = self.cut_after is not None and self.cuts > 0
            if cut:
                self.cuts -= 1
                self._failing = self.fail_after_cut
        sent = self._send(exchange, rest, self.cut_after if cut else None)
        with self._lock:
            self.served.append(Served(status, asked, if_range, sent))
        if cut or sent < len(rest):
            exchange.close_connection = True

    def _send(self, exchange: Exchange, rest: bytes, cut: int | None) -> int:
        end = len(rest) if cut is None else min(cut, len(rest))
        quick = end if self.trickle_after is None else min(end, self.trickle_after)
        exchange.wfile.write(rest[:quick])
        exchange.wfile.flush()
        sent = quick
        while sent < end:
            if not exchange.pause(self.interval):
                break  # the client is gone (killed) or the server stops
            piece = rest[sent : min(end, sent + self.trickle)]
            try:
                exchange.wfile.write(piece)
                exchange.wfile.flush()
            except OSError:
                break
            sent += len(piece)
        return sent

    def _answer(
        self, exchange: Exchange, status: int, asked: str | None, if_range: str | None
    ) -> None:
        headers = [("ETag", self.etag)]
        if status == 416:
            headers.append(("Content-Range", f"bytes */{len(self.data)}"))
        exchange.respond(status, b"", headers=headers)
        with self._lock:
            self.served.append(Served(status, asked, if_range, 0))

    def fail_next(self, count: int) -> None:
        """The next `count` answers are 503s."""
        with self._lock:
            self._failing = count

    def requests(self) -> list[Served]:
        with self._lock:
            return list(self.served)


def _write_chunk(exchange: Exchange, data: bytes) -> None:
    exchange.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def self_signed(folder: str | os.PathLike[str]) -> tuple[ssl.SSLContext, str]:
    """A server context for 127.0.0.1 with a new self-signed certificate (made by the
    openssl tool), and the certificate's path, for a client to trust (SSL_CERT_FILE)."""
    import subprocess

    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    names = ["-subj", f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST}"]
    subprocess.run(
        [*request, "-keyout", key, "-out", cert, *names],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert
