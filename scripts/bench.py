"""dsymfind's benchmark suite: every figure side by side with its reference.

Run through `scripts/bench` (it bootstraps the venv and the tools). Each timed figure is
measured together with its reference in the same run, in alternating rounds, and
reported as the median of the per-round ratios, so load from other work on the machine
weighs on both sides alike. Fixtures are generated in a temporary folder; nothing
outside it and the output file is written. `--quick` runs a small version of every
figure (no goal is judged on it) so the suite cannot rot; `--only big` runs only the
big-download figures (scripts/bench_big.py), `--only symbolicate` only the symbolicate
ones (scripts/bench_symbolicate.py), `--only s3` only the S3 publish and fetch ones,
`--only builds` only the `dsymfind builds` one, `--only index` only the `dsymfind index` ones,
`--only check-build` only the check-build one (scripts/bench_check_build.py), `--only soak` only the soak
(scripts/soak.py), `--only batches` only the batch one (scripts/bench_batches.py), `--only retire` only
`dsymfind retire`'s (scripts/bench_retire.py), `--only miss` only the cold-miss ones
(scripts/bench_miss.py), `--only system-index` only the DeviceSupport index one
(scripts/bench_system_index.py), `--only system-symbols` only the symbol-table symbolicate
one (scripts/bench_system_symbols.py), to iterate on them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import plistlib
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import bench_atos
import bench_batches
import bench_big
import bench_check_build
import bench_fixtures as fixtures
import bench_groups
import bench_miss
import bench_retire
import bench_symbolicate
import bench_symbolicate_floor
import bench_system_index
import bench_system_symbols
from bench_core import (
    CLI,
    FULL,
    HELPER,
    KIB,
    PYTHON,
    QUICK,
    ROOT,
    RUN_TIMEOUT,
    Bench,
    BenchError,
    Figure,
    Pair,
    Scale,
    ms,
    slices,
)
from support.fixtures import FAKES  # stand-ins for the macOS tools
from support.symbol_server import SymbolServer

from dsymfind import paths, settings
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry, uuid_hex

MISSING_UUID = "0BE7C0DE-0000-4000-8000-00000000DEAD"
# Never contacted: answers come from the negative cache before any request.
UNREACHABLE = "http://127.0.0.1:9/"
# The S3 engine (tests/support/seaweed.py, imported only when its figures run: it needs boto3):
# its bucket and region, and where each figure keeps its objects in that bucket.
SYMBOLS = "symbols"
S3_REGION = "us-east-1"
PUBLISH_PREFIX = "bench-publish/"
UPLOAD_PREFIX = "bench-upload/"
REPUBLISH_PREFIX = "bench-republish/"
FETCH_PREFIX = "bench-fetch/"
BUILDS_PREFIX = "bench-builds/"
# The builds figure's store: as many build records as a busy team's CI makes in years.
BUILD_RECORDS = 10_000
PLAIN_PREFIX = "bench-fetch-plain/"
# How `dsymfind publish --verbose` says what became of each object (a key follows).
PUBLISHED, EXISTS = b"  published ", b"  exists "
# `dsymfind publish` writes each bundle's DWARF file and the metadata naming it.
OBJECTS_PER_BUNDLE = 2
# Configured for the start-up figures' s3:// server, never contacted (as UNREACHABLE).
S3_UNREACHABLE = "http://127.0.0.1:9"
# Modules that must stay out of the helper's hit and negative answers.
S3_MODULES = (
    "botocore",
    "boto3",
    "s3transfer",
    "dsymfind.stores.s3.store",
    "dsymfind.stores.s3.api",
    "dsymfind.stores.s3.keys",
    "dsymfind.stores.s3.presign",
    "dsymfind.stores.s3.sigv4",
    "dsymfind.stores.s3.upload",
)
FIRST_BYTE_ROUNDS = 5
# Rounds of the floors under the MetricKit figure (scripts/bench_symbolicate_floor.py), at
# full scale and --quick: each run is a tenth of a second, and the VM's scheduling makes
# single runs spiky.
FLOOR_ROUNDS, QUICK_FLOOR_ROUNDS = 10, 2
# The soak's size at --quick (a full run uses scripts/soak.py's own: 8 helpers at once, 3000
# lookups, 50 kills), how long it may take at most, and how many violations a note quotes.
SOAK_QUICK = ("--workers", "2", "--lookups", "20", "--kills", "2")
SOAK_TIMEOUT = 3600
SOAK_VIOLATIONS_SHOWN = 5
STRACE_READS = ["strace", "-f", "-y", "-e", "trace=read,pread64,readv,preadv,mmap"]


class Suite(Bench):
    """bench.py's own figures, and what the whole run prepares and stops: the bundle tree,
    the 200 MB dSYM on the loopback server, the S3 engine."""

    def __init__(self, work: Path, scale: Scale, only: str | None = None) -> None:
        super().__init__(work, scale)
        self.only = only
        self.tree = fixtures.BundleTree(work / "tree", scale.bundles)
        self.large_dwarf = work / "large" / "big.dSYM" / "Contents" / "Resources" / "DWARF" / "big"
        self.seaweed: Any = None  # support.seaweed.SeaweedS3, while the S3 figures run
        self.large_path = ""

    # -- fixtures ------------------------------------------------------------------

    def prepare(self) -> None:
        started = time.monotonic()
        self.tree.build()
        self.tree.link_into_cache_tree(self.cache("tree") / "uuids", self.scale.sequential)
        self.tree.link_into_cache_tree(self.cache("search") / "uuids", 1)
        self.tree.link_into_cache_tree(self.cache("s3-tree") / "uuids", 1)
        self.large_dwarf = fixtures.large_dsym(self.work / "large", self.scale.large_mb)
        (large,) = slices(self.large_dwarf)
        self.large_uuid = large
        self.large_path = fixtures.serve_native(self.work / "served", large, self.large_dwarf)
        self.server = SymbolServer(self.work / "served").start()
        self._write_configs()
        self.findings.append(
            f"Fixtures generated in {time.monotonic() - started:.0f} s: {self.scale.bundles} "
            f"bundles, a {self.large_dwarf.stat().st_size / 1e6:.0f} MB dSYM."
        )

    def prepare_index(self) -> None:
        """Only what the `dsymfind index` figures need: the bundle tree and its config."""
        self.tree.build()
        self._write_index_config()

    def _write_index_config(self) -> None:
        self.write_config("index", f"cache_dir = {json.dumps(str(self.cache('index')))}\n")

    def _write_configs(self) -> None:
        assert self.server is not None
        tree = json.dumps(str(self.tree.root))
        server = f'[[servers]]\nurl = "{self.server.url}/"\nlayout = "native"\n'
        self.write_config("tree", f"cache_dir = {json.dumps(str(self.cache('tree')))}\n")
        self.write_config(
            "negative",
            f"cache_dir = {json.dumps(str(self.cache('negative')))}\nsearch_paths = [{tree}]\n"
            f'[[servers]]\nurl = "{UNREACHABLE}"\nlayout = "native"\n',
        )
        self.write_config(
            "search",
            f"cache_dir = {json.dumps(str(self.cache('search')))}\nsearch_paths = [{tree}]\n",
        )
        self.write_config(
            "fetch",
            f"cache_dir = {json.dumps(str(self.cache('fetch')))}\ntimeout = 600\n{server}",
        )
        self._write_index_config()
        # The start-up figures' configurations again, with an s3:// server beside them.
        never = _s3_server(f"s3://{SYMBOLS}/", S3_UNREACHABLE)
        self.write_config(
            "s3-tree", f"cache_dir = {json.dumps(str(self.cache('s3-tree')))}\n{never}"
        )
        self.write_config(
            "s3-negative",
            f"cache_dir = {json.dumps(str(self.cache('s3-negative')))}\n"
            f"search_paths = [{tree}]\n{never}",
        )

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.stop_seaweed()

    def stop_seaweed(self) -> None:
        engine, self.seaweed = self.seaweed, None
        if engine is not None:
            engine.stop()

    def helper_answer(
        self, uuid: str, env: dict[str, str], helper: str = HELPER
    ) -> dict[str, object]:
        """One helper run held to the contract; its answer for `uuid` ({} when none)."""
        done = subprocess.run(
            [helper, uuid], env=env, capture_output=True, check=False, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0 or done.stderr or not done.stdout.startswith(b"<?xml"):
            raise BenchError(f"helper broke its contract for {uuid}: {done!r}")
        document = plistlib.loads(done.stdout)
        entry = document.get(uuid, {})
        if "DBGError" in entry:
            raise BenchError(f"helper answered an error for {uuid}: {entry['DBGError']}")
        path = entry.get("DBGDSYMPath")
        if path is not None and not os.path.exists(path):
            raise BenchError(f"helper named a path that does not exist: {path}")
        return entry

    def expect_found(self, uuid: str, env: dict[str, str], helper: str = HELPER) -> None:
        if "DBGDSYMPath" not in self.helper_answer(uuid, env, helper):
            raise BenchError(f"{helper} did not find {uuid}")

    # -- the figures ---------------------------------------------------------------

    def start_up_figures(self) -> None:
        tree_env, uuid = self.env("tree"), fixtures.bench_uuid(0)
        self.expect_found(uuid, tree_env)  # builds the settings snapshot, remembers the answer
        bare = [PYTHON, "-c", "pass"]
        hit = self.compare([HELPER, uuid], bare, tree_env)
        self.judge(
            Figure("helper answer from the cache tree", "same venv's `python -c pass`", "≤ 1.3x"),
            hit,
            1.3,
        )
        self.hot_path_profile("cache tree", uuid, tree_env)

        negative_env = self.env("negative")
        _remember_absent(self.cache("negative"), MISSING_UUID, negative_env)
        if self.helper_answer(MISSING_UUID, negative_env):  # walks the tree once
            raise BenchError("the negative cache did not answer")
        negative = self.compare([HELPER, MISSING_UUID], bare, negative_env)
        self.judge(
            Figure(
                f"helper answer from the negative cache ({self.scale.bundles}-bundle search path "
                "configured)",
                "same venv's `python -c pass`",
                "≤ 1.3x",
            ),
            negative,
            1.3,
        )
        self.hot_path_profile("negative cache", MISSING_UUID, negative_env)

    def launcher_figure(self) -> None:
        """The helper as lldb runs it after `dsymfind install`: `#!python -IS`, no site."""
        launcher, uuid, env = self.install_launcher(), fixtures.bench_uuid(0), self.env("tree")
        self.expect_found(uuid, env, launcher)
        pair = self.compare([launcher, uuid], [PYTHON, "-c", "pass"], env)
        figure = Figure(
            "a cache hit through the registered launcher",
            "same venv's `python -c pass`",
            "≤ 1.0x",
        )
        figure.notes.append(
            f"The launcher `dsymfind install` registers ({Path(launcher).name} in the state "
            "folder) runs the venv's Python with -IS: isolated from lldb's PYTHON* variables "
            "and without `site`, which `python -c pass` imports; the folders dsymfind "
            "imports from are written into it."
        )
        floor = self.compare([launcher, uuid], [PYTHON, "-I", "-S", "-c", "pass"], env)
        figure.notes.append(
            f"Against the floor, the same interpreter with the launcher's flags doing nothing "
            f"(`python -I -S -c pass`, {ms(floor.reference)}, in alternating rounds of their "
            f"own): {ms(floor.subject)}, {floor.ratio:.2f}x; what the hit adds above it is "
            "dsymfind's modules and the lookup (see the profile findings)."
        )
        self.judge(figure, pair, 1.0)

    def install_launcher(self) -> str:
        """`dsymfind install` against the test suite's stand-in `defaults` and `launchctl`;
        the helper it registered."""
        state = self.work / "macos"
        env = self.env()  # no DSYMFIND_CONFIG: install refuses what lldb would not see
        env["PATH"] = f"{FAKES}{os.pathsep}{env.get('PATH', '')}"
        env["FAKE_MACOS_STATE"] = str(state)
        done = subprocess.run(
            [CLI, "install"], env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0:
            raise BenchError(f"`dsymfind install` failed: {done.stderr.strip()[-500:]}")
        prefs = plistlib.loads((state / "com.apple.DebugSymbols.plist").read_bytes())
        return str(prefs["DBGShellCommands"])

    def search_figure(self) -> None:
        env = self.env("search")
        reference_uuid = fixtures.bench_uuid(0)  # also in this cache's UUID tree
        warm_uuid = fixtures.bench_uuid(self.scale.bundles - 1)
        started = time.monotonic()
        self.expect_found(warm_uuid, env)  # the first walk: reads every bundle
        walk = time.monotonic() - started
        uuid = fixtures.bench_uuid(self.scale.bundles // 2)
        self.expect_found(uuid, env)
        self.expect_found(reference_uuid, env)
        remembered = self.cache("search") / "answers" / uuid_hex(uuid)
        # Each timed run starts with no remembered answer: the index's own answer is timed.
        pair = self.compare(
            [HELPER, uuid], [HELPER, reference_uuid], env, prepare=["rm", "-f", str(remembered)]
        )
        figure = Figure(
            f"helper answer via search paths holding {self.scale.bundles} bundles (warm index, "
            "no remembered answer)",
            "cache-tree answer",
            "≤ 1.5x",
        )
        figure.notes.append(
            f"The first lookup, which walked the tree and read all {self.scale.bundles} bundles "
            f"in the helper, took {walk:.2f} s. The reference is a remembered cache-tree answer "
            "with the same configuration; a remembered search-path answer costs the same."
        )
        self.judge(figure, pair, 1.5)
        self.hot_path_profile("search path (warm index)", uuid, env, forget=remembered)

    def sequential_figure(self) -> None:
        tree_env, count = self.env("tree"), self.scale.sequential
        uuids = [fixtures.bench_uuid(n) for n in range(count)]
        for uuid in uuids:  # each answered once, as after its download or `dsymfind index`
            self.expect_found(uuid, tree_env)
        helpers = self.work / "sequential-helpers.sh"
        bare = self.work / "sequential-bare.sh"
        helpers.write_text("".join(f"{HELPER} {u} >/dev/null\n" for u in uuids))
        bare.write_text(f"{PYTHON} -c pass\n" * count)
        pair = self.compare(
            ["sh", str(helpers)], ["sh", str(bare)], tree_env, runs=1, warmup=0, rounds=3
        )
        self.judge(
            Figure(
                f"{count} sequential helper lookups of cached UUIDs",
                f"{count} x `python -c pass`",
                "≤ 1.3x",
            ),
            pair,
            1.3,
        )

    def fetch_figures(self) -> None:
        """Helpers at once on the 200 MB dSYM; the cold fetch and its memory are measured on
        the big dSYM (scripts/bench_big.py)."""
        self.concurrency_figure(self.env("fetch"))

    def concurrency_figure(self, env: dict[str, str]) -> None:
        assert self.server is not None
        count, alone, together, ratios, requests = self.scale.concurrent, [], [], [], []
        for _ in range(self.scale.fetch_rounds):
            self.clear_fetch_cache()
            alone.append(self.timed([HELPER, self.large_uuid], env, found=True))
            self.wait_for_downloaders()
            self.clear_fetch_cache()
            before = self.server.count(self.large_path)
            together.append(self.helpers_at_once(count, env))
            self.wait_for_downloaders()
            requests.append(self.server.count(self.large_path) - before)
            ratios.append(together[-1] / alone[-1])
        figure = Figure(
            f"{count} helpers at once for one missing UUID",
            "one helper alone",
            "exactly 1 download; ≤ 1.5x wall",
        )
        figure.measured = f"{ms(statistics.median(together))}; downloads per round: {requests}"
        figure.reference_measured = ms(statistics.median(alone))
        figure.ratio = statistics.median(ratios)
        one_download = all(r == 1 for r in requests)
        if not one_download:
            figure.notes.append(f"expected exactly one download per round, saw {requests}")
        figure.met = one_download and (figure.ratio <= 1.5 or self.scale is QUICK)
        self.figures.append(figure)
        if not one_download:
            raise BenchError(f"{count} helpers made {requests} downloads, not 1 each round")

    def helpers_at_once(self, count: int, env: dict[str, str]) -> float:
        started = time.perf_counter()
        helpers = [
            subprocess.Popen([HELPER, self.large_uuid], env=env, stdout=subprocess.PIPE)
            for _ in range(count)
        ]
        outputs = [h.communicate(timeout=RUN_TIMEOUT)[0] for h in helpers]
        elapsed = time.perf_counter() - started
        if not all(b"DBGDSYMPath" in out for out in outputs):
            raise BenchError("a concurrent helper did not answer with the dSYM")
        return elapsed

    def index_figure(self) -> None:
        figure = Figure(
            f"`dsymfind index` over {self.scale.bundles} dSYM bundles",
            "`llvm-dwarfdump --uuid` over the same files in one call",
            "none for a cold run: it also makes the UUID tree, which llvm-dwarfdump does not "
            "(judged against its mkdir floor below); the usual run, again over unchanged "
            "bundles, must be faster (below)",
        )
        dwarfdump = _dwarfdump()
        if dwarfdump is None:
            figure.notes.append("not measured: no llvm-dwarfdump installed")
            self.figures.append(figure)
            self._index_floor_figures(self.env("index"))  # they need no llvm-dwarfdump
            return
        env, cache = self.env("index"), self.cache("index")
        probe = subprocess.run(
            [CLI, "index", str(self.tree.root)], env=env, capture_output=True, text=True
        )
        if probe.returncode != 0:
            figure.notes.append(f"not measured: `dsymfind index` failed: {probe.stderr.strip()}")
            self.figures.append(figure)
            return
        listing = self.work / "dwarf-files.txt"
        listing.write_text("".join(f"{p}\n" for p in self.tree.dwarf_files()))
        pair = self._index_against(dwarfdump, listing, env, prepare=["rm", "-rf", str(cache)])
        figure.notes.append(
            "Cold: the cache is removed right before each run (hyperfine's prepare), so this "
            "figure also pays what making 50,000 folders right after deleting as many costs "
            "on ext4 (the floor figures below avoid it). "
            f"Reference: {Path(dwarfdump).name} "
            "reading the list of DWARF files from a response file."
        )
        self.findings.append(_index_profile(self.tree.root, env, cache, self.work))
        said = [line for line in probe.stdout.splitlines() if "bundles and zips seen" in line]
        figure.notes.append(f"`dsymfind index` says: {' '.join(said)}")
        self.judge(figure, pair, 1.0)
        figure.met = None  # shown beside llvm-dwarfdump; what judges a cold run is its floor
        self._index_floor_figures(env)
        self._index_rerun_figure(env, dwarfdump, listing)

    def _index_against(
        self, dwarfdump: str, listing: Path, env: dict[str, str], *, prepare: list[str] | None
    ) -> Pair:
        """`dsymfind index` of the tree beside llvm-dwarfdump reading the same DWARF files."""
        return self.compare(
            [CLI, "index", str(self.tree.root)],
            [dwarfdump, "--uuid", f"@{listing}"],
            env,
            rounds=1,
            runs=self.scale.index_runs,
            warmup=0 if prepare else 1,
            prepare=prepare,
        )

    def _index_floor_figures(self, env: dict[str, str]) -> None:
        """The cold index against the UUID tree's folders alone, made by coreutils' `mkdir -p`,
        on the bench's disk and on tmpfs: each run, of either, into a folder never used before."""
        self._index_floor_figure(env, self.work / "fresh-caches", "")
        tmpfs = _tmpfs_folder()
        if tmpfs is None:
            note = "not measured: no tmpfs at /dev/shm"
            figure = self._floor_figure(" on tmpfs")
            figure.notes.append(note)
            self.figures.append(figure)
            return
        with tempfile.TemporaryDirectory(prefix="dsymfind-bench-", dir=tmpfs) as folder:
            self._index_floor_figure(env, Path(folder) / "fresh-caches", " on tmpfs")

    def _floor_figure(self, where: str) -> Figure:
        return Figure(
            f"cold `dsymfind index` of {self.scale.bundles} dSYM bundles{where} "
            "against its mkdir floor",
            "the UUID tree's folders alone, by `xargs mkdir -p`",
            "≤ 3x",
        )

    def _index_floor_figure(self, env: dict[str, str], parent: Path, where: str) -> None:
        figure = self._floor_figure(where)
        parent.mkdir()
        try:
            rounds = self._fresh_rounds(env, parent)
        finally:
            shutil.rmtree(parent, ignore_errors=True)
        index_runs, floor_runs = rounds
        ratios = [i.wall / f.wall for i, f in zip(index_runs, floor_runs, strict=True)]
        pair = Pair.of_rounds([r.wall for r in index_runs], [r.wall for r in floor_runs], ratios)
        figure.notes.append(
            "Floor: five folder levels per UUID (DebugSymbols' layout); the symlinks and the "
            "reads are the index's own. Every run of either, alternating (the floor first in "
            "every other round), goes into a folder never used before: nothing was deleted just "
            "before it (on ext4, making 50,000 folders right after deleting as many costs "
            "several times more, which hid what the index adds: this replaces the figure that "
            "ran both right after `rm -rf`), and all the folders go only after the last round. "
            "Per-round "
            f"ratios {_spread(ratios)}; CPU (user+system) "
            f"{_spread([r.cpu for r in index_runs], ' s')} against "
            f"{_spread([r.cpu for r in floor_runs], ' s')}."
        )
        self.judge(figure, pair, 3.0)

    def _fresh_rounds(self, env: dict[str, str], parent: Path) -> tuple[list[Run], list[Run]]:
        """Alternating rounds of the index and its floor, each into a new folder of `parent`."""
        index_runs: list[Run] = []
        floor_runs: list[Run] = []
        folders = self.work / "fresh-tree-folders.txt"
        for number in range(self.scale.rounds):
            self._write_tree_folders(folders, parent / f"floor-{number}" / "uuids")
            fresh_cache = {**env, paths.CACHE_DIR_ENV: str(parent / f"index-{number}")}
            jobs = [
                ([CLI, "index", str(self.tree.root)], fresh_cache, index_runs),
                (["xargs", "-a", str(folders), "mkdir", "-p"], env, floor_runs),
            ]
            for argv, run_env, runs in jobs if number % 2 == 0 else reversed(jobs):
                runs.append(_timed_run(argv, run_env))
        return index_runs, floor_runs

    def _write_tree_folders(self, listing: Path, tree_root: Path) -> None:
        uuids = [fixtures.bench_uuid(n) for n in range(self.scale.bundles)]
        listing.write_text(
            "".join(f"{os.path.dirname(tree_entry(str(tree_root), u))}\n" for u in uuids)
        )

    def _index_rerun_figure(self, env: dict[str, str], dwarfdump: str, listing: Path) -> None:
        figure = Figure(
            f"`dsymfind index` again over the same {self.scale.bundles} unchanged bundles",
            "`llvm-dwarfdump --uuid` over the same files in one call",
            "faster",
        )
        subprocess.run(
            [CLI, "index", str(self.tree.root)], env=env, capture_output=True, check=True
        )
        pair = self._index_against(dwarfdump, listing, env, prepare=None)
        figure.notes.append(
            "The usual run, after the first: the incremental state makes an unchanged bundle "
            "cost one stat, with no Mach-O read and no link written."
        )
        self.judge(figure, pair, 1.0)

    def uuid_read_figure(self) -> None:
        size = self.large_dwarf.stat().st_size
        figure = Figure(
            f"UUID read of a {size / 1e6:.0f} MB dSYM (`dsymfind id`)",
            "file size",
            "reads ≤ 64 KiB",
        )
        if shutil.which("strace") is None:
            figure.notes.append("not measured: strace is missing (Debian package `strace`)")
            self.figures.append(figure)
            return
        log = self.work / "strace-id.txt"
        subprocess.run(
            [*STRACE_READS, "-o", str(log), CLI, "id", str(self.large_dwarf)],
            env=self.env("index"),
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT,
        )
        target = os.path.realpath(self.large_dwarf)
        read = 0
        for line in log.read_text().splitlines():
            found = re.search(r"\b(?:read|pread64|readv|preadv)\(\d+<([^>]*)>.*\) = (\d+)", line)
            if found and found.group(1) == target:
                read += int(found.group(2))
            if f"<{target}>" in line and "mmap(" in line:
                figure.notes.append("the file was memory-mapped: bytes touched are not counted")
        figure.measured = f"{read / KIB:.1f} KiB read"
        figure.reference_measured = f"{size / KIB / KIB:.0f} MiB"
        figure.ratio = read / size
        figure.met = read <= 64 * KIB
        figure.notes.append("`strace -f -y`: bytes returned by read calls on the dSYM's descriptor")
        self.figures.append(figure)

    def soak_figure(self) -> None:
        """scripts/soak.py at the issue's size (a small one for --quick): every invariant
        held under load, kills and maintenance; its answer times beside the deadline."""
        out = self.work / "soak.json"
        size = [] if self.scale is FULL else list(SOAK_QUICK)
        done = subprocess.run(
            [PYTHON, str(ROOT / "scripts" / "soak.py"), *size, "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=SOAK_TIMEOUT,
            check=False,
        )
        if not out.exists():
            raise BenchError(f"the soak did not finish: {done.stderr.strip()[-500:]}")
        soak = json.loads(out.read_text())
        sized, times, kills = soak["size"], soak["answer_ms"], soak["kills"]
        figure = Figure(
            f"soak: {sized['workers']} helpers at once, {sized['lookups']} lookups, "
            f"{sized['kills']} SIGKILLs of helpers and downloaders, a hostile loopback server, "
            "gc, check --repair, index and fetch alongside",
            "the helper's deadline",
            "no invariant broken; `check` clean after",
            f"{len(soak['violations'])} violations ({soak['late']} of them late); answers "
            f"p50 {times['p50']:.0f} ms, p95 {times['p95']:.0f} ms, max {times['max']:.0f} ms",
            f"{soak['deadline_ms']:.0f} ms (+ {soak['late_margin_ms']:.0f} ms for start-up)",
        )
        bare = soak["bare_start_ms"]
        figure.met = not soak["violations"] if self.scale is FULL else None
        figure.notes += [
            "Every answer judged as its helper exits: one XML plist, no stderr byte, exit 0, "
            "within the deadline plus the start-up margin, only the UUID asked, every path it "
            "names existing and carrying that UUID; no two holders of one UUID's download "
            "lock (/proc/locks, every 50 ms); gc, check --repair and index succeed and find "
            f"nothing invalid; `dsymfind check` afterwards: {soak['final_check']}.",
            "Answers: "
            + ", ".join(f"{k} {n}" for k, n in soak["answers"].items())
            + f"; {kills.get('helpers', 0)} helpers and {kills.get('downloaders', 0)} "
            f"downloaders SIGKILLed; {soak['downloads_seen']} downloaders seen holding their "
            f"lock, at most {soak['most_holders']} holder of one UUID's lock at once; "
            f"{soak['seconds']:.0f} s in all. Meanwhile a bare `python -I -S -c pass` took "
            f"p50 {bare['p50']:.0f} ms, p95 {bare['p95']:.0f} ms, max {bare['max']:.0f} ms: "
            "the machine's own delay, in every helper's time and not in its deadline.",
            "The server's answers: "
            + ", ".join(f"{k} {n}" for k, n in soak["faults"].items())
            + "; alongside: "
            + ", ".join(f"{k} {n} runs" for k, n in soak["maintenance"].items())
            + ".",
            *(f"violation: {v}" for v in soak["violations"][:SOAK_VIOLATIONS_SHOWN]),
        ]
        self.figures.append(figure)

    # -- S3 ------------------------------------------------------------------------

    def s3_start_up_figures(self) -> None:
        """The cache-tree and negative-cache answers again, an s3:// server configured beside
        the same settings: the answers come before any source, so botocore must stay out."""
        bare, uuid = [PYTHON, "-c", "pass"], fixtures.bench_uuid(0)
        hit_env, negative_env = self.env("s3-tree"), self.env("s3-negative")
        self.expect_found(uuid, hit_env)
        _remember_absent(self.cache("s3-negative"), MISSING_UUID, negative_env)
        if self.helper_answer(MISSING_UUID, negative_env):  # walks the tree once
            raise BenchError("the negative cache did not answer with an s3:// server configured")
        answers = (
            ("cache-tree answer with an s3:// server configured", uuid, hit_env, True),
            (
                "negative-cache answer with an s3:// server configured "
                f"({self.scale.bundles}-bundle search path)",
                MISSING_UUID,
                negative_env,
                False,
            ),
        )
        for name, key, env, found in answers:
            loaded = _s3_modules_loaded(key, env, found=found)
            pair = self.compare([HELPER, key], bare, env)
            figure = Figure(name, "same venv's `python -c pass`", "≤ 1.3x; botocore not imported")
            figure.measured = f"{ms(pair.subject)}; " + (
                f"imported {', '.join(loaded)}" if loaded else "botocore not imported"
            )
            figure.reference_measured = ms(pair.reference)
            figure.ratio = pair.ratio
            figure.spread = pair.spread
            if loaded:
                figure.met = False  # judged at any scale: a module list, not a timing
            elif self.scale is FULL:
                figure.met = pair.ratio <= 1.3
            figure.notes.append(
                "The configuration of the figure without `s3` plus an `s3://` server (endpoint "
                f"{S3_UNREACHABLE}, never contacted). A probe answered in-process through "
                "`helper.respond` and then looked in `sys.modules`: "
                + (
                    f"found {', '.join(loaded)}."
                    if loaded
                    else f"none of {', '.join(S3_MODULES)} was imported."
                )
            )
            self.figures.append(figure)

    def s3_figures(self) -> None:
        """Publishing to and fetching from a real S3 engine: one SeaweedFS on loopback for the
        three figures, stopped afterwards whatever happens."""
        size = self.large_dwarf.stat().st_size / 1e6
        count = min(self.scale.republish, self.scale.bundles)
        figures = [
            Figure(
                f"`dsymfind publish` of a {size:.0f} MB dSYM to S3 (SeaweedFS on loopback)",
                "boto3 `upload_file` of the same file to another key",
                "≤ 1.2x wall",
            ),
            Figure(
                f"`dsymfind publish` again of {count} unchanged dSYMs to S3",
                "a bare boto3 `head_object` of each key",
                "≤ 1 request per key, and one listing per run",
            ),
            Figure(
                f"helper fetch of a {size:.0f} MB dSYM from an s3:// server (SeaweedFS on "
                "loopback), verified and published",
                "the same helper fetching it from the loopback HTTP server",
                "≤ 1.2x wall",
            ),
        ]

        def measure() -> None:
            self.s3_publish_figure(figures[0])
            self.s3_republish_figure(figures[1], count)
            self.s3_fetch_figure(figures[2])

        self.on_seaweed(figures, measure)

    def builds_figure(self) -> None:
        """`dsymfind builds` over a store of BUILD_RECORDS build records against boto3
        paginating the same prefix: the listing alone answers (no read of any record)."""
        count = BUILD_RECORDS if self.scale is FULL else 300
        figure = Figure(
            f"`dsymfind builds` over {count:,} build records in S3 (SeaweedFS on loopback)",
            "boto3 `list_objects_v2` paginating the same prefix",
            "≤ 1.2x wall",
        )
        self.on_seaweed([figure], lambda: self._measure_builds(figure, count))

    def _measure_builds(self, figure: Figure, count: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from dsymfind.stores import builds

        admin, env = self.seaweed.client("admin"), self.s3_env("reader")
        fixtures.clear_prefix(admin, SYMBOLS, BUILDS_PREFIX)
        keys = [_build_summary(n).key for n in range(count)]
        # The records' bodies are never read by the listing: an empty object each.
        with ThreadPoolExecutor(32) as pool:
            list(
                pool.map(
                    lambda key: admin.put_object(Bucket=SYMBOLS, Key=BUILDS_PREFIX + key, Body=b""),
                    keys,
                )
            )
        listing = [
            CLI, "builds", "--store", f"s3://{SYMBOLS}/{BUILDS_PREFIX}",
            "--endpoint-url", self.seaweed.endpoint_url, "--region", S3_REGION,
        ]  # fmt: skip
        paginate = self.boto3_command(
            "pages = s3.get_paginator('list_objects_v2').paginate(Bucket=sys.argv[2], "
            "Prefix=sys.argv[3])\n"
            "print(sum(len(page.get('Contents', [])) for page in pages))\n",
            SYMBOLS,
            BUILDS_PREFIX + builds.BUILDS,
        )
        listed, paginated, ratios = [], [], []
        for _ in range(self.scale.fetch_rounds):
            seconds, out = self.timed_run(listing, env)
            lines = len(out.splitlines())
            if lines != count:
                raise BenchError(f"`dsymfind builds` listed {lines} of {count} builds")
            listed.append(seconds)
            paginated.append(self.timed_run(paginate, env, expect=str(count).encode())[0])
            ratios.append(listed[-1] / paginated[-1])
        figure.notes.append(
            f"{count:,} record keys (`_builds/<time>,<id>,<app>,<version>,<build>,<commit>,"
            "<images>,<bytes>.json`) put by boto3 from 32 threads; both sides in a fresh "
            "interpreter with the reader identity's keys, path-style to the endpoint, "
            "alternating rounds. `dsymfind builds` pages through the listing 1,000 keys a "
            "request (after one listing that checks the endpoint answers as S3 does), parses "
            "each key and prints a line per build, newest first; boto3 pages through the same "
            "prefix and counts the keys."
        )
        self.judge(figure, Pair.of_rounds(listed, paginated, ratios), 1.2)

    def on_seaweed(self, figures: list[Figure], measure: Callable[[], None]) -> None:
        """`measure` with the S3 engine running, stopped after; without an engine, each
        figure says why it was not measured."""
        reason = self.start_seaweed()
        if reason is not None:
            for figure in figures:
                figure.notes.append(f"not measured: {reason}")
                self.figures.append(figure)
            return
        try:
            measure()
        finally:
            self.stop_seaweed()

    def start_seaweed(self) -> str | None:
        """Start the engine; why not, when it cannot be."""
        try:
            from support import seaweed
        except ImportError as exc:  # boto3: the test extra
            return f"the S3 engine's harness cannot be imported ({exc})"
        try:
            weed = seaweed.weed_binary()
        except seaweed.SeaweedError as exc:
            return f"`weed` is not installed ({exc})"
        # In the benchmark's folder: removed with it. Suite.stop() stops it on any failure.
        self.seaweed = seaweed.SeaweedS3(self.work / "seaweed", weed=weed)
        try:
            self.seaweed.start()
        except seaweed.SeaweedError as exc:
            return f"SeaweedFS did not start: {exc}"
        self.findings.append(
            f"S3 figures: SeaweedFS `weed server` ({_first_line([str(weed), 'version'])}) on "
            f"loopback, one process for master, volume, filer and S3 gateway "
            f"(tests/support/seaweed.py), ready in {self.seaweed.startup_seconds:.1f} s."
        )
        return None

    def s3_env(self, identity: str, config: str | None = None) -> dict[str, str]:
        """env() with `identity`'s keys and none of the machine's AWS settings; never the
        instance metadata service: only loopback is contacted."""
        env = {k: v for k, v in self.env(config).items() if not k.startswith("AWS_")}
        who = self.seaweed.identities[identity]
        env.update(
            AWS_ACCESS_KEY_ID=who.access_key,
            AWS_SECRET_ACCESS_KEY=who.secret_key,
            AWS_EC2_METADATA_DISABLED="true",
            NO_PROXY="127.0.0.1",
            no_proxy="127.0.0.1",
        )
        return env

    def publish_command(self, prefix: str, *paths: str) -> list[str]:
        """`dsymfind publish` to the engine, a line per object with its key (--verbose)."""
        return [
            CLI,
            "publish",
            "--verbose",
            "--to",
            f"s3://{SYMBOLS}/{prefix}",
            "--endpoint-url",
            self.seaweed.endpoint_url,
            "--region",
            S3_REGION,
            *paths,
        ]

    def boto3_command(self, script: str, *args: str) -> list[str]:
        """A bare boto3 client (path-style, the endpoint) running `script` in a fresh Python."""
        return [PYTHON, "-c", _BARE_BOTO3 + script, self.seaweed.endpoint_url, *args]

    def s3_publish_figure(self, figure: Figure) -> None:
        from dsymfind.stores.s3 import upload as s3_target

        admin, env = self.seaweed.client("admin"), self.s3_env("ci")
        bundle = self.large_dwarf.parents[3]  # big.dSYM
        publish = self.publish_command(PUBLISH_PREFIX, str(bundle))
        upload = self.boto3_command(
            # Typed as `dsymfind publish` types its objects and parts (s3_upload.CONTENT_TYPE):
            # untyped, SeaweedFS would gzip the reference's chunks, and not ours.
            "s3.meta.events.register('before-sign.s3.UploadPart', lambda request, **_: "
            "request.headers.__setitem__('Content-Type', sys.argv[5]))\n"
            "s3.upload_file(sys.argv[2], sys.argv[3], sys.argv[4], "
            "ExtraArgs={'ContentType': sys.argv[5]})\n",
            str(self.large_dwarf),
            SYMBOLS,
            UPLOAD_PREFIX + "big",
            s3_target.CONTENT_TYPE,
        )
        published, uploaded, ratios = [], [], []
        # A first round is not counted: the engine grows the bucket's first volumes on its
        # first writes, which took seconds.
        for counted in [False] + [True] * self.scale.fetch_rounds:
            for prefix in (PUBLISH_PREFIX, UPLOAD_PREFIX):  # so each run really uploads
                fixtures.clear_prefix(admin, SYMBOLS, prefix)
            publishing = self.timed_run(publish, env, expect=PUBLISHED)[0]
            uploading = self.timed_run(upload, env)[0]
            if counted:
                published.append(publishing)
                uploaded.append(uploading)
                ratios.append(publishing / uploading)
        size = self.large_dwarf.stat().st_size
        listed = admin.list_objects_v2(Bucket=SYMBOLS, Prefix=PUBLISH_PREFIX)["Contents"]
        # The DWARF object alone: not the build record, nor the metadata naming it.
        sizes = [o["Size"] for o in listed if o["Key"].endswith("/debuginfo")]
        sizes.append(admin.head_object(Bucket=SYMBOLS, Key=UPLOAD_PREFIX + "big")["ContentLength"])
        if sizes != [size, size]:
            raise BenchError(f"S3 holds {sizes} bytes, not twice the dSYM's {size}")
        parts = (
            f"in {s3_target.PART_BYTES // KIB // KIB} MiB parts, {s3_target.UPLOAD_THREADS} at "
            f"a time (above its "
            f"{s3_target.MULTIPART_THRESHOLD // KIB // KIB} MiB threshold)"
            if size > s3_target.MULTIPART_THRESHOLD
            else "in one conditional PUT"
        )
        figure.notes.append(
            f"Both in a fresh interpreter with the ci identity's keys, path-style to the "
            f"endpoint; the keys are deleted before each round, and a first round warms the "
            f"engine up uncounted. `dsymfind publish` verifies the "
            f"bundle, hashes it (SHA-256, kept as metadata), HEADs the key, uploads it "
            f"(hashed again as it is read: the bytes sent are the bytes hashed) {parts} and "
            "writes a build record (with its ID's claim, its intent and a UUID ref); boto3's `upload_file` uses its TransferConfig defaults (8 MiB "
            "parts above 8 MiB, on 10 threads)."
        )
        self.judge(
            figure,
            Pair.of_rounds(published, uploaded, ratios),
            1.2,
        )

    def s3_republish_figure(self, figure: Figure, count: int) -> None:
        env = self.s3_env("ci")
        inputs = [str(self.tree.bundle(n)) for n in range(count)]
        publish = self.publish_command(REPUBLISH_PREFIX, *inputs)
        fixtures.clear_prefix(self.seaweed.client("admin"), SYMBOLS, REPUBLISH_PREFIX)
        first, out = self.timed_run(publish, env, expect=PUBLISHED)
        keys = [
            line.removeprefix(PUBLISHED.decode())
            for line in out.decode().splitlines()
            if line.startswith(PUBLISHED.decode())
        ]
        objects = count * OBJECTS_PER_BUNDLE
        if len(keys) != objects:
            raise BenchError(f"the first publish of {count} bundles published {len(keys)} keys")
        listing, key_list = self.work / "republish-inputs.txt", self.work / "republish-keys.txt"
        listing.write_text("".join(f"{path}\n" for path in inputs))
        key_list.write_text("".join(f"{REPUBLISH_PREFIX}{key}\n" for key in keys))
        heads = self.boto3_command(
            "for key in open(sys.argv[3]).read().split():\n"
            "    s3.head_object(Bucket=sys.argv[2], Key=key)\n",
            SYMBOLS,
            str(key_list),
        )
        again, reference, ratios = [], [], []
        for _ in range(self.scale.fetch_rounds):
            seconds, out = self.timed_run(publish, env, expect=EXISTS)
            if out.count(EXISTS) != objects or PUBLISHED in out:
                raise BenchError(f"publishing again changed something: {out[-300:]!r}")
            again.append(seconds)
            reference.append(self.timed_run(heads, env)[0])
            ratios.append(again[-1] / reference[-1])
        counted = self.counted_publish(listing, env)
        if counted["status"] != 0 or counted["states"] != {"exists": objects}:
            raise BenchError(f"the counted publish did not find every key there: {counted}")
        requests, operations = counted["requests"], counted["operations"]
        own = sum(counted["bookkeeping"].values())
        shown = ", ".join(f"{name} {n}" for name, n in sorted(operations.items()))
        figure.measured = (
            f"{requests - own} requests for {objects} keys, and {own} for the run's build "
            f"record ({shown}); {ms(statistics.median(again))}"
        )
        figure.reference_measured = f"{len(keys)} HEADs; {ms(statistics.median(reference))}"
        figure.ratio = statistics.median(ratios)
        # A count, judged at any scale: a HEAD per key, and the listing that checks the
        # endpoint answers as S3 does before anything is written. The run's build record
        # and what it stands on (docs/builds.md) are counted apart: a claim, an intent, a
        # listing of the retires at work, a ref per UUID, the record, the intent removed.
        figure.met = requests - own <= objects + 1
        figure.notes.append(
            f"Times: `dsymfind publish` of the same {count} bundles of the search-path tree, "
            "each answered `exists`, against the reference in a fresh interpreter (the ratio is "
            f"of wall times). The first publish of them (a PUT each, and a build record) took "
            f"{ms(first)}. Requests counted in the publisher's own process: "
            "`dsymfind.commands.publish.publish` run with `s3_target.make_client` patched to "
            "register botocore's `before-send.s3` (each HTTP request, retries included) and "
            "`before-call.s3` (each operation) on its client; the operations on the store's own "
            "records (`_builds/`, `_build-ids/`, `_uuids/`, `_publishing/`, `_retiring/`) by "
            "`before-parameter-build.s3`, each one request."
        )
        self.figures.append(figure)

    def counted_publish(self, listing: Path, env: dict[str, str]) -> dict[str, Any]:
        done = subprocess.run(
            [
                PYTHON,
                "-c",
                _COUNTED_PUBLISH,
                self.seaweed.endpoint_url,
                S3_REGION,
                f"s3://{SYMBOLS}/{REPUBLISH_PREFIX}",
                str(listing),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT,
        )
        if done.returncode != 0:
            raise BenchError(f"the counted publish failed: {done.stderr.strip()[-500:]}")
        result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return result

    def s3_fetch_figure(self, figure: Figure) -> None:
        from dsymfind.stores.s3 import upload as s3_target

        assert self.server is not None
        bundle = self.large_dwarf.parents[3]
        _, out = self.timed_run(
            [*self.publish_command(FETCH_PREFIX, str(bundle)), "--json"],
            self.s3_env("ci"),
        )
        records = json.loads(out)
        ((key, state),) = [
            (r["key"], r["state"]) for r in records if r["key"].endswith("debuginfo")
        ]
        if state != "published":
            raise BenchError(f"the fetch figure's object was not published: {state}")
        plain = self.seaweed.client("ci")
        s3_target.type_parts_as_bytes(plain)  # stored as publish stores it, minus the metadata
        plain.upload_file(
            str(self.large_dwarf),
            SYMBOLS,
            PLAIN_PREFIX + key,
            ExtraArgs={"ContentType": s3_target.CONTENT_TYPE},
        )
        chunks = [
            self.seaweed.stored_chunks(SYMBOLS, stored)
            for stored in (f"{FETCH_PREFIX}{key}", PLAIN_PREFIX + key)
        ]
        if any(c.get("is_compressed") for stored in chunks for c in stored):
            raise BenchError("SeaweedFS gzipped chunks of the fetched objects: typed as bytes?")
        endpoint = self.seaweed.endpoint_url
        for name, prefix in (("s3-fetch", FETCH_PREFIX), ("s3-plain", PLAIN_PREFIX)):
            self.write_config(
                name,
                f"cache_dir = {json.dumps(str(self.cache(name)))}\ntimeout = 600\n"
                + _s3_server(f"s3://{SYMBOLS}/{prefix}", endpoint),
            )
        runs = (
            ("s3-fetch", self.s3_env("reader", "s3-fetch")),
            ("fetch", self.env("fetch")),
            ("s3-plain", self.s3_env("reader", "s3-plain")),
        )
        times: dict[str, list[float]] = {name: [] for name, _ in runs}
        ratios = []
        # The engine's own pace: curl of the same object from the engine (a presigned URL)
        # and from the HTTP server, in the same rounds.
        presigned = self.seaweed.client("reader").generate_presigned_url(
            "get_object", Params={"Bucket": SYMBOLS, "Key": PLAIN_PREFIX + key}, ExpiresIn=3600
        )
        curls: dict[str, list[float]] = {"s3": [], "http": []}
        download = self.work / "s3-curl.out"
        engine_cpu: list[float] = []  # the engine's CPU seconds per fetch of the published object
        for _ in range(self.scale.fetch_rounds):
            for name, env in runs:
                self.clear_fetch_cache(name)
                before = _cpu_seconds(self.seaweed.pid)
                times[name].append(self.timed([HELPER, self.large_uuid], env, found=True))
                self.wait_for_downloaders(name)
                after = _cpu_seconds(self.seaweed.pid)
                if name == "s3-fetch" and before is not None and after is not None:
                    engine_cpu.append(after - before)
            ratios.append(times["s3-fetch"][-1] / times["fetch"][-1])
            for name, url in (("s3", presigned), ("http", self.server.url + self.large_path)):
                curls[name].append(
                    self.timed(["curl", "-sS", "-o", str(download), url], self.env("fetch"))
                )
                download.unlink()
        http = statistics.median(times["fetch"])
        plain = statistics.median(times["s3-plain"])
        first = self.first_bytes(runs[:2])
        if first is not None:
            (s3_first, s3_wait), (http_first, http_wait) = first["s3-fetch"], first["fetch"]
            figure.notes.append(
                "Before the first byte, the fixed cost: a fresh downloader (the command the "
                "helper starts, with strace's timestamps, median of "
                f"{FIRST_BYTE_ROUNDS} alternating runs) reads the first byte of the engine's "
                f"answer {ms(s3_first)} after its exec, {ms(s3_wait)} of it waiting for the "
                f"engine once the GET was sent; of the HTTP server's after {ms(http_first)} "
                f"({ms(http_wait)} waiting)."
            )
        curl_s3, curl_http = statistics.median(curls["s3"]), statistics.median(curls["http"])
        figure.notes.append(
            f"The engine's own pace, in the same rounds: curl fetches the object from SeaweedFS "
            f"(a presigned URL) in {ms(curl_s3)} and from the loopback HTTP server in "
            f"{ms(curl_http)}, {curl_s3 / curl_http:.2f}x; the helper's S3 fetch takes "
            f"{statistics.median(times['s3-fetch']) / curl_s3:.2f}x curl's from the engine, its "
            f"HTTP fetch {http / curl_http:.2f}x curl's from the HTTP server."
            + (
                f" SeaweedFS spent {ms(statistics.median(engine_cpu))} of CPU (user+sys, "
                "/proc) serving each S3 fetch, on the same 2 cores as the downloader."
                if engine_cpu
                else ""
            )
        )
        client = self.compare(
            [PYTHON, "-c", _S3_CLIENT, endpoint, S3_REGION],
            [PYTHON, "-c", "pass"],
            runs[0][1],
            rounds=1,
            runs=min(self.scale.runs, 10),
            warmup=1,
        )
        figure.notes.append(
            "The s3:// server (reader keys in the environment, endpoint_url, layout unified) "
            f"holds the object as `dsymfind publish` wrote it ({len(chunks[0])} chunks, none "
            "gzipped), and the download checks its "
            f"`sha256` metadata; the HTTP server sends no checksum. The same bytes put by boto3 "
            f"without metadata came in {ms(plain)}, {plain / http:.2f}x the HTTP fetch. Each "
            "helper starts the detached downloader and answers once the bundle is published; "
            "the caches are emptied before each round."
        )
        figure.notes.append(
            "With keys in the environment the downloader of an s3:// server reads them and "
            "signs the first request without botocore (stores/s3/keys.py, stores/s3/sigv4.py): "
            "in a fresh interpreter that "
            f"takes {ms(client.subject)} against {ms(client.reference)} for `python -c pass`."
        )
        self.judge(
            figure,
            Pair.of_rounds(times["s3-fetch"], times["fetch"], ratios),
            1.2,
        )

    def first_bytes(
        self, runs: tuple[tuple[str, dict[str, str]], ...]
    ) -> dict[str, tuple[float, float]] | None:
        """Per run, medians of (exec to the first byte of the answer, GET sent to that byte)
        of the downloader started as processes.py starts it, the cache emptied each time."""
        if shutil.which("strace") is None:
            return None
        from dsymfind import processes

        command = [PYTHON, "-I", "-S", "-c", processes._bootstrap(processes._DOWNLOADER_ENTRY)]
        command += [processes.DOWNLOAD_VERB, self.large_uuid]
        seen: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in runs}
        for _ in range(FIRST_BYTE_ROUNDS):
            for name, env in runs:
                self.clear_fetch_cache(name)
                seen[name].append(_first_byte(command, env, self.work / "first-byte.strace"))
        return {
            name: (
                statistics.median(first for first, _ in pairs),
                statistics.median(wait for _, wait in pairs),
            )
            for name, pairs in seen.items()
        }

    # -- profiles ------------------------------------------------------------------

    def hot_path_profile(
        self, label: str, uuid: str, env: dict[str, str], *, forget: Path | None = None
    ) -> None:
        """What the answer imports and which system calls it makes beyond `python -c pass`."""
        if forget is not None:
            forget.unlink(missing_ok=True)
        imports = _imports_beyond_bare(uuid, env)
        costly = sorted(imports.items(), key=lambda kv: -kv[1])[:6]
        listing = ", ".join(f"{name} {us} µs" for name, us in costly) or "nothing"
        total = sum(imports.values())
        self.findings.append(
            f"{label}: the answer imports {len(imports)} modules beyond the bare interpreter, "
            f"{total / 1000:.1f} ms under -X importtime (largest: {listing})."
        )
        if forget is not None:
            forget.unlink(missing_ok=True)
        calls = _syscalls_beyond_bare([HELPER, uuid], env)
        if calls is not None:
            summary = ", ".join(f"{name} {n:+d}" for name, n in calls.most_common(6))
            self.findings.append(f"{label}: system calls beyond `python -c pass`: {summary}.")

    def wrapper_profile(self) -> None:
        """Whether the installed console script costs the helper an import of `re`."""
        wrapper = Path(HELPER).read_text()
        if "import re\n" not in wrapper:
            self.findings.append(
                "The `dsymForUUID` console script imports only sys and dsymfind.helper."
            )
            return
        lean = self.work / "dsymForUUID-lean"
        lean.write_text(
            f"#!{PYTHON}\nimport sys\nfrom dsymfind.helper import main\nsys.exit(main())\n"
        )
        lean.chmod(0o755)
        uuid, env = fixtures.bench_uuid(0), self.env("tree")
        pair = self.compare([str(lean), uuid], [PYTHON, "-c", "pass"], env)
        self.findings.append(
            f"**The installed `dsymForUUID` console script imports `re`**: pip "
            f"{metadata.version('pip')} writes it so (pip 25.0 and later, pipx and uv do not). "
            f"Through a wrapper without it, the cache-tree answer takes {ms(pair.subject)} "
            f"against {ms(pair.reference)} for `python -c pass`: {pair.ratio:.2f}x. "
            "scripts/bench upgrades the venv's pip and reinstalls when it finds this."
        )


def _index_profile(root: Path, env: dict[str, str], cache: Path, work: Path) -> str:
    """Where a cold `dsymfind index` spends its time: its heaviest system calls."""
    if shutil.which("strace") is None:
        return "`dsymfind index`: not profiled (strace is missing)."
    shutil.rmtree(cache, ignore_errors=True)
    log = work / "strace-index.txt"
    subprocess.run(
        ["strace", "-f", "-c", "-o", str(log), CLI, "index", str(root)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=RUN_TIMEOUT,
    )
    rows = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[-1] != "total":
            rows.append(f"{parts[-1]} {parts[0]} % ({parts[3]} calls)")
    return (
        "`dsymfind index` (cold), system time by call under `strace -f -c`: "
        + ", ".join(rows[:5])
        + ". llvm-dwarfdump only reads the files; the index also builds the UUID tree "
        "(five folder levels and a symlink per UUID)."
    )


@dataclass(frozen=True)
class Run:
    """One timed run of a command: wall seconds, and the CPU (user+system) it used."""

    wall: float
    cpu: float


def _timed_run(argv: list[str], env: dict[str, str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, timeout=RUN_TIMEOUT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Run(wall, cpu)


def _spread(values: Iterable[float], unit: str = "x") -> str:
    """The median of `values` with their range, for a note."""
    ordered = sorted(values)
    low, high = ordered[0], ordered[-1]
    median = statistics.median(ordered)
    return f"{median:.2f}{unit} (from {low:.2f}{unit} to {high:.2f}{unit})"


def _tmpfs_folder() -> str | None:
    """/dev/shm when it is a tmpfs mount (as on Linux), else None."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    found = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts if line.strip())
    return "/dev/shm" if found and os.access("/dev/shm", os.W_OK) else None


def _dwarfdump() -> str | None:
    candidates = ["llvm-dwarfdump-19", str(fixtures.LLVM_BIN / "llvm-dwarfdump"), "llvm-dwarfdump"]
    return next((shutil.which(c) for c in candidates if shutil.which(c)), None)


_PROBE = (
    "import os, sys, time\n"
    "from dsymfind import helper\n"
    "helper.respond(sys.argv[1:], os.environ, started=time.monotonic())\n"
)


# The reference client of the S3 figures: boto3 as its documentation shows it, with the keys
# from the environment, path-style to the engine named by argv[1].
def _build_summary(n: int) -> Any:
    """The summary of a made-up build record: a release a day, its commit, 20 images."""
    from dsymfind.stores import builds

    day = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(hours=n)
    commit = f"{n:08x}" * 5
    return builds.Summary(
        builds.stamp(day), f"build-{n}", "MyApp", f"2.{n // 100}", str(n), commit, 20, 50 << 20
    )


_BARE_BOTO3 = (
    "import sys, boto3\n"
    "from botocore.config import Config\n"
    f"s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name={S3_REGION!r},\n"
    "                  config=Config(s3={'addressing_style': 'path'}))\n"
)

# `dsymfind publish` in this process, its client's requests counted: argv is the endpoint,
# the region, the s3:// location and a file listing the inputs; one JSON line comes out.
_COUNTED_PUBLISH = """\
import contextlib, io, json, sys
from collections import Counter
from dsymfind.commands import publish as command
from dsymfind.stores import builds
from dsymfind.stores.s3 import upload as s3_target

operations, sent, own = Counter(), Counter(), Counter()
made = s3_target.make_client

def bookkeeping(params, model, **_):
    # publish removes nothing but its own intent
    key = params.get("Key") or params.get("Prefix") or ""
    if model.name == "DeleteObjects" or key.partition("/")[2].startswith(builds.BOOKKEEPING):
        own.update([model.name])

def make_client(options):
    client = made(options)
    client.meta.events.register(
        "before-call.s3", lambda model, **_: operations.update([model.name])
    )
    client.meta.events.register("before-send.s3", lambda **_: sent.update(["requests"]))
    client.meta.events.register("before-parameter-build.s3", bookkeeping)
    return client

s3_target.make_client = make_client
endpoint, region, to, listing = sys.argv[1:5]
with open(listing) as f:
    paths = f.read().splitlines()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = command.publish(
        paths, to=to, layout_names=[], executables=False, dry_run=False, as_json=True,
        connection={"endpoint_url": endpoint, "region": region},
    )
states = Counter(record["state"] for record in json.loads(out.getvalue()))
print(json.dumps({"status": status, "states": states, "operations": operations,
                  "requests": sent["requests"], "bookkeeping": own}))
"""

# What an s3:// server's downloader pays first with keys in the environment: reading them
# (s3/keys.py) and signing a GET (s3/sigv4.py), without botocore.
_S3_CLIENT = (
    "import sys\n"
    "from dsymfind.stores.s3 import presign as s3_presign\n"
    "from dsymfind.stores.s3.api import S3Options\n"
    "options = S3Options(endpoint_url=sys.argv[1], region=sys.argv[2])\n"
    "s3_presign.signer(options).url('symbols', 'k', 60)\n"
)

# The helper's answer in-process, then which of S3_MODULES it imported: one JSON line.
_S3_MODULES_PROBE = (
    "import json, os, sys, time\n"
    "from dsymfind import helper\n"
    "answer = helper.respond(sys.argv[2:], os.environ, started=time.monotonic())\n"
    "heavy = sys.argv[1].split(',')\n"
    "loaded = sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy)\n"
    "print(json.dumps({'found': b'DBGDSYMPath' in answer, 'loaded': loaded}))\n"
)


def _cpu_seconds(pid: int | None) -> float | None:
    """User+system CPU seconds of process `pid` so far (Linux's /proc), else None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _first_byte(command: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Seconds from `command`'s exec to its first read of answer bytes, and from the last
    request it sent before then to that read (strace timestamps; only these calls traced)."""
    traced = ["-f", "-ttt", "--seccomp-bpf", "-e", "trace=execve,sendto,recvfrom"]
    subprocess.run(
        ["strace", *traced, "-o", str(log), *command],
        env=env,
        capture_output=True,
        check=True,
        timeout=RUN_TIMEOUT,
    )
    started = sent = None
    for line in log.read_text().splitlines():
        fields = line.split()
        stamp = float(fields[1])
        started = stamp if started is None else started
        if "sendto(" in line:
            sent = stamp
        elif "recvfrom(" in line and re.search(r"= [1-9][0-9]*$", line) and sent is not None:
            return stamp - started, stamp - sent
    raise BenchError(f"{command[-2:]}: no answer read (strace log {log})")


def _s3_server(url: str, endpoint: str) -> str:
    return (
        f'[[servers]]\nurl = "{url}"\nendpoint_url = "{endpoint}"\n'
        f'region = "{S3_REGION}"\nlayout = "unified"\n'
    )


def _remember_absent(cache: Path, uuid: str, env: dict[str, str]) -> None:
    """A fresh negative entry for `uuid`, where the helper run with `env` looks for one."""
    fingerprint = settings.load(env)["stores_fingerprint"]
    marker = Path(CachePaths(str(cache)).negative_marker(fingerprint, uuid_hex(uuid)))
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _s3_modules_loaded(uuid: str, env: dict[str, str], *, found: bool) -> list[str]:
    """Which S3_MODULES the helper's answer for `uuid` imports (it must be as expected)."""
    done = subprocess.run(
        [PYTHON, "-c", _S3_MODULES_PROBE, ",".join(S3_MODULES), uuid],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=RUN_TIMEOUT,
    )
    result = json.loads(done.stdout)
    if result["found"] != found:
        raise BenchError(f"the probe's answer for {uuid}: found={result['found']}, not {found}")
    return list(result["loaded"])


def _importtime(argv: list[str], env: dict[str, str]) -> dict[str, int]:
    done = subprocess.run(
        [PYTHON, "-X", "importtime", *argv], env=env, capture_output=True, text=True, check=True
    )
    found = {}
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if (
            len(parts) == 3
            and parts[0].startswith("import time:")
            and parts[0][12:].strip().isdigit()
        ):
            found[parts[2].strip()] = int(parts[0][12:].strip())
    return found


def _imports_beyond_bare(uuid: str, env: dict[str, str]) -> dict[str, int]:
    """Modules the answer imports (self µs) that `python -c pass` does not."""
    bare = _importtime(["-c", "pass"], env)
    # The probe calls helper.respond: the helper itself points stderr at /dev/null.
    answered = _importtime(["-c", _PROBE, uuid], env)
    return {name: us for name, us in answered.items() if name not in bare}


def _syscalls_beyond_bare(argv: list[str], env: dict[str, str]) -> Counter[str] | None:
    if shutil.which("strace") is None:
        return None
    counts = []
    for command in (argv, [PYTHON, "-c", "pass"]):
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
            subprocess.run(
                ["strace", "-f", "-o", log.name, *command],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            counts.append(Counter(_syscall_names(log.read())))
    counts[0].subtract(counts[1])
    return Counter({k: v for k, v in counts[0].items() if v != 0})


def _syscall_names(log: str) -> list[str]:
    names = []
    for line in log.splitlines():
        found = re.match(r"\d+\s+([a-z0-9_]+)\(", line)
        if found:
            names.append(found.group(1))
    return names


# -- the report ----------------------------------------------------------------------

STATIC_FINDINGS = """\
- **Remembered answers** (answers.py): once answered, a UUID costs one small marshal read
  and a stat of each file the answer names; the hit path imports no HTTP, TOML, plist or
  Mach-O code (the configuration comes from a compiled marshal snapshot).
- **Search paths** (search_paths.py): before this suite, a search-path lookup loaded the
  whole index and the Mach-O reader (macholib) and plistlib to verify the hit: 45.8 ms,
  2.5x `python -c pass`, even for a negative-cache answer, since local sources are looked
  at first (a dSYM that appears locally must win over the negative cache). Now each
  indexed UUID's answer is kept ready in one of 256 small shards, with the stat of every
  file it names: a lookup reads one shard and stats those files, and a miss is settled by
  the same shard until the next walk is due (5 s, or ten times a longer walk). The first
  walk of the 10,000-bundle tree reads every DWARF file (about 1 s, so the next is due
  after 10 s); while the shards said "unsettled" after 5 s, each negative answer in
  between unmarshalled the whole index and imported the bundle reader (rounds at 2.5x
  `python -c pass` right after the first walk). The walk's length is now in its marker.
- **Console-script wrapper**: pip before 25.0 writes `import re` into the `dsymForUUID`
  wrapper, about 10 ms, which alone is more than the helper's own work. The figures above
  measure the wrapper as installed; see the measured findings below.
- **Helpers at once** (fetch/miss.py): 32 helpers asking for one missing UUID each saw the
  download lock free (the downloader takes it only after its own start-up) and each
  started a downloader, and each imported filelock (about 25 ms) to probe the lock and
  the Mach-O reader to verify the published bundle. Now one helper claims the start (an
  fcntl flock held while it waits), the others only wait, and waiting helpers recall the
  downloader's remembered answer: when this changed, 5.4 s for 32 helpers became about
  2.6 s on a loaded 2-core machine (the table has the figure as measured now). The lock probe (`locks.is_held`) is now a plain flock, without
  filelock's import. Each waiting helper then still imported typing (through the backoff
  markers), threading and contextlib (the status writer) and json with re to read the
  status record: a waiter took about 46 ms of CPU for a 1 s wait, about 30 ms now (getrusage,
  timed on this machine during the change). Records are read through json's C scanner
  without importing json, only the helper that starts the downloader imports subprocess,
  and a record's 1 MiB read limit no longer sizes the buffer (an mmap, mremap and munmap
  per poll).
- **Cold fetch** (the big-download figures, scripts/bench_big.py): on loopback nothing
  waits for a link, so the figure measures how fast bytes go from the socket to the disk.
  Where the time went, timed on this machine with the 1 GB body during the change (each
  a fresh interpreter, the server sending with sendfile): httpx's body iterator reads 64
  KiB per call through h11, which buffers, slices and copies each piece in Python; with
  the writes on the same thread the body took 1.6 to 2.3 s, against 1.1 s for curl.
  Reading the connection's stream 256 KiB at a time once h11 has parsed the headers took
  0.45 to 0.7 s (4 MiB reads were slower: fresh pages per piece). SHA-256 costs 0.58 s
  per GB of CPU here; on the writer thread, with the writes and the checkpoint fsyncs,
  it runs while the socket is read. The fsync before publication of a whole 1 GB file
  took 0.25 to 0.3 s; checkpoints every 32 MiB leave at most that much for the end. The
  helper polled every 50 ms; it polls every 10 ms once the record says every byte has
  arrived. What is left to the HTTP library: the request, h11's parse of the headers
  and its first read; the bare httpx stream in the figure's note is that library's own
  pace. Whether the helper keeps up with a real link is the shaped link's figure.
- **`dsymfind index`**: a cold index creates five folder levels and a symlink per UUID
  (DebugSymbols' file-mapped layout, not ours to change); `mkdir` dominates its system
  time (see the measured breakdown). llvm-dwarfdump only reads. The usual run is the
  next one: an unchanged bundle costs one stat, and that run beats llvm-dwarfdump.
  Reading the index state with `marshal.load(file)` went object by object (110 ms for
  10,000 bundles); `marshal.loads` of the whole file takes 16 ms. Each tree folder is
  made or checked once per run and shared by its siblings, and a new link is one
  `symlink()` under its final name: 393,180 system calls for 10,000 bundles became
  192,478 (strace -c; no `realpath` per DWARF file any more), then 172,496 with 303
  failed ones, not 20,297: a level is tried with `mkdir` first (no failed `lstat` per
  link) and the cache's entries are listed once per run (no failed look for a shadow
  per bundle). The mkdir floor was once measured into a fresh folder while the index
  ran right after `rm -rf` of the previous cache, then both right after `rm -rf`: on
  this VM's ext4 disk, making 50,000 folders just after deleting 50,000 costs several
  times more (fresh 7.1 s, after the removal 14.5 s). Now every run of either goes into
  a folder never used before, the folders removed only after the last round, on the disk
  and on tmpfs. On tmpfs, before the cuts below, the index's CPU was 1.44 s against
  0.53 s for the floor (2.59x wall, 5 rounds), after them 1.18 s against 0.52 s (2.25x, a
  run of `--only index`; the table above is this run's own measure): each DWARF file is now read with one open and an fstat (the scandir
  entry's type stands for the stat before the open, the stamp comes from the
  descriptor: 172,517 system calls became 152,276, stat calls 41,278 became 21,176), the
  range checks unpack only the numbers they read (a section's two names were bytes
  objects per section: 23 us a dSYM became 16 us), filelock loads only when an entry is
  removed (40 ms of imports), and a first index skips comparing each bundle with cache
  entries it cannot have. What is left beside the floor's mkdir calls: listing each
  DWARF folder (openat, fstat, two getdents64, close), the open, fstat and pread of
  each file, its symlink, and about 16 us of header parsing a file.
- **The hit path** (the launcher's `-I -S` Python): `python -c pass` is about 3 ms
  above `python -I -S -c pass`, `site` and the `os` it imports. The hot-path modules no
  longer import `os`, which with posixpath, genericpath, stat and `_collections_abc` was
  about 1.5 ms of CPU per lookup: _bare_os.py gives them posix's calls and os.path's path
  functions. The launcher's answer for a moved installation is a string compiled only
  when taken (a script has no .pyc: its 180-node tree was 0.2 ms of every lookup). A
  launcher hit's CPU (user+sys, interleaved runs) went from 1.16-1.20x to 1.03-1.05x
  `python -c pass`, 0.87x of before. Then the biggest piece left was not the helper's
  work but the interpreter's teardown after it: freeing every module and object one by
  one took about 2 ms of a remembered hit (400 interleaved runs under load: 14.9 ms of
  CPU returning from main, 12.8 ms ending with `posix._exit`; `python -c pass` 14.3 ms,
  `python -I -S -c pass` 10.7 ms). The answer goes out through raw writes and every
  file the helper writes is closed by the code that wrote it, so main() now flushes
  Python's own streams and ends the process at once (helper.py `_end_process`): the
  launcher, the console script and the negative answer all gain it. What is left above
  `python -I -S -c pass` is the per-module cost: each of the 14 modules of a hit (16 for
  a negative answer) costs 100-250 us to find, read and run, against 0.4 ms for the
  lookup itself. Loading them from one marshalled bundle written at install (tried:
  a finder serving code objects from one file, each source's mtime and size checked)
  took another 0.4-0.5 ms off; not kept, since the goals were met without a second copy
  of the code that install must keep in step with the package. `__future__` is gone
  from the hit path (0.2 ms), and a remembered hit makes 78 system calls from the
  snapshot to the answer (153 before). `dsymfind install` compiles the package's
  bytecode, so the launcher never depends on a writable `__pycache__`.
- **S3 fetch**: with plain keys a GET is signed without botocore (stores/s3/keys.py reads
  the environment's keys or a profile's in the shared files, in botocore's chain order;
  stores/s3/sigv4.py signs, its URLs botocore's `S3SigV4QueryAuth`'s to the byte): signing
  the first GET in a fresh interpreter imports 2 modules beyond the fetch path's own,
  against 109 through botocore's chain (CPU over the fetch path's imports, median of 21
  under load: 5 ms against 116 ms). The SHA-256 that `x-amz-meta-sha256` asks for (about
  120 ms of CPU for 199 MB) runs in a thread of its own beside the writer's: writing and
  hashing 199 MB takes as long as writing alone (about 190 ms, against 320 ms when the
  writer hashed). SeaweedFS gzipped 44 of the 48 4 MiB chunks of a published 199 MB dSYM:
  an untyped upload's chunks are compressed when their first 128 bytes are, and unzipped
  on every GET. Typed `application/octet-stream` (s3_upload.CONTENT_TYPE, on each part's
  request too: UploadPart has no ContentType), none are: the engine's CPU per GET went
  from 370-390 ms to 220-300 ms (/proc utime+stime around the GET) and curl's GET from
  1.67-2.15x to 1.08-1.31x the loopback HTTP server's (medians of 7-11 alternating
  rounds). Engine settings changed nothing beyond the noise: 16 MiB chunks
  (`-filer.maxMB=16`: 1.22-1.24x against 1.08-1.21x for the default's, same rounds), nor
  `-volume.hasSlowRead=false` with a 16 MiB read buffer (1.16-1.18x); two or four ranged
  GETs at once were no faster either, nor a 1 MiB read size on our side. Before the first
  byte a fresh downloader spends about 200 ms at load 1 (exec to the first byte of the
  answer, strace), the same for both stores: the fetch path's imports (httpx, filelock,
  zipfile and the cache's modules), then 7 ms for the S3 modules and the signature, and
  the engine answers 9 ms after the GET (the HTTP server 1 ms); loading the CA bundle
  (21-32 ms) now waits for the first TLS handshake, which no http:// store makes. What
  stands in the way of 1.2x is CPU on 2 cores: at load 0.4 the downloader used 634 ms of
  CPU for the S3 fetch (515 ms without the `sha256` metadata, 522 ms for the HTTP fetch:
  the check is 120 ms of SHA-256) and SeaweedFS 290 ms beside it, 924 ms of CPU in 703 ms
  of wall against 522 ms in 554 ms (1.27x; 1.19x without the check).
- **symbolicate, warm**: the phases of a warm run of the 2,000-frame report (CPU,
  in-process timers, before -> now): `dsymfind.main` 5.1 -> 0.9 ms (no argparse, gettext
  or locale: symbolicate/arguments.py reads plain words, argparse only sees help and
  mistakes); the command's modules 6.0 -> 4.3 ms (no typing, contextlib or warnings:
  tuples.py, and bindings.py finds symbolic through sys.meta_path; the text reader's
  patterns compile when used); reading the report 2.3 -> 2.5 ms; finding the 20 dSYMs
  and opening their tables about 4.5 ms; 1,695 distinct lookups 11.8 -> 10.0 ms
  (symbolic's error state read only for a lookup that found nothing, the Located entries
  made in the one loop over its result, each name decoded once by its bytes; symbolic's
  C lookups alone are about 3 ms); writing the report back 7.4 -> 6.1 ms (about 3.5 of
  it json's C encoder on the threads). The collector is off from main's start for this
  verb (its passes over the parsed report cost about 3 ms, and the verb's imports made 8
  more, about 1.4 ms). JSON is read and written by json's C scanner and encoder without
  json (jsoncodec.py: its import brought re, enum and functools, about 4 ms), records
  are tuples.py's own named tuples (collections with operator, reprlib and keyword) and
  bindings.py keeps its values without functools.cache: a warm run imports 38 modules
  instead of 59 and makes 1,473 system calls instead of 1,720; its CPU in-process went
  from 54 to 43 ms (medians, alternating rounds), 0.85x llvm-symbolizer's wall and CPU
  against 1.00x for the code before in the same rounds. What is left against
  llvm-symbolizer, one native process, is the interpreter (12 ms), the lookups and
  Python objects per frame. Earlier: symbolic is called
  through its C interface alone (its Python wrappers imported uuid, platform and shutil
  with bz2 and lzma, about 12 ms), pydemumble loads only for names a demangler knows
  (3 ms), and a cold run builds its SymCaches one thread per core (symbolic releases the
  GIL). Later, off the helper's paths the standard library came back: tuples.py and
  jsoncodec.py are gone (typing, and with it re and enum, already loaded again through
  cache/symcache_files.py), and a warm run of a two-frame report costs about 2 ms more
  (28 -> 30 ms wall, 40 interleaved runs): json's modules and typing.NamedTuple's making
  of each record class.
- **symbolicate, the SymCaches' digests**: a warm run reads each kept table into memory
  and checks its CRC-32 before symbolic reads those bytes (it used to map the
  file). With BLAKE2b-256, opening the 20 tables of the 2,000-frame report (1.6 MB) went
  from 1.0 to 5.1 ms in-process (medians of 200 passes, load 10; least 0.7 -> 3.4 ms):
  reading the files 1.4 ms, BLAKE2b 2.0 ms, symbolic's checks the rest; whole warm runs
  before and after, alternating, 60-100 rounds at loads 10-13: +6.4 to +7.6 ms of CPU per
  run, and the bench's warm ratio 0.94x before, 1.04x after (medians of five runs at loads
  2-20). CRC-32 (zlib) checks the same tables in 0.5 ms: the check is for damage, not
  forgery, and CRC-32 finds every flipped byte and burst of up to 32 bits, letting other
  damage through once in 2^32, so it was taken. SHA-256 hashes faster with SHA-NI, but
  importing hashlib loads OpenSSL (6 ms); mapping the file instead of reading it saves
  1.2 ms, but symbolic would then read the file, not the bytes checked. Checking only when
  the file's stat changed was not taken: damage on the medium changes no stat.
"""


def machine_lines(scale: Scale) -> list[str]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    versions = ", ".join(
        f"{p} {_version(p)}"
        for p in ("dsymfind", "httpx", "macholib", "filelock", "pip", "boto3", "botocore")
    )
    tools = [_first_line(["hyperfine", "--version"]), _first_line(["curl", "--version"])]
    load = os.getloadavg()
    return [
        f"- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}",
        f"- Load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- Python {platform.python_version()} ({sys.executable}); {versions}",
        f"- Tools: {'; '.join(t for t in tools if t)}",
        f"- Scale: {scale.name} ({scale.rounds} rounds of {scale.runs} runs per start-up "
        f"figure, {scale.fetch_rounds} fetch rounds)",
        "- PYTHONDONTWRITEBYTECODE is removed from the environment of every measured process "
        "(bytecode caching on, for the helper and the reference alike); HOME and XDG folders "
        "point into the benchmark's temporary folder. The resident downloader is off "
        "(DSYMFIND_RESIDENT_DOWNLOADER=0) but in the cold-miss figures, which run in the "
        "default settings and measure the first miss of a session and the later ones apart.",
    ]


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _first_line(argv: list[str]) -> str:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, check=False
        ).stdout.splitlines()[0]
    except (OSError, IndexError):
        return ""


def verdict(figure: Figure) -> str:
    if figure.met is None:
        return "not judged" if figure.measured != "not measured" else "**not measured**"
    return "met" if figure.met else "**missed**"


def render(bench: Suite, elapsed: float) -> str:
    lines = [
        "# dsymfind benchmarks",
        "",
        "Generated by `scripts/bench`; do not edit by hand. Each timed figure is "
        "measured with its reference in the same run, in alternating rounds (a round is "
        "hyperfine -N, no shell, for the start-up figures; one timed run of each for the "
        "fetch, publish and index-floor figures); the ratio is the median of the per-round "
        "ratios; in brackets, the lowest and the highest per-round ratio.",
        "",
        *machine_lines(bench.scale),
        f"- Whole run: {elapsed:.0f} s",
        "",
        "| figure | reference | goal | measured | reference measured | ratio | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in bench.figures:
        ratio = (
            "" if f.ratio is None else (f"{f.ratio:.2f}x" if f.ratio >= 0.01 else f"{f.ratio:.2e}")
        )
        if f.spread is not None:
            ratio += f" ({f.spread[0]:.2f}-{f.spread[1]:.2f})"
        lines.append(
            f"| {f.name} | {f.reference} | {f.goal} | {f.measured} | {f.reference_measured} "
            f"| {ratio} | {verdict(f)} |"
        )
    lines += ["", "## Notes per figure", ""]
    for f in bench.figures:
        for note in f.notes:
            lines.append(f"- {f.name}: {note}")
    static = [] if bench.only else [STATIC_FINDINGS]
    lines += ["", "## Profile findings", "", *static, "Measured in this run:", ""]
    lines += [f"- {finding}" for finding in bench.findings]
    if bench.scale is QUICK:
        lines += ["", "A quick run: small fixtures and few runs, so no goal is judged."]
    if bench.only:
        lines += ["", f"Only the `{bench.only}` figures were run (`--only {bench.only}`)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small version of every figure")
    parser.add_argument(
        "--only",
        choices=[
            "big",
            "symbolicate",
            "s3",
            "builds",
            "index",
            "check-build",
            "soak",
            "groups",
            "batches",
            "atos",
            "retire",
            "miss",
            "system-index",
            "system-symbols",
        ],
        help="only these figures (big: the big-download ones, scripts/bench_big.py; "
        "symbolicate: scripts/bench_symbolicate.py; index: the `dsymfind index` ones; "
        "check-build: scripts/bench_check_build.py; soak: scripts/soak.py; "
        "batches: scripts/bench_batches.py; retire: scripts/bench_retire.py; miss: scripts/bench_miss.py; "
        "system-index: scripts/bench_system_index.py; "
        "system-symbols: scripts/bench_system_symbols.py)",
    )
    parser.add_argument(
        "--output",
        help="where to write the report (default: BENCHMARKS.md; "
        "with --quick or --only, standard output only)",
    )
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    whole = not (args.quick or args.only)  # only a whole run at full scale is BENCHMARKS.md
    output = args.output or (str(ROOT / "BENCHMARKS.md") if whole else None)
    missing = fixtures.toolchain_missing() + [
        t for t in ("hyperfine", "curl") if not shutil.which(t)
    ]
    if missing:
        print(
            f"bench: missing tools: {', '.join(missing)} (scripts/bench installs them as root)",
            file=sys.stderr,
        )
        return 1
    # A SIGTERM (a CI job's time limit) ends the run through the finally clauses too: the
    # servers, the shaped link's network namespace and the temporary folder go with it.
    signal.signal(signal.SIGTERM, _terminated)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dsymfind-bench-") as work:
        bench = Suite(Path(work), scale, args.only)
        try:
            _run_all(bench)
        except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            print(f"bench: {exc}", file=sys.stderr)
            return 1
        finally:
            bench.stop()
        report = render(bench, time.monotonic() - started)
    print(report, end="")
    if output:
        Path(output).write_text(report)
        print(f"bench: wrote {output}", file=sys.stderr)
    return 0


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _run_all(bench: Suite) -> None:
    big = bench_big.BigDownloads(bench)
    symbolicate = bench_symbolicate.SymbolicateFigures(bench)
    check_build = bench_check_build.CheckBuildFigure(bench)
    batches = bench_batches.BatchFigures(bench)
    retire = bench_retire.RetireFigures(bench)
    miss = bench_miss.MissFigures(bench, bench)
    systems = bench_system_symbols.SystemSymbolsFigure(bench)
    floor_rounds = FLOOR_ROUNDS if bench.scale is FULL else QUICK_FLOOR_ROUNDS
    # On the system-symbols figure's fixtures, once it has built them.
    system_floors = bench_symbolicate_floor.Floors(bench, floor_rounds, systems)
    steps = [
        bench.prepare,
        bench.start_up_figures,
        bench.launcher_figure,
        bench.s3_start_up_figures,
        bench.search_figure,
        bench.sequential_figure,
        bench.fetch_figures,
        *big.steps(),
        bench.s3_figures,
        bench.builds_figure,
        *check_build.steps(),
        *retire.steps(),
        *miss.steps(),
        bench.index_figure,
        *bench_system_index.SystemIndexFigure(bench).steps(),
        bench.uuid_read_figure,
        *symbolicate.steps(),
        *systems.steps(),
        system_floors.system_symbols_figures,
        *bench_groups.GroupsFigure(bench).steps(),
        *batches.steps(),
        *bench_atos.AtosFigure(bench).steps(),
        bench.wrapper_profile,
        bench.soak_figure,  # last: it loads the machine, and waits out every downloader
    ]
    if bench.only == "big":
        steps = big.steps()
    elif bench.only == "symbolicate":
        steps = symbolicate.steps()
    elif bench.only == "s3":
        steps = [bench.prepare, bench.s3_figures]
    elif bench.only == "builds":
        steps = [bench.builds_figure]
    elif bench.only == "index":
        steps = [bench.prepare_index, bench.index_figure]
    elif bench.only == "check-build":
        steps = check_build.steps()
    elif bench.only == "groups":
        steps = bench_groups.GroupsFigure(bench).steps()
    elif bench.only == "retire":
        steps = retire.steps()
    elif bench.only == "soak":
        steps = [bench.soak_figure]
    elif bench.only == "batches":
        steps = batches.steps()
    elif bench.only == "atos":
        steps = bench_atos.AtosFigure(bench).steps()
    elif bench.only == "miss":
        steps = miss.steps()
    elif bench.only == "system-index":
        steps = bench_system_index.SystemIndexFigure(bench).steps()
    elif bench.only == "system-symbols":
        steps = [
            *systems.steps(),
            system_floors.system_symbols_figures,
        ]
    for step in steps:
        print(f"bench: {step.__name__.replace('_', ' ')}", file=sys.stderr, flush=True)
        step()


if __name__ == "__main__":
    raise SystemExit(main())
