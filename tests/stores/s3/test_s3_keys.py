"""The credentials and region a fetch reads without botocore: for each plain source, the
keys and region botocore's own session resolves (the oracle, same files and environment);
for every other source, none (botocore's chain then decides). And a real SeaweedFS fetch
with each source, in a fresh interpreter that imports no botocore at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import botocore.session
import pytest
from support.seaweed import PUBLIC, SYMBOLS, SeaweedS3

from dsymfind.stores.s3 import keys as s3_keys
from dsymfind.stores.s3.sigv4 import Keys

BODY = b"a dSYM's bytes"


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never 169.254.169.254


def write(home: Path, name: str, text: str) -> None:
    folder = home / ".aws"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


Case = tuple[dict[str, str], str, str, "str | None"]


def arrange(case: Case, home: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The case's environment and files; the profile it configures."""
    environment, credentials, config, profile = case
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    write(home, "credentials", credentials)
    write(home, "config", config)
    return profile


def botocores(profile: str | None) -> tuple[str | None, Keys | None]:
    """The region and keys a botocore session resolves, as ours are told."""
    session = botocore.session.Session(profile=profile)
    found = session.get_credentials()
    keys = None if found is None else Keys(found.access_key, found.secret_key, found.token)
    return session.get_config_variable("region"), keys


