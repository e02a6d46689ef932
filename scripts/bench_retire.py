"""bench.py's retire figure: `dsymfind retire` of 1,000 builds in the S3 engine (SeaweedFS on
loopback) against boto3's `delete_objects` of the same keys.

The builds are put in place by boto3 directly (many PUTs at once), in the store's own key
format (stores/builds.py): a claim, the objects, a `_uuids/` reference per image and the
record. Each round fills the prefix again before each side, so both delete the same keys.
"""

from __future__ import annotations

import datetime
import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench_core import CLI, FULL, PYTHON, Bench, BenchError, Figure, Pair, ms

from dsymfind.stores import builds as records

PREFIX = "bench-retire/"
# Builds, and the images each names (an object and a reference each): with its claim and
# record, a build is 2 + 2 * IMAGES keys, so 1,000 builds are 20,000 keys.
FULL_BUILDS, QUICK_BUILDS, IMAGES = 1000, 50, 9
PUT_THREADS = 32
# The reference: a bare boto3 client deleting the listed keys, 1,000 a request, in order.
_DELETE = (
    "import sys, boto3\n"
    "from botocore.config import Config\n"
    "s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name=sys.argv[2],\n"
    "                  config=Config(s3={'addressing_style': 'path'}))\n"
    "keys = open(sys.argv[4]).read().split()\n"
    "for start in range(0, len(keys), 1000):\n"
    "    batch = [{'Key': k} for k in keys[start:start + 1000]]\n"
    "    s3.delete_objects(Bucket=sys.argv[3], Delete={'Objects': batch, 'Quiet': True})\n"
)


class RetireFigures:
    def __init__(self, bench: Any) -> None:
        self.bench = bench  # bench.py's Suite: its S3 engine and environments

    def steps(self) -> list[Callable[[], None]]:
        return [self.retire_figure]

    def retire_figure(self) -> None:
        bench: Any = self.bench
        count = FULL_BUILDS if bench.scale is FULL else QUICK_BUILDS
        figure = Figure(
            f"`dsymfind retire` of {count} builds ({count * (2 + 2 * IMAGES)} keys) from S3 "
            "(SeaweedFS on loopback)",
            "boto3 `delete_objects` of the same keys",
            "≤ 1.3x wall",
        )
        bench.on_seaweed([figure], lambda: self._measure(figure, count))

    def _measure(self, figure: Figure, count: int) -> None:
        bench: Bench = self.bench
        seaweed = self.bench.seaweed
        admin, env = seaweed.client("admin", max_pool_connections=PUT_THREADS), None
        env = self.bench.s3_env("ci")
        keys = _build_keys(count)
        listing = bench.work / "retire-keys.txt"
        listing.write_text("".join(f"{PREFIX}{key}\n" for key, _ in keys))
        retire = [
            CLI,
            "retire",
            "--store",
            f"s3://symbols/{PREFIX}",
            "--endpoint-url",
            seaweed.endpoint_url,
            "--region",
            "us-east-1",
            "--older-than",
            "1h",
        ]
        delete = [PYTHON, "-c", _DELETE, seaweed.endpoint_url, "us-east-1", "symbols", str(listing)]
        retired, deleted, ratios, filled = [], [], [], []
        for _ in range(bench.scale.fetch_rounds):
            filled.append(_fill(admin, keys))
            seconds, out = bench.timed_run(retire, env, expect=b"transaction ")
            if f"deleted {count * IMAGES} objects".encode() not in out:
                raise BenchError(f"retire did not delete every object: {out[-300:]!r}")
            _check_empty(admin)
            retired.append(seconds)
            _fill(admin, keys)
            deleted.append(bench.timed_run(delete, env)[0])
            _check_empty(admin)
            ratios.append(retired[-1] / deleted[-1])
        bench.judge(figure, Pair.of_rounds(retired, deleted, ratios), 1.3)
        figure.notes.append(
            f"Each round puts {count} builds in place with boto3 ({PUT_THREADS} PUTs at once, "
            f"{ms(statistics.median(filled))}): a claim, {IMAGES} objects of its own, a "
            "`_uuids/` reference per image and the record, in stores/builds.py's key format; "
            "then `dsymfind retire --older-than 1h` with the ci identity's keys (a fresh "
            "process: it lists the records, reads each (16 at once), writes its tombstone, "
            "deletes the records, lists intents and references, deletes the objects, "
            "references and claims in DeleteObjects of 1,000 keys, and writes its "
            "transaction); the prefix is filled again and a fresh Python deletes the same keys "
            "with boto3's `delete_objects`, 1,000 a request, one request after another."
        )


def _build_keys(count: int) -> list[tuple[str, bytes]]:
    """Every key of `count` builds with its bytes, in a publish's order within each build."""
    keys: list[tuple[str, bytes]] = []
    moment = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for n in range(count):
        build_id = f"bench-{n:05}"
        images = tuple(
            records.Image(
                "Bench", f"{n * IMAGES + i + 1:032X}", "arm64", "dsym", f"{n:05}/{i}/debuginfo", 100
            )
            for i in range(IMAGES)
        )
        when = moment + datetime.timedelta(minutes=n)
        record = records.Record(
            build_id,
            "Bench",
            "com.example.bench",
            "1.0",
            str(n),
            records.iso(when),
            "",
            "",
            False,
            None,
            "bench",
            images,
        )
        keys.append((records.claim_key(build_id), b""))
        keys += [(image.key, b"o" * image.size) for image in images]
        keys += [(records.uuid_ref_key(image.uuid, build_id), b"") for image in images]
        keys.append((record.key, records.encode_record(record)))
    return keys


def _fill(client: Any, keys: list[tuple[str, bytes]]) -> float:
    """Put every key (records too, at once: nothing reads the store meanwhile); seconds."""
    import time

    started = time.perf_counter()
    with ThreadPoolExecutor(PUT_THREADS) as pool:
        list(
            pool.map(
                lambda item: client.put_object(
                    Bucket="symbols", Key=PREFIX + item[0], Body=item[1]
                ),
                keys,
            )
        )
    return time.perf_counter() - started


def _check_empty(client: Any) -> None:
    """Nothing of the builds is left: only retire's transactions."""
    left = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket="symbols", Prefix=PREFIX
        )
        for item in page.get("Contents", [])
        if not item["Key"].startswith(PREFIX + records.RETIRED)
    ]
    if left:
        raise BenchError(f"{len(left)} keys left after deleting, such as {left[0]}")
