"""Stores reached over HTTP(S): symbol servers, static file servers, presigned buckets.

Read only: a server's files are published into what it serves (a folder, a bucket). The
HTTP client (http11.py) loads only when a key is fetched: reading the configuration names
these stores too.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dsymfind.errors import ConfigError
from dsymfind.stores.base import Fetched, Options, Terms, redact

if TYPE_CHECKING:
    from dsymfind.stores.transfer import Session

# How a server's url of this kind is written, for messages.
URL_FORMS = ("http://HOST/PATH/", "https://HOST/PATH/")
SETTING_KEYS: tuple[str, ...] = ()
RESUMABLE = True
DEFAULT_LAYOUT = None
CREDENTIALS_FIX = "check the token its headers refer to"
# Characters a key may carry into a URL path as they are; everything else is escaped.
_PATH_SAFE = "/-._~"


def check_location(where: str, url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        raise ConfigError(f"{where}: {url!r} names no host")
    return url


def default_name(url: str) -> str:
    """Host and port, never the credentials a URL may carry."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def read_settings(where: str, table: Mapping[str, object]) -> dict[str, object]:
    return {}


def open_reader(location: str, session: Session, options: Options) -> HttpReader:
    return HttpReader(location, session, options)


class HttpReader:
    def __init__(self, location: str, session: Session, options: Options) -> None:
        self.location = location if location.endswith("/") else location + "/"
        self.session = session
        self.headers = dict(options.headers)  # tokens: transfer sends them to this origin only
        self.resolve_references = options.resolve_references

    def url(self, key: str) -> str:
        """A key below the location; a URL reference (the template layout) resolved as one."""
        if self.resolve_references:
            return urllib.parse.urljoin(self.location, key)
        return self.location + urllib.parse.quote(key, safe=_PATH_SAFE)

    def where(self, key: str) -> str:
        return redact(self.url(key))

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        from dsymfind.stores import transfer

        return transfer.download(
            self.session.http_client, self.url(key), dest, terms, headers=self.headers
        )
