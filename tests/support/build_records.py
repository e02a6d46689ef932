"""Builds put straight into a store (a folder or the S3 engine) as a publish leaves them: the
objects, a `_uuids/` reference per image, the id's claim and the record, written last. For
the retire tests and the bench, which need many builds quickly and exact control of their
time and of which objects they share."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from dsymfind.stores import builds as records
from dsymfind.stores.writers import Manager


@dataclass(frozen=True)
class Image:
    uuid: str  # 32 upper-case hex digits
    key: str
    size: int = 10


def record(
    build_id: str,
    published: float,
    images: Sequence[Image],
    *,
    app: str = "MyApp",
    version: str = "1.0",
    build: str = "1",
    commit: str = "",
) -> records.Record:
    when = datetime.datetime.fromtimestamp(int(published), datetime.UTC)
    return records.Record(
        id=build_id,
        app=app,
        bundle_id=f"com.example.{app}",
        version=version,
        build=build,
        published_at=records.iso(when),
        commit=commit,
        remote="",
        dirty=False,
        ci=None,
        host="builder",
        images=tuple(records.Image(app, i.uuid, "arm64", "dsym", i.key, i.size) for i in images),
    )


def put_build(
    manager: Manager,
    build_id: str,
    published: float,
    images: Sequence[Image],
    **fields: str,
) -> str:
    """The build's record key, after everything it names is in place, in a publish's order:
    claim, objects, references, record."""
    made = record(build_id, published, images, **fields)
    records.claim(manager, build_id)
    for image in images:
        manager.create_small(image.key, b"o" * image.size)
    records.write_uuid_refs(manager, build_id, [i.uuid for i in images])
    return records.write_record(manager, made)


def image(n: int, size: int = 10) -> Image:
    """Image number `n`: its UUID and a unified-layout-like key of its own."""
    hex32 = f"{n:032X}"
    return Image(hex32, f"{hex32[:2].lower()}/{hex32[2:].lower()}/debuginfo", size)
