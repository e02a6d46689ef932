"""Presigned S3 GETs without a botocore client: the fetch path's signer.

A botocore client costs its service model (JSON of every S3 operation), its endpoint rules
and the whole of botocore.session before it signs anything: about 0.2 s, paid by every
downloader, when a presigned GET needs only credentials, a region and SigV4. So the
credentials and region are read by stores/s3/keys.py where they are plain (keys in the
environment or in a profile's shared files: then no botocore is imported at all), and
otherwise by botocore's own credential chain (botocore.credentials: SSO, assumed roles,
credential processes, container and instance metadata) over a session of the few parts
that chain reads. stores/s3/sigv4.py signs, whichever found the keys. The object is
addressed as a client would (path-style for an `endpoint_url` engine; virtual-host on AWS
where the bucket name allows it), so the URLs are the ones stores/s3/store.py made with a client
before. Publishing keeps its client (stores/s3/upload.py).

botocore is imported inside the functions only, as in s3_api.py.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import re
import sys
import threading
import urllib.parse
from typing import Any

from dsymfind import __version__
from dsymfind.stores.s3 import api as s3_api
from dsymfind.stores.s3 import keys as s3_keys
from dsymfind.stores.s3 import sigv4 as s3_sigv4
from dsymfind.stores.s3.api import DEFAULT_REGION, S3Options

# Bucket names a virtual host can carry over TLS: a DNS label, no dots (a dotted name
# breaks the certificate's wildcard) and no underscores.
_VIRTUAL_HOST_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
# On AWS's own partition botocore presigns a virtual host on the global name, which routes
# to the bucket's region, and path-style on the region's name (us-east-1's is the global).
_AWS_PARTITION = "aws"
_GLOBAL_REGION = "us-east-1"


class ChainSession:
    """The parts of a botocore session that its credential chain reads (profile, config
    variables, the shared files). A profile that must ask a service for its keys (SSO, an
    assumed role) gets a real session's client, the full cost paid only then."""

    def __init__(self, profile: str | None) -> None:
        from botocore.configprovider import (
            ConfigValueStore,
            create_botocore_default_config_mapping,
        )

        self._instance = {"profile": profile} if profile is not None else {}
        self._config: dict[str, Any] | None = None
        self._store = ConfigValueStore(mapping=create_botocore_default_config_mapping(self))

    def get_config_variable(self, name: str) -> Any:
        return self._store.get_config_variable(name)

    def instance_variables(self) -> dict[str, Any]:
        return copy.copy(self._instance)

    def get_scoped_config(self) -> dict[str, Any]:
        """The profile's section; a named profile that no file has is an error."""
        from botocore.exceptions import ProfileNotFound

        profile = self.get_config_variable("profile")
        profiles: dict[str, Any] = self.full_config["profiles"]
        if profile is None:
            return dict(profiles.get("default", {}))
        if profile not in profiles:
            raise ProfileNotFound(profile=profile)
        return dict(profiles[profile])

    @property
    def full_config(self) -> dict[str, Any]:
        """The config file's profiles, with those of the credentials file merged in."""
        if self._config is None:
            self._config = _shared_files(
                self.get_config_variable("config_file"),
                self.get_config_variable("credentials_file"),
            )
        return self._config

    def user_agent(self) -> str:
        return f"dsymfind/{__version__}"

    def create_client(self, *args: Any, **kwargs: Any) -> Any:
        import botocore.session

        return botocore.session.Session(profile=self._instance.get("profile")).create_client(
            *args, **kwargs
        )


def _shared_files(config_file: str, credentials_file: str) -> dict[str, Any]:
    import botocore.configloader
    from botocore.exceptions import ConfigNotFound

    try:
        config: dict[str, Any] = botocore.configloader.load_config(config_file)
    except ConfigNotFound:
        config = {"profiles": {}}
    try:
        credentials = botocore.configloader.raw_config_parse(credentials_file)
    except ConfigNotFound:
        credentials = {}
    for name, values in credentials.items():
        config["profiles"].setdefault(name, {}).update(values)
    return config


