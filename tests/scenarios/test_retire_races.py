"""Retire against killing and against publishing at the same time, on a folder store and on
the real S3 engine: rounds bounded by count, never by time. The test-only pause
(publish/retire.py PAUSE_ENV) stops a real `dsymfind retire` process after a chosen step,
so that a kill or a publish lands exactly there."""

from __future__ import annotations

import os
import random
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.build_records import image, put_build
from support.fixtures import FIXTURES
from support.processes import BIN
from support.s3_publish import keys_env
from support.seaweed import REGION, SYMBOLS, SeaweedS3

from dsymfind import stores
from dsymfind.publish import retire as retiring
from dsymfind.stores import builds as records
from dsymfind.stores.base import Options
from dsymfind.stores.writers import Manager

DAY = 86400.0
STEPS = ("planned", "tombstone", "records", "listed", "batch", "refs", "transaction")
KILL_ROUNDS = 10  # per kind of store
# A failure guard only: each wait ends as soon as the process gets there.
STEP_TIMEOUT = 60.0


class Target:
    def __init__(self, manager: Manager, args: list[str], env: dict[str, str]) -> None:
        self.manager = manager
        self.args = args
        self.env = env


@pytest.fixture(params=["folder", "s3"])
def target_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    def make() -> Target:
        if request.param == "folder":
            root = tmp_path / f"store-{secrets.token_hex(4)}"
            return Target(
                stores.open_manager(str(root), Options()), ["--store", str(root)], dict(os.environ)
            )
        s3: SeaweedS3 = request.getfixturevalue("s3")
        env = keys_env(s3, "ci")
        url = f"s3://{SYMBOLS}/races-{secrets.token_hex(4)}/"
        settings = {"endpoint_url": s3.endpoint_url, "region": REGION}
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            manager = stores.open_manager(url, Options(settings=settings))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        args = ["--store", url, "--endpoint-url", s3.endpoint_url, "--region", REGION]
        return Target(manager, args, env)

    yield make


def many_builds(manager: Manager, rng: random.Random, count: int = 8) -> None:
    """`count` builds, each naming three images drawn from twelve: many shared."""
    now = time.time()
    for n in range(count):
        images = [image(k) for k in sorted(rng.sample(range(1, 13), 3))]
        put_build(manager, f"b{n}", now - (count - n) * DAY, images, version=f"1.{n}", build=str(n))


def assert_consistent(manager: Manager) -> None:
    """Every record reads, and every object it names exists."""
    present = {item.key for item in manager.listed("")}
    summaries, skipped = records.list_summaries(manager)
    assert not skipped
    for summary in summaries:
        record = records.read_record(manager, summary.key)
        assert record is not None
        missing = set(retiring.named_keys(record)) - present
        assert not missing, f"{summary.id} names missing objects: {sorted(missing)}"


def start_retire(target: Target, pause: str, fifo: Path, *args: str) -> subprocess.Popen[str]:
    env = {**target.env, retiring.PAUSE_ENV: f"{pause}:{fifo}"} if pause else target.env
    return subprocess.Popen(
        [str(BIN / "dsymfind"), "retire", *target.args, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def reached(fifo: Path, process: subprocess.Popen[str]) -> str:
    """Wait until the process says it stopped after its step; the step."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    deadline = time.monotonic() + STEP_TIMEOUT
    try:
        while not data.endswith(b"\n"):
            try:
                chunk = os.read(fd, 64)
            except BlockingIOError:
                chunk = b""
            data += chunk
            if not chunk:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the retire never reached its step"
                time.sleep(0.002)
    finally:
        os.close(fd)
    return data.decode().strip()


def resume(fifo: Path) -> None:
    with open(fifo, "w"):
        pass


def test_a_retire_killed_at_any_step_leaves_no_record_naming_a_missing_object(
    target_factory: object, tmp_path: Path
) -> None:
    make = target_factory
    rng = random.Random(2029)
    for round_ in range(KILL_ROUNDS):
        target = make()  # type: ignore[operator]
        many_builds(target.manager, rng)
        step = STEPS[round_ % len(STEPS)]
        fifo = tmp_path / f"pause-{round_}"
        os.mkfifo(fifo)
        process = start_retire(target, step, fifo, "--older-than", "60h")
        assert reached(fifo, process) == step
        if round_ % 2:
            # Let it go on, and kill it somewhere inside what follows the step.
            resume(fifo)
            time.sleep(rng.uniform(0, 0.05))
        process.send_signal(signal.SIGKILL)
        process.wait()

        assert_consistent(target.manager)
        # A following retire completes, and leaves the store consistent.
        after = subprocess.run(
            [str(BIN / "dsymfind"), "retire", *target.args, "--older-than", "60h"],
            env=target.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert after.returncode == 0, after.stderr
        assert_consistent(target.manager)
        summaries, _ = records.list_summaries(target.manager)
        assert [s.id for s in summaries] == ["b7", "b6"]


PUBLISH_ROUNDS = 2 * len(STEPS)  # per kind of store


def published(target: Target, build_id: str, *paths: Path) -> subprocess.Popen[str]:
    """A real `dsymfind publish --build-id` into the target, started."""
    store = target.args[1:]
    return subprocess.Popen(
        [
            str(BIN / "dsymfind"),
            "publish",
            "--build-id",
            build_id,
            "--to",
            *store,
            *map(str, paths),
        ],
        env=target.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def until_intent(target: Target, build_id: str, process: subprocess.Popen[str]) -> None:
    """Wait until the publish has written its intent (or has already ended)."""
    key = records.intent_key(build_id)
    deadline = time.monotonic() + STEP_TIMEOUT
    while process.poll() is None and key not in {i.key for i in target.manager.listed(key)}:
        assert time.monotonic() < deadline, "the publish never wrote its intent"
        time.sleep(0.005)


@pytest.mark.long
def test_a_publish_naming_what_a_concurrent_retire_removes_loses_nothing(
    target_factory: object, tmp_path: Path
) -> None:
    """B1 publishes hello.dSYM and universal.dSYM; B2 publishes hello.dSYM again (its objects
    are `exists`) while `retire B1` runs, paused after each of its steps in turn: B2 starts
    there and, every other round, writes its intent before the retire goes on."""
    make = target_factory
    hello, universal = FIXTURES / "hello.dSYM", FIXTURES / "universal.dSYM"
    put_back = 0  # rounds where the retire deleted what B2 names, and B2 put it back
    for round_ in range(PUBLISH_ROUNDS):
        step = STEPS[round_ // 2]
        target = make()  # type: ignore[operator]
        first = published(target, "b1", hello, universal)
        assert first.wait(timeout=120) == 0, first.communicate()
        fifo = tmp_path / f"race-{round_}"
        os.mkfifo(fifo)
        retire = start_retire(target, step, fifo, "b1")
        assert reached(fifo, retire) == step
        second = published(target, "b2", hello)
        if round_ % 2 == 0:
            until_intent(target, "b2", second)
        resume(fifo)
        out, err = retire.communicate(timeout=120)
        assert retire.returncode == 0, err
        assert second.wait(timeout=120) == 0, second.communicate()

        summaries, _ = records.list_summaries(target.manager)
        assert [s.id for s in summaries] == ["b2"], f"round {round_} after {step}: {out}"
        assert_consistent(target.manager)
        put_back += ", kept 0 " in out.replace(";", ",")
    # The intent written after the retire listed intents and references: the retire deleted
    # hello's objects, and the publish, having seen its tombstone, put them back.
    assert put_back >= 2
