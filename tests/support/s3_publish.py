"""Publishing into the real S3 engine (support/seaweed.py) as a process, with an
identity's keys: what CI does, and the environment a reader of the store runs with."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
