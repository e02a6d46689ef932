"""S3-compatible object storage: locations, a botocore client, and what its errors mean.

Shared by the s3 kind's Reader (stores/s3/store.py) and its Writer (stores/s3/upload.py).
botocore is imported inside the functions only: config_reader.py checks `s3://` URLs with
parse_location on paths that must not pay for botocore (its import and models cost a few
hundred ms).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from dsymfind import __version__
from dsymfind.errors import DsymfindError
from dsymfind.stores import base

SCHEME = "s3"
# Region used to sign for an S3-compatible engine when none is configured: engines such as
# SeaweedFS or MinIO accept any region name, and SigV4 needs one.
DEFAULT_REGION = "us-east-1"
# botocore's own retries (standard mode): enough for a brief 503 SlowDown, few enough that
# a dead endpoint fails within the helper's patience, as base.ATTEMPTS does for HTTP.
MAX_ATTEMPTS = 3

# AWS's bucket naming rules, plus `_`, which older buckets and several engines accept.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")

# The advice on every refusal: `shown` names the server, and the fetcher prefixes its name.
CHECK_CREDENTIALS = "check the credentials for this server"
# S3 error codes (ClientError's Error.Code) by what they mean to a fetch.
NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})
AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "TokenRefreshRequired",
        "InvalidToken",
        "AllAccessDisabled",
        "AccountProblem",
        "401",
        "403",
    }
)
RETRYABLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling"}
)


@dataclass(frozen=True)
class S3Options:
    """How an S3-compatible store is reached: None is botocore's default."""

    endpoint_url: str | None = None  # an S3-compatible engine, addressed path-style
    region: str | None = None
    profile: str | None = None  # a section of the shared AWS config and credentials files
    anonymous: bool = False  # unsigned requests: a public bucket

    @classmethod
    def of(cls, settings: Mapping[str, object]) -> S3Options:
        """From a server's settings, as read_settings checked them."""
        return cls(
            endpoint_url=_optional_text(settings.get("endpoint_url")),
            region=_optional_text(settings.get("region")),
            profile=_optional_text(settings.get("profile")),
            anonymous=settings.get("anonymous") is True,
        )


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) else None


class Location(NamedTuple):
    """A bucket and a key prefix ("" or ending in "/") below which a store keeps its keys."""

    bucket: str
    prefix: str

    def key(self, relative: str) -> str:
        return self.prefix + relative

    def url(self, relative: str = "") -> str:
        """`s3://bucket/prefix/relative`, fit for messages (it holds no credentials)."""
        return f"{SCHEME}://{self.bucket}/{self.prefix}{relative}"


