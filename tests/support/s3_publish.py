"""Publishing into the real S3 engine (support/seaweed.py) as a process, with an
identity's keys: what CI does, and the environment a reader of the store runs with."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dsymfind.stores import builds
from dsymfind.stores.s3 import upload as s3_target
from support.processes import BIN
from support.seaweed import REGION, SYMBOLS, SeaweedS3


def keys_env(s3: SeaweedS3, identity: str) -> dict[str, str]:
    """This process's environment with `identity`'s keys and no other AWS setting."""
    who = s3.identities[identity]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=who.access_key,
        AWS_SECRET_ACCESS_KEY=who.secret_key,
        NO_PROXY="127.0.0.1",
        no_proxy="127.0.0.1",
    )
    return env


def publish_args(s3: SeaweedS3, prefix: str, *paths: Path | str) -> list[str]:
    """`dsymfind publish` of `paths` under `prefix` in the symbols bucket."""
    return [
        "publish",
        "--to",
        f"s3://{SYMBOLS}/{prefix}",
        "--endpoint-url",
        s3.endpoint_url,
        "--region",
        REGION,
        *map(str, paths),
    ]


def run_publish(
    s3: SeaweedS3, prefix: str, *paths: Path | str, identity: str = "ci"
) -> subprocess.CompletedProcess[str]:
    """The installed `dsymfind publish`, as CI runs it."""
    return subprocess.run(
        [str(BIN / "dsymfind"), *publish_args(s3, prefix, *paths)],
        capture_output=True,
        text=True,
        env=keys_env(s3, identity),
        timeout=120,
        check=False,
    )


class Requests:
    """Every request this process's boto3 clients send, counted by operation; and the keys
    written, in order."""

    def __init__(self) -> None:
        self.operations: Counter[str] = Counter()
        # Those naming a key that is not the store's own bookkeeping (stores/builds.py).
        self.symbols: Counter[str] = Counter()
        self.written: list[str] = []
        self.listed: list[str] = []  # each listing's prefix, below the store's

    def __call__(self, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            self.operations[model.name] += 1

    def parameters(self, params: dict[str, Any], model: Any, **kwargs: Any) -> None:
        if model.name == "ListObjectsV2":
            self.listed.append(str(params.get("Prefix", "")).partition("/")[2])
        key = params.get("Key")
        if not isinstance(key, str):
            return
        if not key.partition("/")[2].startswith(builds.BOOKKEEPING):
            self.symbols[model.name] += 1
        if model.name in ("PutObject", "CompleteMultipartUpload"):
            self.written.append(key.partition("/")[2])


def counting(s3: SeaweedS3, identity: str, monkeypatch: pytest.MonkeyPatch) -> Requests:
    """This process's S3 clients, from now on, with `identity`'s keys and their requests
    counted."""
    for name, value in keys_env(s3, identity).items():
        monkeypatch.setenv(name, value)
    requests = Requests()
    real = s3_target.make_client

    def make_client(options: s3_target.S3Options) -> Any:
        client = real(options)
        client.meta.events.register("before-call.s3", requests)
        client.meta.events.register("before-parameter-build.s3", requests.parameters)
        return client

    monkeypatch.setattr(s3_target, "make_client", make_client)
    return requests
