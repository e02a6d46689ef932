"""SigV4 query signing of an S3 GET: a presigned URL, made with hmac and hashlib alone.

AWS's public specification ("Authenticating Requests: Using Query Parameters", Amazon S3
API Reference): the canonical request of a GET whose only signed header is `host`, with the
payload `UNSIGNED-PAYLOAD` (a presigned URL cannot know its body), signed with the key that
HMAC-SHA256 derives from the secret, the date, the region and the service. The URL's
parameters come in botocore's order, so that its URLs are the ones S3SigV4QueryAuth makes
(tests/stores/s3/test_s3_sigv4.py holds it to that). Importing botocore for this costs tens of
milliseconds before the first byte.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import urllib.parse
from typing import NamedTuple

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
SERVICE = "s3"
_TIMESTAMP = "%Y%m%dT%H%M%SZ"
# The specification's unreserved characters: everything else in a parameter is %-encoded.
_UNRESERVED = "-_.~"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Keys(NamedTuple):
    """What signs a request: an access key, its secret, and a session token if temporary."""

    access_key: str
    secret_key: str
    token: str | None = None


def presigned_get(url: str, keys: Keys, region: str, expires: int, now: float | None = None) -> str:
    """`url` (no query of its own) signed for a GET within `expires` seconds of `now`."""
    parts = urllib.parse.urlsplit(url)
    stamp = time.strftime(_TIMESTAMP, time.gmtime(time.time() if now is None else now))
    scope = f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"
    params = [
        ("X-Amz-Algorithm", ALGORITHM),
        ("X-Amz-Credential", f"{keys.access_key}/{scope}"),
        ("X-Amz-Date", stamp),
        ("X-Amz-Expires", str(expires)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if keys.token is not None:
        params.append(("X-Amz-Security-Token", keys.token))
    encoded = [(_encode(name), _encode(value)) for name, value in params]
    canonical = "\n".join(
        [
            "GET",
            parts.path,  # S3's path is signed as sent: not normalised, not encoded again
            "&".join(f"{name}={value}" for name, value in sorted(encoded)),
            f"host:{_host(parts)}\n",
            "host",
            UNSIGNED_PAYLOAD,
        ]
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{digest}"
    key = _signing_key(keys.secret_key, stamp[:8], region)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    query = "&".join(f"{name}={value}" for name, value in encoded)
    return urllib.parse.urlunsplit(parts._replace(query=f"{query}&X-Amz-Signature={signature}"))


def _encode(text: str) -> str:
    return urllib.parse.quote(text, safe=_UNRESERVED)


def _host(parts: urllib.parse.SplitResult) -> str:
    """The Host header a client sends: lowercase, IPv6 in brackets, no default port."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


def _signing_key(secret: str, date: str, region: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, SERVICE, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key
