"""A small HTTP/1.1 client on the standard library's sockets and ssl, for downloads.

What transfer.py needs of HTTP and nothing more: one GET per connection (`Connection:
close`, so nothing is pooled or reused), a body framed by Content-Length, chunked coding or
the connection's end, and TLS for https:// with the CA bundle loaded at the first
handshake. A proxy named by the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY;
on macOS the system's settings too) is left to httpx, the project's HTTP library, which
speaks to every kind (http, https and SOCKS proxies): stores/proxied.py, imported only for
an URL a proxy applies to. httpx cost a detached downloader about 60 ms of imports (httpx,
httpcore, h11, http.cookiejar, urllib.request) before its first byte; this module loads
nothing the downloader does not load anyway. No cookies are kept: none follows a
redirect to another origin.

Failures are this module's exceptions, never a bare OSError: a caller writing the body
to its disk tells that disk's errors from the network's. `ssl` (and the libcrypto it
loads) is imported by the first https exchange only.
"""

from __future__ import annotations

import base64
import os
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    import ssl

# A response head longer than this is refused (h11's default limit too).
MAX_HEAD_BYTES = 64 * 1024
# Body reads: large enough that a fast link costs few system calls, and never waited on to
# fill (recv returns what has arrived), so a trickling server is not held back. A piece's
# Python overhead is small beside its copy at this size, and malloc rarely splits it into
# fresh pages (4 MiB pieces measured slower).
READ_BYTES = 256 * 1024
# A TLS read returns one record, at most 16 KiB: asking for more only makes CPython
# allocate (and, past malloc's mmap threshold, map and unmap) a larger buffer each time; a
# 300 MB HTTPS body took 1.8 s with READ_BYTES reads, 1.05 s with these.
TLS_READ_BYTES = 16 * 1024
# Reads of a response head (a few hundred bytes): a READ_BYTES buffer is past malloc's mmap
# threshold, so each head read would map, shrink and unmap one.
HEAD_READ_BYTES = 16 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}


class HttpError(Exception):
    """Anything that kept an exchange from completing."""


class InvalidRequest(HttpError):
    """Our side: an URL or a header that cannot be sent. Asking again changes nothing."""


class NotHttp(InvalidRequest):
    """An URL of another scheme, or none with a host."""


class NetworkError(HttpError):
    """The connection: refused, reset, cut, or an answer that is not HTTP/1.1."""


class ConnectError(NetworkError):
    pass


class ReadError(NetworkError):
    pass


class ProtocolError(NetworkError):
    """The server's bytes are not a well-formed HTTP/1.1 answer."""


class Timeout(NetworkError):
    pass


class ConnectTimeout(Timeout):
    pass


class ReadTimeout(Timeout):
    pass


class PoolTimeout(Timeout):
    """More exchanges at once than the client allows, for longer than the time left."""


class Timeouts(NamedTuple):
    connect: float
    read: float  # each socket read (and write), not the exchange
    pool: float  # waiting for a free connection slot


class Url(NamedTuple):
    """A parsed http(s) URL; `text` as given (joined), for messages and for redirects."""

    text: str
    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent in the request line
    # Basic credentials from the URL's user info (`https://user:secret@host/`), sent to
    # this URL alone: a redirect's target carries its own, or none.
    authorization: str | None = None

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    def join(self, reference: str) -> Url:
        return parse_url(urllib.parse.urljoin(self.text, reference))