def parse_location(url: str) -> Location:
    """`s3://bucket/` or `s3://bucket/prefix/` (the trailing slash may be left out)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise DsymfindError(f"{url!r}: not a valid s3:// URL ({exc})") from None
    if parts.scheme.lower() != SCHEME:
        raise DsymfindError(f"{url!r}: expected an s3://bucket/prefix/ URL")
    if "@" in parts.netloc or ":" in parts.netloc:
        # Keys in a URL would end up in logs and `dsymfind config`; the endpoint has its key.
        raise DsymfindError(
            f"{url!r}: an s3:// URL names a bucket only (no user, password or port; "
            "set endpoint_url for another engine)"
        )
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise DsymfindError(f"{url!r}: an s3:// URL has no query or fragment")
    bucket = parts.netloc
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise DsymfindError(
            f"{url!r}: {bucket!r} is not a bucket name (3 to 63 lowercase letters, digits, "
            "dots, hyphens or underscores)"
        )
    prefix = parts.path.removeprefix("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    segments = prefix.split("/")[:-1]
    # Empty, "." and ".." segments: HTTP clients and proxies may normalise them away, so the
    # key signed and the key asked for would differ.
    if any(segment in ("", ".", "..") for segment in segments):
        raise DsymfindError(f"{url!r}: the prefix has an empty, '.' or '..' part")
    if any(ord(c) < 0x20 or c == "\x7f" or c == "\\" for c in prefix):
        raise DsymfindError(f"{url!r}: the prefix has a control character or a backslash")
    return Location(bucket, prefix)


def client(
    *,
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    anonymous: bool,
    connect_timeout: float = 3.0,
    read_timeout: float = 5.0,
) -> Any:
    """A botocore S3 client.

    Credentials come from botocore's standard chain (environment, shared credentials and
    config files, SSO, container and instance metadata), from `profile`'s section when it
    is given; `anonymous` sends unsigned requests (public buckets) and looks for none.
    An `endpoint_url` (an S3-compatible engine) is addressed path-style, which every engine
    serves without wildcard DNS. Raises botocore's exceptions (ProfileNotFound, ...): give
    them to classify().
    """
    import botocore.session
    from botocore import UNSIGNED
    from botocore.config import Config

    session = botocore.session.Session(profile=profile)
    config = Config(
        user_agent_extra=f"dsymfind/{__version__}",
        signature_version=UNSIGNED if anonymous else "s3v4",
        s3={"addressing_style": "path" if endpoint_url else "auto"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
    )
    chosen_region = region or session.get_config_variable("region")
    if not chosen_region and endpoint_url:
        chosen_region = DEFAULT_REGION
    made = session.create_client(
        "s3", region_name=chosen_region or None, endpoint_url=endpoint_url, config=config
    )
    made.meta.events.register("before-call.s3.HeadBucket", _no_region_redirect)
    return made


def _no_region_redirect(context: dict[str, Any], **_: object) -> None:
    """Bound botocore's region redirector to one level (botocore/utils.py,
    S3RegionRedirectorv2): on a redirect that names no region, it asks HeadBucket for one,
    and an endpoint that redirects that too sent it round until a RecursionError. Marked
    as redirected already, a HeadBucket is never redirected: its answer names the region
    or the redirect fails as the error it is."""
    redirect = context.get("s3_redirect")
    if isinstance(redirect, dict):
        redirect["redirected"] = True


def error_code(error: BaseException) -> tuple[str, int | None]:
    """A botocore ClientError's S3 error code and HTTP status; ("", None) for anything else."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return "", None
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code, status if isinstance(status, int) else None


def classify_code(code: str, status: int | None, shown: str) -> base.TransferError:
    """What an S3 error code (or, without one, an HTTP status) means to a fetch."""
    if code in NOT_FOUND_CODES or status == 404:
        return base.NotFound(f"{shown}: not found ({code or status})", status=status)
    if code in AUTH_CODES or status in (401, 403):
        return base.AuthFailed(
            f"{shown}: access denied ({code or status}); {CHECK_CREDENTIALS}", status=status
        )
    if code in RETRYABLE_CODES or (status is not None and status >= 500) or status == 429:
        return base.TransferError(
            f"{shown}: storage busy or failing ({code or status})", retryable=True, status=status
        )
    return base.TransferError(
        f"{shown}: unexpected answer ({code or status})", retryable=False, status=status
    )


def classify(error: BaseException, shown: str) -> base.TransferError:
    """What a botocore (or connection) error means to a fetch, as the TransferError the
    Reader protocol speaks; `shown` names the server (and key) in the message."""
    from botocore import exceptions as bx

    if isinstance(error, base.TransferError):
        return error
    if isinstance(error, bx.ClientError):
        return classify_code(*error_code(error), shown)
    if isinstance(error, bx.NoCredentialsError | bx.PartialCredentialsError):
        return base.AuthFailed(f"{shown}: no usable credentials; {CHECK_CREDENTIALS}")
    if isinstance(error, bx.ProfileNotFound):
        return base.AuthFailed(f"{shown}: {error}; {CHECK_CREDENTIALS}")
    if isinstance(error, bx.NoRegionError):
        return base.TransferError(f"{shown}: no region configured", retryable=False)
    if isinstance(
        error,
        bx.ConnectTimeoutError
        | bx.ReadTimeoutError
        | bx.EndpointConnectionError
        | bx.ConnectionClosedError
        | bx.ProxyConnectionError
        | bx.IncompleteReadError
        | bx.ResponseStreamingError
        | TimeoutError
        | ConnectionError,
    ):
        return base.TransferError(f"{shown}: {_describe(error)}", retryable=True)
    if isinstance(error, bx.SSLError):
        # An untrusted certificate stays untrusted: retrying only delays the message.
        return base.TransferError(f"{shown}: {_describe(error)}", retryable=False)
    return base.TransferError(f"{shown}: {_describe(error)}", retryable=False)


def _describe(error: BaseException) -> str:
    return str(error) or type(error).__name__
