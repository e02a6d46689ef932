"""The miss figures: what a cold miss of a small dSYM costs from the helper's exec to its
answer, beside the floor a C helper would pay (`python -c pass`, then `curl -o` of the
same URL), over HTTP, over HTTPS and from an s3:// store; and `dsymfind fetch` of 100 small
dSYMs from one server beside `curl --parallel` of the same URLs.

A small dSYM moves in a millisecond: these figures are the fixed cost of every download
(the downloader's start, its imports, verification, admission, and how the helper learns
the answer is ready). Cold: every timed helper run finds a fresh cache and no remembered
answer (hyperfine's --prepare empties the cache once the last run's downloader let go of
its lock); the measured processes' home, and so the settings snapshot, stays.
bench.py runs them after its own figures, or alone with `--only miss`.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bench_fixtures as fixtures
from bench_core import CLI, HELPER, PYTHON, Bench, BenchError, Figure, Pair
from support.symbol_server import SymbolServer, self_signed

from dsymfind import helper, paths, settings
from dsymfind.fetch import batch
from dsymfind.fetch import resident as resident_module
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

HTTP_GOAL, TLS_GOAL, S3_GOAL, BATCH_GOAL = 2.0, 2.5, 2.5, 1.5
BATCH_COUNT = 100
# Missing images in the session figure: "thirty missing app images" of a first debug session.
SESSION_MISSES = 30
# The figures' configurations, each with a cache of its own.
MISS, MISS_TLS, MISS_S3, MISS_BATCH = "miss", "miss-tls", "miss-s3", "miss-batch"
S3_PREFIX = "bench-miss/"
# Which resident downloader a timed miss finds: none (the first miss of a session, with no
# login agent), the one the first miss forked (a session's later misses), or the login
# agent's (`dsymForUUID --resident-downloader`, running before the session began).
NO_RESIDENT, FORKED_RESIDENT, AGENT_RESIDENT = "none", "forked", "agent"
WHEN = {
    NO_RESIDENT: "the first of a session, no login agent (no resident downloader)",
    FORKED_RESIDENT: "with the resident downloader the first miss forked (a session's later misses)",
    AGENT_RESIDENT: "the first of a session, with the login agent's resident downloader",
}
HOW = {
    NO_RESIDENT: "the cache emptied before each run (hyperfine --prepare), so no resident "
    "downloader: the first miss of a session where the login agent is not installed (its "
    "downloader forks one)",
    FORKED_RESIDENT: "the resident downloader the first miss started alive, the cache emptied of "
    "everything but its socket before each run (hyperfine --prepare): every later miss of a "
    "debugging session",
    AGENT_RESIDENT: "the login agent's resident (`dsymForUUID --resident-downloader`, as "
    "launchd runs it) started before the rounds, the cache emptied of everything but its "
    "socket before each run (hyperfine --prepare): the first miss of a session where "
    "`dsymfind install` loaded the agent",
}


class MissFigures:
    """The cold-miss figures; `s3` (bench.py's Suite) starts the S3 engine and publishes."""

    def __init__(self, bench: Bench, s3: Any = None) -> None:
        self.bench, self.s3 = bench, s3
        self.tree = fixtures.BundleTree(bench.work / "miss-tree", BATCH_COUNT)
        self.served = bench.work / "miss-served"
        self.paths: list[str] = []  # URL path of bundle n's DWARF file on the servers

    def steps(self) -> list[Callable[[], None]]:
        return [self.prepare_miss, self.http_figure, self.https_figure, self.s3_figure]

    @property
    def uuid(self) -> str:
        return fixtures.bench_uuid(0)

    def prepare_miss(self) -> None:
        self.tree.build()
        self.paths = [
            fixtures.serve_native(self.served, fixtures.bench_uuid(n), self.tree.dwarf(n))
            for n in range(BATCH_COUNT)
        ]

    def config(self, name: str, server: str) -> None:
        cache = json.dumps(str(self.bench.cache(name)))
        self.bench.write_config(name, f"cache_dir = {cache}\ntimeout = 600\n{server}")

    def cold_rounds(self, name: str, env: dict[str, str], floor: list[str], resident: str) -> Pair:
        """The helper's cold miss beside `python -c pass` then `floor`, alternating;
        `resident`: which resident downloader each run finds (WHEN)."""
        bench = self.bench
        cache = bench.cache(name)
        lock = CachePaths(str(cache)).lock_file(uuid_hex(self.uuid))
        # Once the last run's downloader let go (it links the answer, then writes its
        # record, then exits): a fresh cache for the next run, but for the resident's
        # socket when it is to stay.
        emptied = (
            f"rm -rf {shlex.quote(str(cache))}"
            if resident == NO_RESIDENT
            else f"find {shlex.quote(str(cache))} -mindepth 1 -maxdepth 1 ! -name locks "
            f"-exec rm -rf {{}} + && find {shlex.quote(str(Path(lock).parent))} -mindepth 1 "
            f"! -name {resident_module.SOCKET_NAME} -delete"
        )
        prepare = [
            "sh",
            "-c",
            f"mkdir -p {shlex.quote(str(Path(lock).parent))} && "
            f"flock {shlex.quote(lock)} true && {emptied}",
        ]
        shutil.rmtree(cache, ignore_errors=True)
        reference = ["sh", "-c", f"{shlex.quote(PYTHON)} -c pass && {shlex.join(floor)}"]
        with self._agent(cache, env, running=resident == AGENT_RESIDENT):
            # The settings snapshot, the bytecode: as a user's; and the forked resident,
            # where one is wanted (the agent's serves this miss too).
            bench.expect_found(self.uuid, env)
            return bench.compare(
                [HELPER, self.uuid], reference, env, runs=10, warmup=2, prepare=prepare
            )

    @contextlib.contextmanager
    def _agent(self, cache: Path, env: dict[str, str], *, running: bool) -> Iterator[None]:
        """The login agent's resident for `cache` while the block runs, when `running`."""
        if not running:
            yield
            return
        agent = subprocess.Popen(
            [HELPER, *helper.RESIDENT_AGENT_ARGS],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
        try:
            socket_path = resident_module.socket_path(CachePaths(str(cache)))
            end = time.monotonic() + 60
            while not resident_module.listening(socket_path):
                if agent.poll() is not None or time.monotonic() > end:
                    raise BenchError(f"the login agent's resident did not start ({agent.poll()})")
                time.sleep(0.05)
            yield
        finally:
            agent.terminate()
            agent.wait(60)

    def judge(self, figure: Figure, pair: Pair, goal: float, how: str, resident: str) -> None:
        figure.notes.append(
            f"{how}; {self.bench.scale.rounds} alternating hyperfine rounds of 10 runs, "
            + HOW[resident]
            + ". The reference is `sh -c 'python -c pass && curl ...'`: the shell's own start "
            "counts against it."
        )
        self.bench.judge(figure, pair, goal)

    def both(
        self,
        name: str,
        env: dict[str, str],
        floor: list[str],
        about: tuple[str, str, float, str],
    ) -> None:
        """The figure with each resident downloader a miss may find (WHEN), in the default
        settings, each judged; `about`: its title, its reference, its goal and how it is
        served."""
        title, reference, goal, how = about
        env = _in_default_settings(env)
        for resident in (NO_RESIDENT, AGENT_RESIDENT, FORKED_RESIDENT):
            pair = self.cold_rounds(name, env, floor, resident)
            figure = Figure(f"{title}, {WHEN[resident]}", reference, f"≤ {goal:g}x")
            self.judge(figure, pair, goal, how, resident)

    def http_figure(self) -> None:
        bench = self.bench
        size = self.tree.dwarf(0).stat().st_size
        with SymbolServer(self.served) as server:
            self.config(MISS, f'[[servers]]\nurl = "{server.url}/"\nlayout = "native"\n')
            env = bench.env(MISS)
            out = str(bench.work / "miss-curl.out")
            floor = ["curl", "-sSf", "-o", out, server.url + self.paths[0]]
            title = (
                f"cold miss of a small dSYM ({size / 1024:.0f} KiB), helper exec to answer, "
                "loopback HTTP"
            )
            reference = "`python -c pass` + `curl -o` of the same URL"
            how = "SymbolServer on loopback (tests/support/symbol_server.py), native layout"
            self.both(MISS, env, floor, (title, reference, HTTP_GOAL, how))
            self.session_figure(server, env)
            self.batch_figure(server)

    def session_figure(self, server: SymbolServer, env: dict[str, str]) -> None:
        """A debugging session's misses: LLDB asks for one missing image after another;
        with no resident downloader at its start, then with the login agent's."""
        for resident in (NO_RESIDENT, AGENT_RESIDENT):
            self._session(server, env, resident)

    def _session(self, server: SymbolServer, env: dict[str, str], resident: str) -> None:
        bench = self.bench
        env = _in_default_settings(env)
        cache = bench.cache(MISS)
        uuids = [fixtures.bench_uuid(n) for n in range(SESSION_MISSES)]
        helpers = " && ".join(f"{shlex.quote(HELPER)} {uuid} >/dev/null" for uuid in uuids)
        out = shlex.quote(str(bench.work / "miss-curl.out"))
        floors = " && ".join(
            f"{shlex.quote(PYTHON)} -c pass && curl -sSf -o {out} {server.url + path}"
            for path in self.paths[:SESSION_MISSES]
        )
        # Each session begins with no resident downloader (a resident exits once its
        # socket is gone), or with the agent's alone: the cache emptied once the last
        # run's downloads let go of their locks, but for the agent's socket.
        locks = shlex.quote(str(Path(CachePaths(str(cache)).locks)))
        emptied = (
            f"rm -rf {shlex.quote(str(cache))}"
            if resident == NO_RESIDENT
            else f"find {shlex.quote(str(cache))} -mindepth 1 -maxdepth 1 ! -name locks "
            f"-exec rm -rf {{}} + && find {locks} -mindepth 1 "
            f"! -name {resident_module.SOCKET_NAME} -delete"
        )
        prepare = [
            "sh",
            "-c",
            f'mkdir -p {locks} && for f in {locks}/*.lock; do flock "$f" true; done; {emptied}',
        ]
        shutil.rmtree(cache, ignore_errors=True)
        with self._agent(cache, env, running=resident == AGENT_RESIDENT):
            pair = bench.compare(
                ["sh", "-c", helpers], ["sh", "-c", floors], env, runs=3, warmup=1, prepare=prepare
            )
        figure = Figure(
            f"a debugging session's {SESSION_MISSES} cold misses of small dSYMs, one after "
            "another as LLDB asks, helper exec to answer, loopback HTTP, "
            + ("no login agent" if resident == NO_RESIDENT else "with the login agent"),
            f"{SESSION_MISSES} times `python -c pass` + `curl -o` of the same URLs",
            f"≤ {HTTP_GOAL:g}x",
        )
        figure.notes.append(
            f"{SESSION_MISSES} helpers one after another, each for another missing UUID, in the "
            "default settings: "
            + (
                "the first miss starts an interpreter for its downloader, which leaves the "
                "resident downloader the others' downloads are forked from"
                if resident == NO_RESIDENT
                else "the login agent's resident (`dsymForUUID --resident-downloader`) started "
                "before the rounds, every download forked from it"
            )
            + f". The cache emptied before each session; {bench.scale.rounds} alternating "
            "hyperfine rounds of 3 runs."
        )
        bench.judge(figure, pair, HTTP_GOAL)

    def batch_figure(self, server: SymbolServer) -> None:
        bench = self.bench
        self.config(MISS_BATCH, f'[[servers]]\nurl = "{server.url}/"\nlayout = "native"\n')
        env = bench.env(MISS_BATCH)
        uuids = [fixtures.bench_uuid(n) for n in range(BATCH_COUNT)]
        # Every run of either side writes into a folder of its own, never used before, and
        # the folders go only after the last round: on ext4, files and folders made right
        # after as many were deleted cost several times more (the index figures found it),
        # which a `rm -rf` of the last run's cache before each run put on both sides.
        caches, fetched = bench.work / "miss-batch-caches", bench.work / "miss-parallel"
        caches.mkdir(exist_ok=True)
        fetched.mkdir(exist_ok=True)
        fetch = (
            f"{paths.CACHE_DIR_ENV}=$(mktemp -d -p {shlex.quote(str(caches))}) "
            f"exec {shlex.join([CLI, 'fetch', *uuids])}"
        )
        # As many at once as the batch (fetch/batch.py), each on a connection of its own
        # as the downloader's: kept alive, the test server's answers wait for a delayed ACK
        # each, and 50 at once (curl's default) overflow its listen queue.
        curl = ["curl", "-sSf", "--parallel", "--parallel-max", str(batch.MAX_PARALLEL)]
        curl += ["-H", "Connection: close"]
        outputs = " ".join(
            f'-o "$d/{n}" {shlex.quote(server.url + path)}' for n, path in enumerate(self.paths)
        )
        parallel = (
            f"d=$(mktemp -d -p {shlex.quote(str(fetched))}) && exec {shlex.join(curl)} {outputs}"
        )
        pair = bench.compare(["sh", "-c", fetch], ["sh", "-c", parallel], env, runs=3, warmup=1)
        figure = Figure(
            f"`dsymfind fetch` of {BATCH_COUNT} small dSYMs from one loopback HTTP server, cold",
            f"`curl --parallel --parallel-max {batch.MAX_PARALLEL}` of the same URLs",
            f"≤ {BATCH_GOAL:g}x",
        )
        figure.notes.append(
            "prefetch's batch (fetch/batch.py) given the UUIDs directly; every run of either "
            "side into a folder never used before (a new cache, `DSYMFIND_CACHE_DIR`; a new "
            "folder for curl's files), both through `sh -c` and `mktemp -d`, all of them "
            "removed only after the last round; "
            f"{bench.scale.rounds} alternating hyperfine rounds of 3 runs."
        )
        bench.judge(figure, pair, BATCH_GOAL)
        shutil.rmtree(caches, ignore_errors=True)
        shutil.rmtree(fetched, ignore_errors=True)
        import bench_layout_floor  # here: it builds on this module

        bench_layout_floor.floor_figure(self, server, env)

    def https_figure(self) -> None:
        bench = self.bench
        title = "cold miss of a small dSYM, helper exec to answer, loopback HTTPS"
        reference = "`python -c pass` + `curl --cacert -o` of the same URL"
        if shutil.which("openssl") is None:
            figure = Figure(title, reference, f"≤ {TLS_GOAL:g}x")
            figure.notes.append("not measured: openssl, which makes the certificate, is missing")
            bench.figures.append(figure)
            return
        folder = bench.work / "miss-tls"
        folder.mkdir(exist_ok=True)
        context, cert = self_signed(folder)
        with SymbolServer(self.served, tls=context) as server:
            self.config(MISS_TLS, f'[[servers]]\nurl = "{server.url}/"\nlayout = "native"\n')
            env = {**bench.env(MISS_TLS), "SSL_CERT_FILE": cert}
            out = str(bench.work / "miss-curl.out")
            floor = ["curl", "-sSf", "--cacert", cert, "-o", out, server.url + self.paths[0]]
            how = (
                "the same server over TLS, a self-signed certificate the clients trust "
                "(SSL_CERT_FILE, `--cacert`)"
            )
            self.both(MISS_TLS, env, floor, (title, reference, TLS_GOAL, how))

    def s3_figure(self) -> None:
        bench = self.bench
        title = (
            "cold miss of a small dSYM, helper exec to answer, from an s3:// store (SeaweedFS "
            "on loopback)"
        )
        reference = "`python -c pass` + `curl -o` of a presigned URL of the same object"
        reason = "the S3 engine is bench.py's" if self.s3 is None else self.s3.start_seaweed()
        if reason is not None:
            figure = Figure(title, reference, f"≤ {S3_GOAL:g}x")
            figure.notes.append(f"not measured: {reason}")
            bench.figures.append(figure)
            return
        try:
            bundle = self.tree.bundle(0)
            _, out = bench.timed_run(
                [*self.s3.publish_command(S3_PREFIX, str(bundle)), "--json"],
                self.s3.s3_env("ci"),
            )
            keys = [r["key"] for r in json.loads(out) if r["key"].endswith("debuginfo")]
            if len(keys) != 1:
                raise BenchError(f"the miss figure's object was not published: {out[-300:]!r}")
            endpoint = self.s3.seaweed.endpoint_url
            self.config(
                MISS_S3,
                f'[[servers]]\nurl = "s3://symbols/{S3_PREFIX}"\nendpoint_url = "{endpoint}"\n'
                'region = "us-east-1"\nlayout = "unified"\n',
            )
            env = self.s3.s3_env("reader", MISS_S3)
            presigned = self.s3.seaweed.client("reader").generate_presigned_url(
                "get_object", Params={"Bucket": "symbols", "Key": S3_PREFIX + keys[0]}
            )
            floor = ["curl", "-sSf", "-o", str(bench.work / "miss-curl.out"), presigned]
            how = "published by `dsymfind publish` (unified layout)"
            self.both(MISS_S3, env, floor, (title, reference, S3_GOAL, how))
        finally:
            self.s3.stop_seaweed()


def _in_default_settings(env: dict[str, str]) -> dict[str, str]:
    """`env` without bench_core's override: a resident downloader as a user's miss has."""
    return {name: value for name, value in env.items() if name != settings.RESIDENT_ENV}
