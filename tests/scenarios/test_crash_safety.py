"""A downloader killed with SIGKILL at any instant leaves a valid cache, and the next run
succeeds.

The kill points are not guessed: a counting run records every file-system mutation the
real downloader makes (creating, writing-to-disk, renaming, linking, removing), then one
trial per mutation kills a fresh downloader process just before it. That covers the
download, the unpacking of the zip, the rename of the bundle into place and every link
made after it. Kills at random instants during a slow transfer complete the picture.
`dsymfind check` (check.Checker) is the oracle.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, UNIVERSAL_UUIDS

from dsymfind import settings
from dsymfind.cache import check
from dsymfind.fetch.downloader import run_download
from dsymfind.local_lookup import Lookup
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry

UUID = UNIVERSAL_UUIDS["arm64"]
# Runs `dsymfind ARGS...` with os's mutating calls counted; SIGKILL before call number N.
KILLER = """
import os, signal, sys
from dsymfind import _bare_os
from dsymfind.main import main

kill_at, count = int(sys.argv[1]), 0

def counted(real):
    def call(*args, **kwargs):
        global count
        count += 1
        if count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call

for name in ("open", "rename", "replace", "symlink", "mkdir", "unlink", "rmdir", "fsync"):
    # The hot-path modules call posix's functions through _bare_os: counted there as well.
    for module in (os, _bare_os):
        if hasattr(module, name):
            setattr(module, name, counted(getattr(module, name)))
status = main(sys.argv[2:])
print(count)
sys.exit(status)
"""
MAX_TRIALS = 36
DOWNLOAD = ("_download", UUID, "--ignore-negative-cache")
RANDOM_KILLS = 6


def zipped_bundle() -> bytes:
    """universal.dSYM (two UUIDs, per-UUID plists to write, two links to make) as a zip."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        root = FIXTURES / "universal.dSYM"
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, f"universal.dSYM/{path.relative_to(root)}")
    return out.getvalue()


@pytest.fixture(scope="module")
def server() -> Iterator[ss.SymbolServer]:
    with ss.SymbolServer() as running:
        running.route(f"/{UUID}.zip", ss.body(zipped_bundle()))
        yield running


@pytest.fixture
def env(
    server: ss.SymbolServer, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    monkeypatch.setenv("DSYMFIND_SERVERS", f"template={server.url}/{{UUID}}.zip")
    return dict(os.environ)


def run_killer(
    env: dict[str, str], kill_at: int, command: tuple[str, ...] = DOWNLOAD
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KILLER, str(kill_at), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_valid_then_recovers(cache: Path, env: dict[str, str], what: str) -> None:
    cache = CachePaths(str(cache))
    report = check.Checker(cache, stale_after=3600).run()
    invalid = [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID]
    assert invalid == [], what
    assert run_download(UUID, env, ignore_negative_cache=True, copy_executable=False) == 0, what
    answer = Lookup(settings.load(env)).find(UUID)
    assert answer is not None, what
    assert os.path.isfile(answer["DBGDSYMPath"]), what
    after = check.Checker(cache, stale_after=3600).run()
    assert after.count(check.INVALID) == 0, what
    # The next run for the UUID cleared its own staging debris.
    assert not [f for f in after.findings if "staging" in f.reason], what


def test_sigkill_before_every_mutation_leaves_a_valid_cache(
    env: dict[str, str], cache_dir: Path
) -> None:
    counting = run_killer(env, 0)
    assert counting.returncode == 0, counting.stderr
    mutations = int(counting.stdout.split()[-1])
    assert mutations > 20  # download, unpack, publish, link: far more than a handful
    points = list(range(1, mutations + 1))
    if len(points) > MAX_TRIALS:
        step = len(points) / MAX_TRIALS
        points = sorted({points[int(i * step)] for i in range(MAX_TRIALS)} | {points[-1]})
    killed = 0
    for kill_at in points:
        shutil.rmtree(cache_dir, ignore_errors=True)
        done = run_killer(env, kill_at)
        assert done.returncode in (-signal.SIGKILL, 0), done.stderr
        killed += done.returncode == -signal.SIGKILL
        assert_valid_then_recovers(cache_dir, env, f"killed before mutation {kill_at}/{mutations}")
    # Timing varies the count a little (progress records are written at most every 0.1 s),
    # so the last few points may lie past the end of a run: those runs complete.
    assert killed >= len(points) - 5


def test_sigkill_at_random_instants_of_a_slow_transfer(
    server: ss.SymbolServer, env: dict[str, str], cache_dir: Path
) -> None:
    data = zipped_bundle()
    server.route(f"/{UUID}.zip", ss.slow(data, step=len(data) // 20 + 1, interval=0.02))
    rng = random.Random(7)
    try:
        for trial in range(RANDOM_KILLS):
            shutil.rmtree(cache_dir, ignore_errors=True)
            process = subprocess.Popen(
                [sys.executable, "-m", "dsymfind", "_download", UUID, "--ignore-negative-cache"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.3, 1.0))  # start-up takes a few hundred ms, then bytes flow
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            assert_valid_then_recovers(cache_dir, env, f"random kill {trial}")
    finally:
        server.route(f"/{UUID}.zip", ss.body(data))


INDEXED_BUNDLES = 12
INDEX_KILLS = 8


def test_sigkill_of_an_index_at_a_few_points_leaves_a_valid_cache(
    env: dict[str, str], cache_dir: Path, tmp_path: Path
) -> None:
    """New links are made whole under their final names, each folder once: a cold index
    killed before any of its mutations leaves a cache check calls valid, and the next run
    links every bundle."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
    import bench_fixtures

    bundles = bench_fixtures.BundleTree(tmp_path / "tree", INDEXED_BUNDLES)
    bundles.build()
    command = ("index", str(bundles.root))
    counting = run_killer(env, 0, command)
    assert counting.returncode == 0, counting.stderr
    mutations = int(counting.stdout.split()[-1])
    assert mutations > 5 * INDEXED_BUNDLES  # five folders and a link per UUID
    step = mutations / INDEX_KILLS
    killed = 0
    for kill_at in sorted({1 + int(i * step) for i in range(INDEX_KILLS)} | {mutations}):
        shutil.rmtree(cache_dir, ignore_errors=True)
        done = run_killer(env, kill_at, command)
        assert done.returncode in (-signal.SIGKILL, 0), (kill_at, done.stderr)
        killed += done.returncode == -signal.SIGKILL
        cache = CachePaths(str(cache_dir))
        report = check.Checker(cache, stale_after=3600).run()
        assert [f for f in report.findings if f.kind == check.INVALID] == [], kill_at
        again = subprocess.run(
            [sys.executable, "-m", "dsymfind", *command], env=env, capture_output=True, text=True
        )
        assert again.returncode == 0, again.stderr
        for number in range(INDEXED_BUNDLES):
            link = tree_entry(cache.uuids, bench_fixtures.bench_uuid(number))
            assert os.path.realpath(link) == str(bundles.dwarf(number).resolve()), kill_at
        assert check.Checker(cache, stale_after=3600).run().count(check.INVALID) == 0
    # The first run also wrote files outside the cache (the settings snapshot), so the
    # last point or two may lie past the end of a run: those runs complete.
    assert killed >= INDEX_KILLS - 1
