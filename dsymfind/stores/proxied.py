"""Downloads through a proxy, by httpx: the answer looks to transfer.py as http11's does.

http11.py reaches servers directly; a proxy (http://, https:// or SOCKS, from the
environment or macOS's settings) is httpx's to speak to, as it is everywhere else in the
project. Importing httpx costs a process about 60 ms, so this module loads only when a
proxy applies to the URL fetched. SOCKS proxies need httpx's `socks` extra (socksio); without
it the download fails with a line saying so, never going around the proxy.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress

import httpx

from dsymfind.stores import http11


class Response(http11.Response):
    """An answer through a proxy, read as it arrives: http11's, its body from httpx."""

    def __init__(self, url: http11.Url, answer: httpx.Response) -> None:
        # Not http11's __init__: there is no socket of ours to read.
        self.url, self.status_code = url, answer.status_code
        self.headers = http11.Headers(list(answer.headers.raw))
        self._answer = answer
        self._length, self._chunked = http11.framing(answer.status_code, self.headers)
        self.is_stream_consumed = False

    def pieces(self, read_timeout: float) -> Iterator[bytes]:
        """The body's bytes as they arrive; each read waits the exchange's read timeout
        (httpx fixes it per request), the caller's deadline watchdog bounds the whole."""
        self.is_stream_consumed = True
        with _errors_mapped():
            yield from self._answer.iter_raw()

    def bytes_past_the_body(self) -> bool:
        """httpx (h11) stops at Content-Length and drops the rest with the connection; a
        body that lies about its length is still refused by the verification after it."""
        return False


@contextmanager
def stream(
    proxy: http11.Proxy,
    url: http11.Url,
    fields: Mapping[str, str],
    timeouts: http11.Timeouts,
    trust: Callable[[], ssl.SSLContext],
    *,
    on_socket: Callable[[socket.socket], None] | None = None,
) -> Iterator[Response]:
    """A GET of `url` through `proxy` with `fields` (http11.Client's, checked), its head
    read; the connection closes on leaving. `trust` (its errors passed on as they are) is
    asked only when TLS is spoken, to the server or to the proxy."""
    secure = url.scheme == "https"
    headers = [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in fields.items()
        if name.lower() != "host"  # httpx writes it, and the absolute form's
    ]
    timeout = httpx.Timeout(
        connect=timeouts.connect, read=timeouts.read, write=timeouts.read, pool=timeouts.pool
    )
    with _errors_mapped():
        through = httpx.Proxy(
            proxy.text, ssl_context=trust() if proxy.text.lower().startswith("https:") else None
        )
        client = httpx.Client(
            proxy=through, verify=trust() if secure else False, timeout=timeout, trust_env=False
        )
    with client, _errors_mapped(), client.stream("GET", url.text, headers=headers) as answer:
        if on_socket is not None:
            network = answer.extensions.get("network_stream")
            with suppress(AttributeError, TypeError):
                sock = network.get_extra_info("socket") if network is not None else None
                if isinstance(sock, socket.socket):
                    on_socket(sock)
        yield Response(url, answer)


@contextmanager
def _errors_mapped() -> Iterator[None]:
    """httpx's failures as http11's, which transfer.py tells apart."""
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise http11.ConnectTimeout(str(exc) or "timed out connecting") from exc
    except httpx.PoolTimeout as exc:
        raise http11.PoolTimeout(str(exc) or "timed out waiting for a connection") from exc
    except httpx.TimeoutException as exc:
        raise http11.ReadTimeout(str(exc) or "timed out waiting for data") from exc
    except (httpx.ConnectError, httpx.ProxyError) as exc:
        raise http11.ConnectError(f"through the proxy: {exc}") from exc
    except httpx.RemoteProtocolError as exc:
        raise http11.ProtocolError(str(exc)) from exc
    except httpx.TransportError as exc:
        if isinstance(exc, httpx.UnsupportedProtocol):
            raise http11.InvalidRequest(f"the proxy: {exc}") from exc
        raise http11.ReadError(str(exc) or type(exc).__name__) from exc
    except httpx.InvalidURL as exc:
        raise http11.InvalidRequest(f"the proxy's URL: {exc}") from exc
    except ImportError as exc:  # a SOCKS proxy without socksio installed
        raise http11.InvalidRequest(f"the proxy: {exc}") from exc
    except ValueError as exc:  # httpx refusing a proxy URL's scheme
        raise http11.InvalidRequest(f"the proxy: {exc}") from exc
