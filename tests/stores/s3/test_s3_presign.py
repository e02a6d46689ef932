"""Presigned GETs without a client: URLs a real SeaweedFS accepts, the same URLs and
credentials a botocore client and session give, and no client machinery loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

import botocore.session
import httpx
import pytest
from botocore.exceptions import NoCredentialsError, ProfileNotFound
from support.seaweed import PUBLIC, SYMBOLS, SeaweedS3

from dsymfind.stores.s3 import api as s3_api
from dsymfind.stores.s3 import presign as s3_presign
from dsymfind.stores.s3.api import S3Options

BODY = b"a dSYM's bytes"
PROFILE = "symbols-read"
# What a presigned fetch must not load: the client, its service model and endpoint rules.
CLIENT_MODULES = (
    "botocore.client",
    "botocore.session",
    "botocore.loaders",
    "botocore.regions",
    "botocore.endpoint_provider",
    "boto3",
)


@pytest.fixture(autouse=True)
def no_signers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test resolves its own credentials: none kept from another test's keys."""
    monkeypatch.setattr(s3_presign, "_signers", {})
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never 169.254.169.254


@pytest.fixture
def key(s3: SeaweedS3) -> str:
    made = f"t{uuid.uuid4().hex[:12]}/a b+c~d/debuginfo"
    s3.client("ci").put_object(Bucket=SYMBOLS, Key=made, Body=BODY)
    s3.client("admin").put_object(Bucket=PUBLIC, Key=made, Body=BODY)
    return made


def use_keys(monkeypatch: pytest.MonkeyPatch, access_key: str, secret_key: str) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)


def write_profile(home: Path, access_key: str, secret_key: str, name: str = PROFILE) -> None:
    folder = home / ".aws"
    folder.mkdir(exist_ok=True)
    with (folder / "credentials").open("a") as out:
        out.write(f"[{name}]\naws_access_key_id = {access_key}\n")
        out.write(f"aws_secret_access_key = {secret_key}\n")


def presigned(options: S3Options, bucket: str, key: str) -> str:
    return s3_presign.signer(options).url(bucket, key, expires=60)


# -- a real engine -----------------------------------------------------------------------


@pytest.mark.parametrize("credentials", ["environment", "profile"])
def test_seaweedfs_accepts_the_url(
    s3: SeaweedS3,
    key: str,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    credentials: str,
) -> None:
    reader = s3.identities["reader"]
    if credentials == "profile":
        write_profile(isolated_home, reader.access_key, reader.secret_key)
    else:
        use_keys(monkeypatch, reader.access_key, reader.secret_key)
    options = S3Options(
        endpoint_url=s3.endpoint_url, profile=PROFILE if credentials == "profile" else None
    )

    answer = httpx.get(presigned(options, SYMBOLS, key))

    assert (answer.status_code, answer.content) == (200, BODY)


def test_an_anonymous_url_reads_a_public_bucket_unsigned(s3: SeaweedS3, key: str) -> None:
    url = presigned(S3Options(endpoint_url=s3.endpoint_url, anonymous=True), PUBLIC, key)

    assert "X-Amz-Signature" not in url
    answer = httpx.get(url)
    assert (answer.status_code, answer.content) == (200, BODY)