def parse_url(text: str) -> Url:
    """An http(s) URL parsed; InvalidRequest when it is not one."""
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise InvalidRequest("invalid URL: it holds spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise InvalidRequest(f"invalid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise NotHttp(f"not an http(s) URL: {scheme or 'no'} scheme")
    if not parts.hostname:
        raise NotHttp("not an http(s) URL: no host")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authorization = None
    if parts.username is not None or parts.password is not None:
        authorization = _basic(parts.username or "", parts.password or "")
    return Url(text, scheme, parts.hostname, port or DEFAULT_PORTS[scheme], target, authorization)


def _basic(user: str, password: str) -> str:
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


class Headers(Mapping[str, str]):
    """A response's header fields: `raw` as they came; by any case of the name, the values
    of a repeated field joined by ", ", as RFC 9110 allows."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        self._values: dict[str, list[str]] = {}
        for name, value in raw:
            self._values.setdefault(name.decode("latin-1").lower(), []).append(
                value.decode("latin-1")
            )

    def __getitem__(self, name: str) -> str:
        return ", ".join(self._values[name.lower()])

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def get_list(self, name: str) -> list[str]:
        return self._values.get(name.lower(), [])


class Response:
    """An answer whose body is read as it arrives (`pieces`)."""

    http_version = "HTTP/1.1"

    def __init__(self, url: Url, status: int, headers: Headers, connection: _Connection) -> None:
        self.url, self.status_code, self.headers = url, status, headers
        self._connection = connection
        self._length, self._chunked = framing(status, headers)
        self.is_stream_consumed = False

    @property
    def content_length(self) -> int | None:
        """The body's length as framed by Content-Length; None for chunked or until-close."""
        return self._length

    @property
    def tls(self) -> bool:
        return self.url.scheme == "https"

    def pieces(self, read_timeout: float) -> Iterator[bytes]:
        """The body's bytes as they arrive, each socket read waited on for `read_timeout`.

        A Content-Length body ends at that length, or earlier when the server closes early
        (the caller counts); a read may carry bytes past it, which the caller refuses, as
        it refuses those `bytes_past_the_body` finds."""
        self.is_stream_consumed = True
        connection = self._connection
        connection.read_timeout = read_timeout
        if self._chunked:
            yield from connection.chunks()
            return
        got = 0
        while self._length is None or got < self._length:
            # No larger buffer than the rest of the body: a small body's read then needs
            # no buffer mapped and unmapped (bytes past it are found by more_waiting).
            piece = connection.read_some(None if self._length is None else self._length - got)
            if not piece:
                return
            got += len(piece)
            yield piece

    def bytes_past_the_body(self) -> bool:
        """Whether bytes followed a Content-Length body already (a length that lies)."""
        return self._connection.more_waiting()


def framing(status: int, headers: Headers) -> tuple[int | None, bool]:
    """(Content-Length, chunked) of an answer's body, as RFC 9112, 6.3 frames it."""
    if status in (204, 304):
        return 0, False
    codings = [
        c.strip().lower() for v in headers.get_list("transfer-encoding") for c in v.split(",")
    ]
    if codings:
        if codings[-1] != "chunked":
            return None, False  # read until the connection ends
        return None, True
    lengths = {v.strip() for value in headers.get_list("content-length") for v in value.split(",")}
    if not lengths:
        return None, False
    if len(lengths) > 1:
        raise ProtocolError(f"conflicting Content-Length values ({', '.join(sorted(lengths))})")
    (length,) = lengths
    if not (length.isascii() and length.isdigit()):
        raise ProtocolError(f"malformed Content-Length ({length[:40]!r})")
    return int(length), False


class _Connection:
    """One socket's reads, buffered for the head and chunk lines."""

    def __init__(self, sock: socket.socket, read_timeout: float, *, tls: bool = False) -> None:
        self.sock = sock
        self.read_timeout = read_timeout
        self.tls = tls
        self._read_bytes = TLS_READ_BYTES if tls else READ_BYTES
        self._buffer = b""
        self._ended = False

    def _recv(self, most: int | None = None) -> bytes:
        if self._ended:
            return b""
        self.sock.settimeout(self.read_timeout)
        try:
            data = self.sock.recv(self._read_bytes if most is None else min(most, self._read_bytes))
        except TimeoutError as exc:
            raise ReadTimeout("timed out waiting for data") from exc
        except OSError as exc:
            if not (self.tls and _tls_closed(exc)):
                raise ReadError(_said(exc)) from exc
            data = b""  # without close_notify too: the framing says whether it was cut
        if not data:
            self._ended = True
        return data

    def read_some(self, most: int | None = None) -> bytes:
        """What is buffered, else one read of at most `most` bytes (the read size if None)."""
        if self._buffer:
            data, self._buffer = self._buffer, b""
            return data
        return self._recv(most)

    def read_until(self, mark: bytes, limit: int, what: str, most: int | None = None) -> bytes:
        """The bytes up to `mark` (consumed, not returned); ProtocolError past `limit`.
        `most`: the size of each read (the read size if None)."""
        start = 0
        while True:
            found = self._buffer.find(mark, start)
            if found >= 0:
                line, self._buffer = self._buffer[:found], self._buffer[found + len(mark) :]
                return line
            if len(self._buffer) > limit:
                raise ProtocolError(f"{what} longer than {limit} bytes")
            start = max(0, len(self._buffer) - len(mark) + 1)
            data = self._recv(most)
            if not data:
                raise ProtocolError(f"the server closed the connection in the {what}")
            self._buffer += data

    def read_exactly(self, count: int) -> Iterator[bytes]:
        while count > 0:
            data = self.read_some()
            if not data:
                raise ProtocolError("the server closed the connection mid-chunk")
            if len(data) > count:
                data, self._buffer = data[:count], data[count:] + self._buffer
            count -= len(data)
            yield data

    def chunks(self) -> Iterator[bytes]:
        """A chunked body's data (RFC 9112, 7.1); its trailer fields are read and dropped."""
        while True:
            line = self.read_until(b"\r\n", MAX_HEAD_BYTES, "chunk size line")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"malformed chunk size ({size_text[:40]!r})") from None
            if size < 0 or not size_text.isalnum():
                raise ProtocolError(f"malformed chunk size ({size_text[:40]!r})")
            if size == 0:
                while self.read_until(b"\r\n", MAX_HEAD_BYTES, "trailer"):
                    pass
                return
            yield from self.read_exactly(size)
            if self.read_until(b"\r\n", 2, "chunk end"):
                raise ProtocolError("chunk data longer than its size")

    def more_waiting(self) -> bool:
        if self._buffer:
            return True
        if self.tls:
            if self.sock.pending():  # type: ignore[attr-defined]
                return True
            self.sock.setblocking(False)
            try:
                return bool(self.sock.recv(1))
            except OSError:  # nothing waiting (an SSLWantReadError), or closed
                return False
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:
            return False


