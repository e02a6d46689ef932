"""Stores reached over HTTP(S): symbol servers, static file servers, presigned buckets."""

from __future__ import annotations

import urllib.parse

from dsymfind.fetch import transfer
from dsymfind.fetch.sources import Fetched, Options, Session, Terms, redact

# Characters a key may carry into a URL path as they are; everything else is escaped.
_PATH_SAFE = "/-._~"


class HttpSource:
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
        got = transfer.download_on_terms(
            self.session.http_client, self.url(key), dest, self.headers, terms
        )
        return Fetched(redact(got.final_url), got.size, got.content_type, got.attempts, got.sha256)


SOURCE = HttpSource