# (environment, credentials file, config file, the profile configured)
PLAIN: dict[str, Case] = {
    "environment keys": (
        {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "e"},
        "",
        "",
        None,
    ),
    "environment keys with a session token": (
        {"AWS_ACCESS_KEY_ID": "ASIAENV", "AWS_SECRET_ACCESS_KEY": "e", "AWS_SESSION_TOKEN": "t"},
        "",
        "",
        None,
    ),
    "the older token variable first": (
        {
            "AWS_ACCESS_KEY_ID": "ASIAENV",
            "AWS_SECRET_ACCESS_KEY": "e",
            "AWS_SECURITY_TOKEN": "old",
            "AWS_SESSION_TOKEN": "new",
        },
        "",
        "",
        None,
    ),
    "environment keys beat the default profile": (
        {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "e"},
        "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = d\n",
        "[default]\nregion = eu-west-3\n",
        None,
    ),
    "a configured profile beats environment keys": (
        {"AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "e"},
        "[team]\naws_access_key_id = AKIATEAM\naws_secret_access_key = t\n",
        "",
        "team",
    ),
    "the default profile's keys and region": (
        {},
        "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = d\n",
        "[default]\nregion = eu-west-3\ns3 =\n  addressing_style = path\n",
        None,
    ),
    "a profile with a session token": (
        {},
        "[team]\naws_access_key_id = ASIATEAM\naws_secret_access_key = t\n"
        "aws_session_token = tok\n",
        "[profile team]\nregion = ap-south-1\n",
        "team",
    ),
    "AWS_PROFILE names the profile": (
        {"AWS_PROFILE": "team"},
        "[team]\naws_access_key_id = AKIATEAM\naws_secret_access_key = t\n",
        "",
        None,
    ),
    "AWS_DEFAULT_PROFILE before AWS_PROFILE": (
        {"AWS_DEFAULT_PROFILE": "team", "AWS_PROFILE": "other"},
        "[team]\naws_access_key_id = AKIATEAM\naws_secret_access_key = t\n"
        "[other]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = o\n",
        "",
        None,
    ),
    "keys in the config file": (
        {},
        "",
        '[profile "team"]\naws_access_key_id = AKIACONF\naws_secret_access_key = c\n',
        "team",
    ),
    "the credentials file before the config file": (
        {},
        "[team]\naws_access_key_id = AKIACRED\naws_secret_access_key = c\n",
        "[profile team]\naws_access_key_id = AKIACONF\naws_secret_access_key = k\n",
        "team",
    ),
    "the environment's region before the profile's": (
        {"AWS_DEFAULT_REGION": "sa-east-1"},
        "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = d\n",
        "[default]\nregion = eu-west-3\n",
        None,
    ),
}


@pytest.mark.parametrize("case", PLAIN)
def test_plain_sources_resolve_as_botocore_does(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    profile = arrange(PLAIN[case], isolated_home, monkeypatch)

    ours = s3_keys.resolve(profile, anonymous=False)

    assert ours is not None
    assert (ours.region, ours.keys) == botocores(profile)


def test_the_files_named_by_the_environment_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "creds").write_text(
        "[default]\naws_access_key_id = AKIAF\naws_secret_access_key = f\n"
    )
    (tmp_path / "conf").write_text("[default]\nregion = eu-north-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "creds"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "conf"))

    assert s3_keys.resolve(None, anonymous=False) == (
        "eu-north-1",
        Keys("AKIAF", "f"),
    )


def test_anonymous_reads_only_the_region(isolated_home: Path) -> None:
    write(isolated_home, "config", "[default]\nregion = eu-west-3\n")

    assert s3_keys.resolve(None, anonymous=True) == ("eu-west-3", None)


# What is botocore's chain's to resolve: (environment, credentials file, config file, profile)
OTHERS: dict[str, Case] = {
    "an assumed role": (
        {},
        "[base]\naws_access_key_id = AKIABASE\naws_secret_access_key = b\n",
        "[profile team]\nrole_arn = arn:aws:iam::123456789012:role/r\nsource_profile = base\n",
        "team",
    ),
    "a role beside static keys": (
        {},
        "[team]\naws_access_key_id = AKIATEAM\naws_secret_access_key = t\n",
        "[profile team]\nrole_arn = arn:aws:iam::123456789012:role/r\n"
        "credential_source = Environment\n",
        "team",
    ),
    "SSO": ({}, "", "[profile team]\nsso_session = corp\nsso_account_id = 1\n", "team"),
    "a credential process": ({}, "", "[profile team]\ncredential_process = /bin/false\n", "team"),
    "web identity from the environment": (
        {"AWS_ROLE_ARN": "arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE": "/nowhere"},
        "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = d\n",
        "",
        None,
    ),
    "keys that expire": (
        {
            "AWS_ACCESS_KEY_ID": "ASIAENV",
            "AWS_SECRET_ACCESS_KEY": "e",
            "AWS_CREDENTIAL_EXPIRATION": "2099-01-01T00:00:00Z",
        },
        "",
        "",
        None,
    ),
    "an access key without its secret": ({"AWS_ACCESS_KEY_ID": "AKIAENV"}, "", "", None),
    "a profile no file has": ({}, "", "", "nobody"),
    "AWS_PROFILE naming a profile no file has": ({"AWS_PROFILE": "nobody"}, "", "", None),
    "no credentials anywhere (metadata services)": ({}, "", "", None),
    "a file that does not parse": ({}, "[default\naws_access_key_id = x\n", "", None),
}


@pytest.mark.parametrize("case", OTHERS)
def test_other_sources_are_left_to_botocore(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    profile = arrange(OTHERS[case], isolated_home, monkeypatch)

    assert s3_keys.resolve(profile, anonymous=False) is None


# -- a fetch from a real engine, in a fresh interpreter ----------------------------------

# The s3 kind's source fetching one key, then which modules of botocore's family it
# imported: one JSON line.
_FETCH = """
import json, sys
from dsymfind.stores import base, transfer
from dsymfind.stores.s3 import store as s3
settings = json.loads(sys.argv[1])
with transfer.Session() as session:
    source = s3.S3Reader(sys.argv[2], session, base.Options(settings=settings))
    got = source.get(sys.argv[3], sys.argv[4], base.Terms())
family = ("botocore", "boto3", "urllib3", "dateutil", "jmespath")
print(json.dumps({"size": got.size, "loaded": [m for m in sys.modules if m.startswith(family)]}))
"""


@pytest.mark.parametrize("source", ["environment", "profile", "anonymous"])
def test_a_fetch_with_plain_keys_imports_no_botocore(
    s3: SeaweedS3, isolated_home: Path, tmp_path: Path, source: str
) -> None:
    key = f"t{uuid.uuid4().hex[:12]}/a b+c~d/debuginfo"
    bucket = PUBLIC if source == "anonymous" else SYMBOLS
    s3.client("admin").put_object(Bucket=bucket, Key=key, Body=BODY)
    reader = s3.identities["reader"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    settings: dict[str, object] = {"endpoint_url": s3.endpoint_url}
    if source == "environment":
        env.update(AWS_ACCESS_KEY_ID=reader.access_key, AWS_SECRET_ACCESS_KEY=reader.secret_key)
    elif source == "profile":
        write(
            isolated_home,
            "credentials",
            f"[team]\naws_access_key_id = {reader.access_key}\n"
            f"aws_secret_access_key = {reader.secret_key}\n",
        )
        settings["profile"] = "team"
    else:
        settings["anonymous"] = True
    dest = tmp_path / "fetched"
    command = [sys.executable, "-c", _FETCH, json.dumps(settings), f"s3://{bucket}/", key]

    done = subprocess.run(
        [*command, str(dest)], env=env, capture_output=True, text=True, check=False, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"size": len(BODY), "loaded": []}
    assert dest.read_bytes() == BODY