def _tls_closed(exc: OSError) -> bool:
    """Whether a TLS read's error is the peer's end of the stream."""
    import ssl

    return isinstance(exc, ssl.SSLZeroReturnError | ssl.SSLEOFError)


def _said(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class ProxyRoute(Protocol):
    """How a client reaches a server through a proxy (stores/proxied.py's stream): given
    by the client's maker, so this module never imports the proxy's HTTP library."""

    def __call__(
        self,
        proxy: Proxy,
        url: Url,
        fields: Mapping[str, str],
        timeouts: Timeouts,
        trust: Callable[[], ssl.SSLContext],
        *,
        on_socket: Callable[[socket.socket], None] | None = None,
    ) -> AbstractContextManager[Response]: ...


class Client:
    """Makes exchanges; shared by the threads of one process. `max_connections` bounds the
    connections open at once; `trust` makes the TLS context, at each https exchange (the
    caller caches it), and raises `trust_errors`, passed on as they are, when it cannot.

    `env`: where the proxy variables are read (the process's environment by default)."""

    def __init__(
        self,
        *,
        headers: Mapping[str, str],
        trust: Callable[[], ssl.SSLContext],
        trust_errors: tuple[type[Exception], ...] = (),
        max_connections: int,
        env: Mapping[str, str] | None = None,
        through_proxy: ProxyRoute | None = None,
    ) -> None:
        self.headers = dict(headers)
        self._trust, self._trust_errors = trust, trust_errors
        self._slots = threading.BoundedSemaphore(max_connections)
        self._proxies = Proxies(os.environ if env is None else env)
        self._through_proxy = through_proxy

    def close(self) -> None:
        """Nothing is pooled: every exchange closes its own connection."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def stream(
        self,
        url: Url,
        headers: Mapping[str, str],
        timeouts: Timeouts,
        *,
        on_socket: Callable[[socket.socket], None] | None = None,
    ) -> Iterator[Response]:
        """A GET of `url` with `headers` (besides the client's; values sent as latin-1),
        its answer's head read; the connection closes on leaving. `on_socket` is handed
        each socket as soon as it exists, the TLS one before its handshake."""
        fields = self._fields(url, headers)
        if not self._slots.acquire(timeout=max(timeouts.pool, 0.0)):
            raise PoolTimeout("timed out waiting for a free connection")
        try:
            proxy = self._proxies.for_url(url)
            if proxy is not None:
                if self._through_proxy is None:
                    raise InvalidRequest(
                        f"a proxy is set for {url.host} and this client has no route through one"
                    )
                with self._through_proxy(
                    proxy, url, fields, timeouts, self._trust, on_socket=on_socket
                ) as response:
                    yield response
                return
            request = _request(url, fields)
            sock = self._connect(url, timeouts, on_socket)
            try:
                connection = _Connection(sock, timeouts.read, tls=url.scheme == "https")
                self._send(sock, request, timeouts.read)
                yield _read_head(url, connection)
            finally:
                with suppress(OSError):
                    sock.close()
        finally:
            self._slots.release()

    def _fields(self, url: Url, headers: Mapping[str, str]) -> dict[str, str]:
        """The request's header fields, Host first; InvalidRequest when one cannot be sent."""
        fields = {"Host": url.host_header, **self.headers, **headers}
        if url.authorization and not any(name.lower() == "authorization" for name in fields):
            fields["Authorization"] = url.authorization
        for name, value in fields.items():
            if not _token(name) or any(c in value for c in "\r\n\0"):
                raise InvalidRequest(f"cannot send the header {name!r}: invalid characters")
            try:
                value.encode("latin-1")
            except UnicodeEncodeError:
                raise InvalidRequest("cannot send a header: characters past latin-1") from None
        return fields

    def _connect(
        self, url: Url, timeouts: Timeouts, on_socket: Callable[[socket.socket], None] | None
    ) -> socket.socket:
        try:
            sock = socket.create_connection((url.host, url.port), timeout=timeouts.connect)
        except TimeoutError as exc:
            raise ConnectTimeout("timed out connecting") from exc
        except OSError as exc:
            raise ConnectError(_said(exc)) from exc
        if on_socket is not None:
            on_socket(sock)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if url.scheme != "https":
                return sock
            # Raised as it is (no server is to blame when there is no CA bundle to load).
            context = self._trust()
            tls = context.wrap_socket(sock, server_hostname=url.host, do_handshake_on_connect=False)
            sock = tls
            if on_socket is not None:
                on_socket(tls)
            tls.settimeout(timeouts.connect)
            tls.do_handshake()
            return tls
        except BaseException as exc:
            sock.close()
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout("timed out connecting") from exc
            # A failed handshake (an ssl.SSLError) is an OSError too.
            if isinstance(exc, OSError) and not isinstance(exc, self._trust_errors):
                raise ConnectError(_said(exc)) from exc
            raise

    def _send(self, sock: socket.socket, request: bytes, timeout: float) -> None:
        sock.settimeout(timeout)
        try:
            sock.sendall(request)
        except TimeoutError as exc:
            raise ReadTimeout("timed out sending the request") from exc
        except OSError as exc:
            raise ReadError(_said(exc)) from exc


def _request(url: Url, fields: Mapping[str, str]) -> bytes:
    lines = [f"GET {url.target} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _token(name: str) -> bool:
    return (
        bool(name) and name.isascii() and all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in name)
    )


def _read_head(url: Url, connection: _Connection) -> Response:
    """The final answer's head; informational (1xx) answers before it are skipped."""
    while True:
        head = connection.read_until(b"\r\n\r\n", MAX_HEAD_BYTES, "response head", HEAD_READ_BYTES)
        lines = head.split(b"\r\n")
        status = _status(lines[0])
        fields = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                raise ProtocolError(f"malformed header line ({line[:80]!r})")
            fields.append((name, value.strip(b" \t")))
        if status >= 200 or status == 101:
            return Response(url, status, Headers(fields), connection)


def _status(line: bytes) -> int:
    version, _, rest = line.partition(b" ")
    code = rest[:3]
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or not code.isdigit()
        or rest[3:4]
        not in (
            b"",
            b" ",
        )
    ):
        raise ProtocolError(f"not an HTTP/1.1 answer ({line[:80]!r})")
    return int(code)


class Proxy(NamedTuple):
    """A proxy's URL as configured (http://, https://, socks5:// ..., credentials included)."""

    text: str


class Proxies:
    """Which proxy, if any, an URL goes through, from the environment as curl and httpx
    read it (lower case names first); on macOS, the system's settings when the
    environment names none."""

    def __init__(self, env: Mapping[str, str]) -> None:
        def named(name: str) -> str:
            return env.get(name.lower()) or env.get(name.upper()) or ""

        found = {scheme: named(f"{scheme}_proxy") or named("all_proxy") for scheme in DEFAULT_PORTS}
        bypass = named("no_proxy")
        if not any(found.values()) and sys.platform == "darwin":
            found, bypass = _system_proxies()
        self._proxies = {scheme: _proxy(url) for scheme, url in found.items() if url}
        self._bypass = [h.strip().lower() for h in bypass.split(",") if h.strip()]

    def for_url(self, url: Url) -> Proxy | None:
        proxy = self._proxies.get(url.scheme)
        if proxy is None or self._bypassed(url):
            return None
        return proxy

    def _bypassed(self, url: Url) -> bool:
        host = url.host.lower()
        for entry in self._bypass:
            if entry == "*":
                return True
            name, _, port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
            if port and port != str(url.port):
                continue
            name = name.lstrip(".")
            if host == name or host.endswith("." + name):
                return True
        return False


def _proxy(text: str) -> Proxy:
    # A bare host:port is an http proxy, as curl and httpx read it; httpx refuses, with a
    # message, a proxy URL it cannot use (the download fails rather than going direct).
    return Proxy(text if "://" in text else "http://" + text)


def _system_proxies() -> tuple[dict[str, str], str]:
    """macOS's proxy settings (System Settings, PAC files aside), as urllib reads them."""
    import urllib.request  # macOS only, and only with no proxy variable set

    found = urllib.request.getproxies()
    bypass = ""
    with suppress(ImportError, AttributeError):
        from _scproxy import _get_proxy_settings  # type: ignore[import-not-found]

        settings = _get_proxy_settings()
        bypass = ",".join(str(h) for h in settings.get("exceptions", ()))
    return {scheme: found.get(scheme, "") for scheme in DEFAULT_PORTS}, bypass
