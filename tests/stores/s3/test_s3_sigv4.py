"""Our SigV4 query signer against botocore's (the same inputs and clock give the same URL,
signature included) and against a real SeaweedFS (it accepts the keys it knows, refuses a
wrong secret)."""

from __future__ import annotations

import datetime
import uuid

import botocore.auth
import httpx
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from support.seaweed import SYMBOLS, SeaweedS3

from dsymfind.stores.s3 import presign as s3_presign
from dsymfind.stores.s3.sigv4 import Keys, presigned_get

# 2026-03-04T05:06:07Z: a date whose fields all differ, and its epoch seconds.
WHEN = datetime.datetime(2026, 3, 4, 5, 6, 7)
WHEN_SECONDS = WHEN.replace(tzinfo=datetime.UTC).timestamp()
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
BODY = b"signed bytes"


def botocores(
    url: str, keys: Keys, region: str, expires: int, monkeypatch: pytest.MonkeyPatch
) -> str:
    """What botocore's S3SigV4QueryAuth makes of the same request at WHEN."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: WHEN)
    request = AWSRequest(method="GET", url=url)
    credentials = Credentials(keys.access_key, keys.secret_key, keys.token)
    botocore.auth.S3SigV4QueryAuth(credentials, "s3", region, expires=expires).add_auth(request)
    return str(request.prepare().url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8333/symbols/ios/a%20b%2Bc~d/%C3%96/debuginfo",
        "https://symbols.s3.amazonaws.com/debuginfo",
        "https://s3.eu-west-1.amazonaws.com/sym.bols/k",
        "https://S3.Example.COM:443/b/k",  # a default port and capitals: not in the Host
        "http://[::1]:9000/b/k",
        "http://host:80/b/k",
    ],
)
@pytest.mark.parametrize(
    "keys",
    [
        Keys("AKIDEXAMPLE", SECRET),
        Keys("ASIATEMPORARY", SECRET, "FQoGZXIvYXdzE+/token=="),
        Keys("AKID/with+odd=chars", "s" * 40),
    ],
)
@pytest.mark.parametrize(("region", "expires"), [("us-east-1", 60), ("garage", 604800)])
def test_the_url_is_botocores_to_the_byte(
    url: str, keys: Keys, region: str, expires: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = presigned_get(url, keys, region, expires, now=WHEN_SECONDS)

    assert ours == botocores(url, keys, region, expires, monkeypatch)


def test_the_clock_signs_when_no_time_is_given() -> None:
    url = presigned_get("http://h/b/k", Keys("AKID", SECRET), "us-east-1", 60)
    stamp = httpx.URL(url).params["X-Amz-Date"]
    signed = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    assert abs(signed - datetime.datetime.now(datetime.UTC)).total_seconds() < 600


# -- a real engine -----------------------------------------------------------------------


@pytest.fixture
def key(s3: SeaweedS3) -> str:
    made = f"t{uuid.uuid4().hex[:12]}/a b+c~d/debuginfo"
    s3.client("ci").put_object(Bucket=SYMBOLS, Key=made, Body=BODY)
    return made


def object_url(s3: SeaweedS3, key: str) -> str:
    return s3_presign.object_url(s3.endpoint_url, "us-east-1", SYMBOLS, key)


def test_seaweedfs_accepts_our_signature(s3: SeaweedS3, key: str) -> None:
    reader = s3.identities["reader"]
    url = presigned_get(
        object_url(s3, key), Keys(reader.access_key, reader.secret_key), "us-east-1", 60
    )

    answer = httpx.get(url)

    assert (answer.status_code, answer.content) == (200, BODY)


def test_seaweedfs_refuses_a_wrong_secret(s3: SeaweedS3, key: str) -> None:
    reader = s3.identities["reader"]
    url = presigned_get(object_url(s3, key), Keys(reader.access_key, "x" * 40), "us-east-1", 60)

    answer = httpx.get(url)

    assert answer.status_code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in answer.content


def test_a_session_token_is_signed_and_seaweedfs_refuses_it_on_a_static_identity(
    s3: SeaweedS3, key: str
) -> None:
    """The token rides in the signed query (its bytes are botocore's, above). SeaweedFS
    takes a token for its own temporary credentials: with a static identity's keys the
    answer is a refusal, never the object."""
    reader = s3.identities["reader"]
    signed = Keys(reader.access_key, reader.secret_key, "a-session-token")
    url = presigned_get(object_url(s3, key), signed, "us-east-1", 60)
    assert httpx.URL(url).params["X-Amz-Security-Token"] == "a-session-token"

    answer = httpx.get(url)

    assert answer.status_code == 403
    assert BODY not in answer.content
