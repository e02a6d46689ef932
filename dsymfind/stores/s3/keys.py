"""The S3 credentials and region a fetch signs with, read without botocore where they are
plain: keys in the environment, or a profile's keys in the shared credentials or config
file. Anything else (an assumed role, web identity, SSO, a login session, a credential
process, container or instance metadata, keys with an expiry, a file that does not parse)
is botocore's credential chain's to resolve: `resolve` then answers None and
stores/s3/presign.py runs that chain.

The order is the chain's (docs/symbol-stores.md, "S3-compatible storage"): the
environment's keys unless a profile is configured, then the profile (`profile`, else
AWS_DEFAULT_PROFILE, else AWS_PROFILE, else `default`): its credentials file section, then
its config file section. The region: AWS_DEFAULT_REGION, then the profile's `region`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from dsymfind.stores.s3.sigv4 import Keys

ACCESS_KEY, SECRET_KEY = "aws_access_key_id", "aws_secret_access_key"
# botocore reads the first of these that is set.
TOKEN_NAMES = ("aws_security_token", "aws_session_token")
# Profile keys that name a provider botocore's chain consults before the shared files' keys
# (or one we do not read at all): their profile is left to botocore.
OTHER_SOURCES = frozenset(
    {
        "role_arn",
        "web_identity_token_file",
        "sso_start_url",
        "sso_session",
        "sso_account_id",
        "sso_role_name",
        "login_session",
        "credential_process",
    }
)
# Environment variables of the same kind: web identity is tried before the shared files.
OTHER_SOURCE_VARIABLES = ("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE")
# Keys from the environment that expire are refreshed by botocore's chain.
EXPIRY_VARIABLE = "AWS_CREDENTIAL_EXPIRATION"


class Resolved(NamedTuple):
    region: str | None  # None: the caller's default
    keys: Keys | None  # None: unsigned (anonymous)


Section = Mapping[str, str]


def resolve(
    profile: str | None, *, anonymous: bool, environ: Mapping[str, str] = os.environ
) -> Resolved | None:
    """The region and keys for a store configured with `profile` (or none), or None when
    botocore's chain must decide."""
    name = profile if profile is not None else _profile_from(environ)
    sections = _profile_sections(name, environ) if name else None
    if sections is None:
        return None
    config, credentials = sections
    if config is None and credentials is None and (profile is not None or name != "default"):
        return None  # botocore names the profile that no file has
    merged = {**(config or {}), **(credentials or {})}
    region = environ.get("AWS_DEFAULT_REGION", merged.get("region"))
    if region is not None and "\n" in region:
        return None  # a nested value: botocore's to read
    if anonymous:
        return Resolved(region, None)
    if profile is None and environ.get("AWS_ACCESS_KEY_ID"):
        keys = _environment_keys(environ)  # the chain's first provider, unless a profile is set
    else:
        keys = _profile_keys(config or {}, credentials or {}, merged, environ)
    return None if keys is None else Resolved(region, keys)


def _profile_from(environ: Mapping[str, str]) -> str:
    for variable in ("AWS_DEFAULT_PROFILE", "AWS_PROFILE"):
        if variable in environ:
            return environ[variable]  # "" is no profile botocore can find: left to it
    return "default"


def _environment_keys(environ: Mapping[str, str]) -> Keys | None:
    access_key = environ.get("AWS_ACCESS_KEY_ID", "")
    secret_key = environ.get("AWS_SECRET_ACCESS_KEY", "")
    if not access_key or not secret_key or EXPIRY_VARIABLE in environ:
        return None
    tokens = (environ.get(name.upper(), "") for name in TOKEN_NAMES)
    return Keys(access_key, secret_key, next((t for t in tokens if t), None))


def _profile_keys(
    config: Section, credentials: Section, merged: Section, environ: Mapping[str, str]
) -> Keys | None:
    if any(environ.get(name) for name in OTHER_SOURCE_VARIABLES):
        return None
    if OTHER_SOURCES.intersection(merged):
        return None
    if ACCESS_KEY in credentials:
        return _section_keys(credentials)
    if ACCESS_KEY in config:
        return _section_keys(config)
    return None  # container or instance metadata, or no credentials: botocore says which


def _section_keys(section: Section) -> Keys | None:
    access_key, secret_key = section.get(ACCESS_KEY), section.get(SECRET_KEY)
    token = next((section[name] for name in TOKEN_NAMES if name in section), None)
    if not access_key or not secret_key or "\n" in f"{access_key}{secret_key}{token or ''}":
        return None  # botocore's error names what is missing; a nested value is its to read
    return Keys(access_key, secret_key, token)


def _profile_sections(
    name: str, environ: Mapping[str, str]
) -> tuple[Section | None, Section | None] | None:
    """The profile's sections of the config and credentials files (None where a file has
    none), or None when a file cannot be read as botocore would."""
    config_file = environ.get("AWS_CONFIG_FILE", "~/.aws/config")
    credentials_file = environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")
    config, credentials = _read_ini(config_file), _read_ini(credentials_file)
    if config is None or credentials is None:
        return None
    return _config_profiles(config).get(name), credentials.get(name)


def _config_profiles(parsed: Mapping[str, Section]) -> dict[str, Section]:
    """The config file's profiles by name: `[default]` and `[profile NAME]`, read as
    botocore's configloader reads them (a later section of a name wins)."""
    import shlex

    profiles: dict[str, Section] = {}
    for section, values in parsed.items():
        if section.startswith("profile"):
            try:
                parts = shlex.split(section)
            except ValueError:
                continue
            if len(parts) == 2:
                profiles[parts[1]] = values
        elif section == "default":
            profiles[section] = values
    return profiles


def _read_ini(path: str) -> dict[str, Section] | None:
    """The file's sections ({} when there is no file), or None when it does not parse
    (botocore's chain then says why)."""
    import configparser

    path = os.path.expanduser(os.path.expandvars(path))
    if not os.path.isfile(path):
        return {}
    parser = configparser.RawConfigParser()
    try:
        parser.read([path])
        sections: dict[str, Section] = {n: dict(parser.items(n)) for n in parser.sections()}
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    return sections
