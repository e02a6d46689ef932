"""Stores in S3-compatible object storage: `s3://bucket/prefix/`, on AWS or another engine,
read and written.

Its server keys: `endpoint_url` (another engine, addressed path-style), `region`,
`profile` (a section of the AWS config files) and `anonymous` (unsigned requests).

A GET for the key is signed locally (a presigned URL: no request is made, and no client is
built: stores/s3/presign.py; botocore only resolves credentials that are not plain keys),
and transfer.download fetches it like any HTTP
file, with its deadlines, watchdog, retries, size cap and redirect rules. On loopback
against SeaweedFS this was at least as fast as streaming botocore's own get_object
(docs/symbol-stores.md, "S3-compatible storage").

An object whose user metadata carries `sha256` (the `x-amz-meta-sha256` header, which
`dsymfind publish` writes) must hash to it. A refusal (401, 403, a bad signature or key,
no credentials) is AuthFailed and never NotFound, so nothing remembers it as absent and
fixed credentials work at once. Publishing writes through stores/s3/upload.py, with a
botocore client.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dsymfind.errors import ConfigError, DsymfindError
from dsymfind.stores import layouts
from dsymfind.stores.base import (
    AuthFailed,
    Fetched,
    Options,
    Surroundings,
    Terms,
    TransferError,
    nothing_under,
    redact,
)
from dsymfind.stores.s3 import api as s3_api
from dsymfind.stores.s3 import presign as s3_presign
from dsymfind.stores.s3.api import S3Options

if TYPE_CHECKING:
    from dsymfind.stores.s3.upload import S3Writer
    from dsymfind.stores.transfer import Session

# How a server's url of this kind is written, for messages.
URL_FORMS = ("s3://BUCKET/PREFIX/",)
SETTING_KEYS = ("endpoint_url", "region", "profile", "anonymous")
# Presigned GETs go through transfer.download, which continues a cut transfer.
RESUMABLE = True
# An object store's usual layout, Sentry's symsorter, which `dsymfind publish` writes.
DEFAULT_LAYOUT = layouts.UNIFIED
CREDENTIALS_FIX = (
    "check the S3 credentials this server uses: its profile, or AWS_ACCESS_KEY_ID "
    "and AWS_SECRET_ACCESS_KEY, and that they may read the bucket"
)

# A presigned URL is checked when each request starts: it must outlive every attempt of the
# download, and no more (it is a bearer token for that one key). SigV4 allows 7 days at most.
PRESIGN_SLACK = 60
PRESIGN_MAX = 7 * 86400
# Answers that transfer.py can only report by status; botocore reads the S3 error code
# (SignatureDoesNotMatch, ExpiredToken, ...) from the body, which says what to fix.
_EXPLAINED_STATUSES = frozenset({301, 400, 401, 403})
_ERROR_CODE = re.compile(rb"<Code>([A-Za-z0-9.]{1,64})</Code>")


def check_location(where: str, url: str) -> str:
    try:
        s3_api.parse_location(url)
    except DsymfindError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return url


def default_name(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc


def read_settings(where: str, table: Mapping[str, object]) -> dict[str, object]:
    """The connection keys of an s3:// server (or of publish's --endpoint-url and friends)."""
    anonymous = table.get("anonymous", False)
    if not isinstance(anonymous, bool):
        raise ConfigError(f"{where}.anonymous: expected true or false")
    profile = _profile(f"{where}.profile", table.get("profile"))
    if anonymous and profile is not None:
        raise ConfigError(f"{where}.profile: not used with anonymous = true (unsigned requests)")
    return {
        "endpoint_url": _endpoint_url(f"{where}.endpoint_url", table.get("endpoint_url")),
        "region": _region(f"{where}.region", table.get("region")),
        "profile": profile,
        "anonymous": anonymous,
    }


def _endpoint_url(where: str, value: object) -> str | None:
    """An S3-compatible engine's address: http(s), a host, no credentials, query or fragment."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected an http:// or https:// URL, got {value!r}")
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - parsed on access: a bad port raises here
    except ValueError as exc:
        raise ConfigError(f"{where}: {value!r} is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{where}: expected an http:// or https:// URL with a host, got {value!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"{where}: keys do not go in the URL (use profile, or the AWS_* environment)"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: {value!r} has a query or fragment")
    return value


# Region names: AWS's are lowercase words and digits; engines name theirs freely (garage).
_REGION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# A profile is a section name of the AWS config files: anything but brackets and controls.
_PROFILE_EDGE = r"[^\s\[\]\x00-\x1f\x7f]"
_PROFILE = re.compile(f"{_PROFILE_EDGE}(?:[^\\[\\]\\x00-\\x1f\\x7f]*{_PROFILE_EDGE})?")


def _region(where: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _REGION.fullmatch(value):
        raise ConfigError(f"{where}: expected a region name such as us-east-1, got {value!r}")
    return value


def _profile(where: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _PROFILE.fullmatch(value):
        raise ConfigError(
            f"{where}: expected the name of a profile in the AWS config files, got {value!r}"
        )
    return value


def open_reader(location: str, session: Session, options: Options) -> S3Reader:
    return S3Reader(location, session, options)


def open_writer(location: str, options: Options) -> S3Writer:
    from dsymfind.stores.s3 import upload as s3_upload

    return s3_upload.target_for(location, S3Options.of(options.settings))


def surroundings(location: str, options: Options) -> Surroundings | None:
    """Whether any object lies under the location's prefix, and what lies beside it
    (base.nothing_under); None when the listing is refused or fails."""
    from botocore import exceptions

    place = s3_api.parse_location(location)
    settings = S3Options.of(options.settings)
    try:
        client = s3_api.client(
            endpoint_url=settings.endpoint_url,
            region=settings.region,
            profile=settings.profile,
            anonymous=settings.anonymous,
        )
        under = client.list_objects_v2(Bucket=place.bucket, Prefix=place.prefix, MaxKeys=1)
        if under.get("KeyCount") or not place.prefix:
            return Surroundings(bool(under.get("KeyCount")))
        parent = s3_api.Location(place.bucket, place.prefix.rstrip("/").rpartition("/")[0])
        parent = parent._replace(prefix=parent.prefix + "/" if parent.prefix else "")
        listed = client.list_objects_v2(Bucket=place.bucket, Prefix=parent.prefix, Delimiter="/")
    except (exceptions.BotoCoreError, exceptions.ClientError):
        return None
    prefixes = [str(p.get("Prefix", "")) for p in listed.get("CommonPrefixes", [])]
    beside = [parent._replace(prefix=p).url() for p in prefixes if p != place.prefix]
    return nothing_under(parent.url(), beside)


class S3Reader:
    def __init__(self, location: str, session: Session, options: Options) -> None:
        self.location = location
        self.place = s3_api.parse_location(location)
        self.session = session
        self.name = options.name or self.place.bucket
        self.settings = S3Options.of(options.settings)
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
        from dsymfind.stores import transfer

        shown = self.where(key)
        object_key = self.object_key(key)
        expires = min(PRESIGN_MAX, math.ceil(terms.limits.total_timeout) + PRESIGN_SLACK)
        url = s3_presign.presigned_url(self.settings, self.place.bucket, object_key, expires, shown)
        try:
            got = transfer.download(
                self.session.http_client, url, dest, terms, headers=self.headers
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
        explained = s3_api.classify_code(code, refused.status, shown)
        # The code decides the kind only when it agrees, or refuses us: an odd code must
        # not turn a refusal into "try again later".
        if type(explained) is type(refused) or isinstance(explained, AuthFailed):
            return explained
        return refused