class Signer:
    """Presigned GET URLs for one configuration: its region and credentials are resolved
    once (a `dsymfind fetch` of many UUIDs signs many keys), and refreshable credentials
    refresh themselves."""

    def __init__(self, options: S3Options) -> None:
        self.options = options
        self._keys: s3_sigv4.Keys | None = None
        self._credentials: Any = None  # botocore's, when its chain found them
        plain = s3_keys.resolve(options.profile, anonymous=options.anonymous)
        if plain is not None:
            region, self._keys = plain
        else:
            session = ChainSession(options.profile)
            region = session.get_config_variable("region")
            self._credentials = None if options.anonymous else _credentials(session)
        self.region: str = options.region or region or DEFAULT_REGION

    def url(self, bucket: str, key: str, expires: int) -> str:
        """The URL of `key`; signed for `expires` seconds unless the store is anonymous."""
        unsigned = object_url(self.options.endpoint_url, self.region, bucket, key)
        keys = self.keys()
        if keys is None:
            return unsigned
        return s3_sigv4.presigned_get(unsigned, keys, self.region, expires)

    def keys(self) -> s3_sigv4.Keys | None:
        """The keys that sign now (botocore's refreshable ones may have changed); None for
        unsigned requests."""
        if self._credentials is None:
            return self._keys
        frozen = self._credentials.get_frozen_credentials()
        return s3_sigv4.Keys(frozen.access_key, frozen.secret_key, frozen.token)


def presigned_url(options: S3Options, bucket: str, key: str, expires: int, shown: str) -> str:
    """signer(options).url(...), botocore's errors (no credentials, a profile no file has,
    an SSO token to renew) told as the fetch's own."""
    try:
        return signer(options).url(bucket, key, expires)
    except _botocore_errors() as exc:  # evaluated once raised: botocore is loaded by then
        raise s3_api.classify(exc, shown) from exc


def _botocore_errors() -> tuple[type[Exception], ...]:
    """botocore's error types, or none when it is not imported (then it raised nothing)."""
    if "botocore.exceptions" not in sys.modules:
        return ()
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def _credentials(session: ChainSession) -> Any:
    """botocore's default chain, in its order; no credentials at all is an error, as a
    client's signer would raise."""
    from botocore.credentials import create_credential_resolver
    from botocore.exceptions import NoCredentialsError

    found = create_credential_resolver(session).load_credentials()
    if found is None:
        raise NoCredentialsError()
    return found


def object_url(endpoint_url: str | None, region: str, bucket: str, key: str) -> str:
    """Where a client addresses `key`: path-style below an engine's `endpoint_url`; on AWS
    virtual-host style when the bucket is a DNS label, else path-style."""
    path = urllib.parse.quote(key, safe="/~")
    if endpoint_url is not None:
        return f"{endpoint_url.rstrip('/')}/{bucket}/{path}"
    partition, suffix = _partition(region)
    regional = f"s3.{region}.{suffix}"
    if _VIRTUAL_HOST_BUCKET.fullmatch(bucket):
        host = f"s3.{suffix}" if partition == _AWS_PARTITION else regional
        return f"https://{bucket}.{host}/{path}"
    host = f"s3.{suffix}" if region == _GLOBAL_REGION else regional
    return f"https://{host}/{bucket}/{path}"


def _partition(region: str) -> tuple[str, str]:
    """The AWS partition whose region pattern `region` matches, and its DNS suffix; AWS's
    own for a name none matches, as botocore falls back."""
    partitions = _partitions()
    for name, pattern, suffix in partitions:
        if re.match(pattern, region):
            return name, suffix
    return next((name, suffix) for name, _, suffix in partitions if name == _AWS_PARTITION)


@functools.cache
def _partitions() -> tuple[tuple[str, str, str], ...]:
    """botocore's partition table (a few KB; the endpoint rules are not read), found
    without importing botocore."""
    spec = importlib.util.find_spec("botocore")
    assert spec is not None and spec.submodule_search_locations is not None
    path = os.path.join(spec.submodule_search_locations[0], "data", "partitions.json")
    with open(path, encoding="utf-8") as table:
        listed = json.load(table)["partitions"]
    return tuple((p["id"], p["regionRegex"], p["outputs"]["dnsSuffix"]) for p in listed)


_signers: dict[S3Options, Signer] = {}
_signers_lock = threading.Lock()


def signer(options: S3Options) -> Signer:
    """One signer per process and configuration. The fetcher asks from several threads;
    one store's credentials (instance metadata may take a second) never wait for another's,
    and two threads that make the same signer at once keep the first."""
    with _signers_lock:
        made = _signers.get(options)
    if made is None:
        fresh = Signer(options)
        with _signers_lock:
            made = _signers.setdefault(options, fresh)
    return made
