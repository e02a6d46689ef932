"""Stores in S3-compatible object storage: `s3://bucket/prefix/`, on AWS or another engine.

botocore signs a GET for the key locally (a presigned URL: no request is made), and
transfer.download fetches it like any HTTP file, with its deadlines, watchdog, retries,
size cap and redirect rules. On loopback against SeaweedFS this was at least as fast as
streaming botocore's own get_object (docs/symbol-stores.md, "S3-compatible storage").

An object whose user metadata carries `sha256` (the `x-amz-meta-sha256` header, which
`dsymfind publish` writes) must hash to it. A refusal (401, 403, a bad signature or key,
no credentials) is AuthFailed and never NotFound, so nothing remembers it as absent and
fixed credentials work at once.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dsymfind.fetch import s3, transfer
from dsymfind.fetch.sources import (
    AuthFailed,
    Fetched,
    Limits,
    Options,
    S3Options,
    Session,
    Terms,
    TransferError,
    redact,
)

# A presigned URL is checked when each request starts: it must outlive every attempt of the
# download, and no more (it is a bearer token for that one key). SigV4 allows 7 days at most.
PRESIGN_SLACK = 60
PRESIGN_MAX = 7 * 86400
# Answers that transfer.py can only report by status; botocore reads the S3 error code
# (SignatureDoesNotMatch, ExpiredToken, ...) from the body, which says what to fix.
_EXPLAINED_STATUSES = frozenset({301, 400, 401, 403})
_ERROR_CODE = re.compile(rb"<Code>([A-Za-z0-9.]{1,64})</Code>")


class S3Source:
    def __init__(self, location: str, session: Session, options: Options) -> None:
        self.location = location
        self.place = s3.parse_location(location)
        self.session = session
        self.name = options.name or self.place.bucket
        self.settings = options.s3
        self.headers = dict(options.headers)

    def object_key(self, key: str) -> str:
        """The key below the location's prefix; refused when it is not a plain relative key
        (a `template` layout's absolute URL, or a path that HTTP clients would rewrite)."""
        parts = key.split("/")
        if "://" in key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise TransferError(
                f"{self.place.url()}: refused key {key!r}: not a relative object key",
                retryable=False,
            )
        return self.place.key(key)

    def where(self, key: str) -> str:
        return self.place.url(key)

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        shown = self.where(key)
        object_key = self.object_key(key)
        try:
            client = _client(self.settings, terms.limits)
            url = client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.place.bucket, "Key": object_key},
                ExpiresIn=min(PRESIGN_MAX, math.ceil(terms.limits.total_timeout) + PRESIGN_SLACK),
            )
        except (BotoCoreError, ClientError) as exc:
            raise s3.classify(exc, shown) from exc
        try:
            got = transfer.download_on_terms(
                self.session.http_client, url, dest, self.headers, terms
            )
        except TransferError as exc:
            # Name the object, not the endpoint's URL; keep the kind and its retryability.
            exc.args = (str(exc).replace(redact(url), shown),)
            if exc.status in _EXPLAINED_STATUSES:
                raise self._explained(exc, shown) from exc
            raise
        return Fetched(shown, got.size, got.content_type, got.attempts, got.sha256)

    def _explained(self, refused: TransferError, shown: str) -> TransferError:
        """The refusal with the S3 error code its body names: "access denied (HTTP 403)"
        does not tell a wrong secret from a missing grant. No second request: its time
        would lie outside the transfer's deadline, which bounds the body read."""
        found = _ERROR_CODE.search(refused.answer)
        code = found[1].decode() if found is not None else ""
        if refused.status == 301 or code == "PermanentRedirect":
            return TransferError(
                f"{shown}: the bucket is in another region; set `region` for server {self.name!r}",
                retryable=False,
                status=refused.status,
            )
        if not code:
            return refused
        explained = s3.classify_code(code, refused.status, shown)
        # The code decides the kind only when it agrees, or refuses us: an odd code must
        # not turn a refusal into "try again later".
        if type(explained) is type(refused) or isinstance(explained, AuthFailed):
            return explained
        return refused


_clients: dict[tuple[object, ...], Any] = {}
_clients_lock = threading.Lock()


def _client(settings: S3Options, limits: Limits) -> Any:
    """One botocore client per process and configuration: making one loads botocore's
    service model (about 0.2 s), which a `dsymfind fetch` of many UUIDs would pay each time.
    botocore clients may be shared between threads."""
    config = (
        settings.endpoint_url,
        settings.region,
        settings.profile,
        settings.anonymous,
        limits.connect_timeout,
        limits.first_byte_timeout,
    )
    with _clients_lock:
        made = _clients.get(config)
        if made is None:
            made = s3.client(
                endpoint_url=settings.endpoint_url,
                region=settings.region,
                profile=settings.profile,
                anonymous=settings.anonymous,
                connect_timeout=limits.connect_timeout,
                read_timeout=limits.first_byte_timeout,
            )
            _clients[config] = made
        return made


SOURCE = S3Source
