"""Builds put straight into a store (a folder or the S3 engine) as a publish leaves them: the
objects, a `_uuids/` reference per image, the id's claim and the record, written last. For
the retire tests and the bench, which need many builds quickly and exact control of their
time and of which objects they share."""

from __future__ import annotations

import datetime
import json
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from dsymfind.stores.writers import Manager


@dataclass(frozen=True)
class Image:
    uuid: str  # 32 hex digits
    key: str
    size: int = 10


def record_key(
    build_id: str,
    published: float,
    *,
    app: str = "MyApp",
    version: str = "1.0",
    build: str = "1",
    commit: str = "",
    images: Sequence[Image] = (),
) -> str:
    when = datetime.datetime.fromtimestamp(published, datetime.UTC)
    fields = [
        f"{when:%Y%m%dT%H%M%SZ}",
        build_id,
        app,
        version,
        build,
        commit,
        str(len(images)),
        str(sum(image.size for image in images)),
    ]
    return "_builds/" + ",".join(urllib.parse.quote(f, safe="") for f in fields) + ".json"


def record_body(
    build_id: str, app: str, version: str, build: str, images: Sequence[Image]
) -> bytes:
    document = {
        "format": 2,
        "id": build_id,
        "app": app,
        "version": version,
        "build": build,
        "images": [
            {
                "name": app,
                "uuid": i.uuid,
                "arch": "arm64",
                "kind": "dsym",
                "key": i.key,
                "size": i.size,
            }
            for i in images
        ],
    }
    return json.dumps(document).encode()


def put_build(
    manager: Manager,
    build_id: str,
    published: float,
    images: Sequence[Image],
    *,
    app: str = "MyApp",
    version: str = "1.0",
    build: str = "1",
    commit: str = "",
) -> str:
    """The build's record key, after everything it names is in place."""
    manager.create_small(f"_build-ids/{build_id}", b"")
    for image in images:
        manager.create_small(image.key, b"o" * image.size)
        manager.create_small(f"_uuids/{image.uuid}/{build_id}", b"")
    key = record_key(
        build_id, published, app=app, version=version, build=build, commit=commit, images=images
    )
    manager.create_small(key, record_body(build_id, app, version, build, images))
    return key


def image(n: int, size: int = 10) -> Image:
    """Image number `n`: its UUID and a unified-layout-like key of its own."""
    hex32 = f"{n:032X}"
    return Image(hex32, f"{hex32[:2].lower()}/{hex32[2:].lower()}/debuginfo", size)