def test_a_wrong_secret_reads_as_signature_does_not_match(
    s3: SeaweedS3, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_keys(monkeypatch, s3.identities["reader"].access_key, "x" * 40)

    answer = httpx.get(presigned(S3Options(endpoint_url=s3.endpoint_url), SYMBOLS, key))

    assert answer.status_code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in answer.content


# -- as a client and a session would -----------------------------------------------------


def without_time(url: str) -> tuple[str, list[tuple[str, str]]]:
    """A presigned URL less the parts that change with the clock: when it was signed."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    kept = [(k, v) for k, v in query if k not in ("X-Amz-Date", "X-Amz-Signature")]
    return parts._replace(query="").geturl(), sorted(kept)


@pytest.mark.parametrize(
    ("endpoint_url", "region"),
    [
        (None, None),
        (None, "us-east-1"),
        (None, "eu-west-1"),
        (None, "cn-north-1"),
        (None, "us-gov-west-1"),
        (None, "xx-nowhere-1"),
        ("http://127.0.0.1:9", None),
        ("http://127.0.0.1:9/", "garage"),
    ],
)
@pytest.mark.parametrize("bucket", ["symbols", "sym.bols", "sym_bols"])
def test_the_url_is_the_one_a_client_presigns(
    monkeypatch: pytest.MonkeyPatch, endpoint_url: str | None, region: str | None, bucket: str
) -> None:
    use_keys(monkeypatch, "AKIAEXAMPLE000000000", "s" * 40)
    key = "ios/a b+c~d/Ö/debuginfo"
    client = s3_api.client(endpoint_url=endpoint_url, region=region, profile=None, anonymous=False)
    theirs = client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=60
    )

    ours = presigned(S3Options(endpoint_url=endpoint_url, region=region), bucket, key)

    assert without_time(ours) == without_time(theirs)


def test_the_region_of_the_environment_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    use_keys(monkeypatch, "AKIAEXAMPLE000000000", "s" * 40)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")

    url = presigned(S3Options(), "symbols", "k")

    assert "%2Fap-south-1%2Fs3%2Faws4_request" in url


@pytest.mark.parametrize("profile", [None, PROFILE])
def test_the_chain_picks_what_a_session_picks(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, profile: str | None
) -> None:
    """Keys in the environment and a profile in the shared file: the environment wins
    without a profile, the profile's keys with one (botocore leaves the environment out)."""
    use_keys(monkeypatch, "AKIAFROMENVIRONMENT0", "e" * 40)
    write_profile(isolated_home, "AKIAFROMPROFILE00000", "p" * 40)
    write_profile(isolated_home, "AKIAFROMDEFAULT00000", "d" * 40, name="default")

    ours = s3_presign.Signer(S3Options(profile=profile)).keys()
    theirs = botocore.session.Session(profile=profile).get_credentials()

    assert ours is not None
    assert (ours.access_key, ours.secret_key) == (theirs.access_key, theirs.secret_key)
    assert ours.access_key == ("AKIAFROMPROFILE00000" if profile else "AKIAFROMENVIRONMENT0")


def test_an_unknown_profile_and_no_credentials_are_botocores_errors(
    isolated_home: Path,
) -> None:
    write_profile(isolated_home, "AKIAFROMPROFILE00000", "p" * 40)

    with pytest.raises(ProfileNotFound):
        s3_presign.signer(S3Options(profile="nobody"))
    with pytest.raises(NoCredentialsError):
        s3_presign.signer(S3Options())
    assert s3_presign._signers == {}  # a refusal is not kept: fixed keys work at once


# -- what the fetch path loads -----------------------------------------------------------

# A fetch through the s3 kind's source in a fresh interpreter, then which client modules
# it imported: one JSON line.
_FETCH = """
import json, sys
from dsymfind.stores import base, transfer
from dsymfind.stores.s3 import store as s3
options = base.Options(settings={"endpoint_url": sys.argv[1]})
with transfer.Session() as session:
    got = s3.S3Reader(sys.argv[2], session, options).get(sys.argv[3], sys.argv[4], base.Terms())
print(json.dumps({"size": got.size, "loaded": sorted(set(sys.argv[5:]) & set(sys.modules))}))
"""


def test_a_fetch_loads_no_client_nor_service_model(s3: SeaweedS3, key: str, tmp_path: Path) -> None:
    reader = s3.identities["reader"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=reader.access_key,
        AWS_SECRET_ACCESS_KEY=reader.secret_key,
        AWS_EC2_METADATA_DISABLED="true",
    )
    dest = tmp_path / "fetched"
    command = [sys.executable, "-c", _FETCH, s3.endpoint_url, f"s3://{SYMBOLS}/", key]

    done = subprocess.run(
        [*command, str(dest), *CLIENT_MODULES],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"size": len(BODY), "loaded": []}
    assert dest.read_bytes() == BODY
