"""What every figure module of the benchmark shares: where the measured programs are, the
scales, a figure and its measurement, and Bench, which runs and times the measured
processes and collects the figures.

bench.py (its own figures, the run and the report), bench_big.py and bench_symbolicate.py
all build on this module, which imports none of them: a figure module needs nothing of
the script that runs it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dsymfind import paths, settings
from dsymfind.cache import locks
from dsymfind.paths import CachePaths

ROOT = Path(__file__).resolve().parent.parent
# The test suite's helpers (its symbol server, its process finders) serve the figures too.
sys.path.insert(0, str(ROOT / "tests"))
from support.processes import downloader_pids  # noqa: E402 - test helpers, not a package
from support.symbol_server import SymbolServer  # noqa: E402

BIN = Path(sys.executable).parent
PYTHON = str(BIN / "python")
HELPER = str(BIN / "dsymForUUID")
CLI = str(BIN / "dsymfind")
TIME = "/usr/bin/time"
# A downloader still at work after the helper answered is waited for up to this long.
DOWNLOADER_WAIT = 120.0
# Every timed run is cut off after this long: a hang is a failure, not a figure.
RUN_TIMEOUT = 600
KIB = 1024


@dataclass(frozen=True)
class Scale:
    name: str
    bundles: int  # bundles in the search-path tree and in `dsymfind index`
    sequential: int  # lookups in the sequential figure
    large_mb: int  # size of the fetched and identified dSYM
    concurrent: int  # helpers started at once
    rounds: int  # alternating rounds per timed figure
    runs: int  # hyperfine runs per command and round (start-up figures)
    warmup: int
    fetch_rounds: int  # also the rounds of the S3 publish and fetch figures
    index_runs: int
    republish: int  # unchanged bundles of the tree published to S3 again
    big_mb: int  # size of the big-download figures' dSYM (scripts/bench_big.py)
    link_rounds: int  # alternating rounds over the shaped link


FULL = Scale("full", 10_000, 400, 200, 32, 5, 30, 3, 5, 3, 1_000, 1000, 3)
# The quick big dSYM outgrows the first partial-file checkpoint (32 MiB, stores/body.py):
# a smaller body is whole before any, leaves nothing to resume, and the resume figure
# could not be measured.
QUICK = Scale("quick", 200, 10, 4, 4, 1, 3, 1, 1, 1, 100, 48, 1)


@dataclass
class Figure:
    name: str
    reference: str
    goal: str
    measured: str = "not measured"
    reference_measured: str = ""
    ratio: float | None = None
    met: bool | None = None  # None: not judged (quick run, or not measured)
    spread: tuple[float, float] | None = None  # of the per-round ratios, when several
    notes: list[str] = field(default_factory=list)


@dataclass
class Pair:
    """Medians of a subject and its reference, and the median of their per-round ratios."""

    subject: float
    reference: float
    ratio: float
    spread: tuple[float, float] | None = None  # the lowest and the highest per-round ratio

    @classmethod
    def of_rounds(cls, subjects: list[float], references: list[float], ratios: list[float]) -> Pair:
        spread = (min(ratios), max(ratios)) if len(ratios) > 1 else None
        return cls(
            statistics.median(subjects),
            statistics.median(references),
            statistics.median(ratios),
            spread,
        )


class Bench:
    """The measuring the figures share: the measured processes' environment and
    configurations, timed runs, and the figures and findings collected for the report."""

    def __init__(self, work: Path, scale: Scale) -> None:
        self.work, self.scale = work, scale
        self.home = work / "home"
        self.large_uuid = ""  # the fetched dSYM's, once prepared
        self.server: SymbolServer | None = None
        self.figures: list[Figure] = []
        self.findings: list[str] = []

    # -- environment ---------------------------------------------------------------

    def env(self, config: str | None = None) -> dict[str, str]:
        """The environment of every measured process: an isolated home, bytecode caching on."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSYMFIND_")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # absent: "=0" would still turn it off
        # No resident downloader but in the cold-miss figures (bench_miss.py), which measure
        # a session's first miss and its later ones: elsewhere one would outlive its figure
        # (and keep `strace -f` waiting for it), and each figure measures what it did before.
        env[settings.RESIDENT_ENV] = "0"
        env["HOME"] = str(self.home)
        for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
            env[var] = str(self.home / sub)
        env["XDG_STATE_HOME"] = str(self.home / ".state")
        if config is not None:
            env[paths.CONFIG_ENV] = str(self.work / "configs" / f"{config}.toml")
        return env

    def write_config(self, name: str, text: str) -> None:
        path = self.work / "configs" / f"{name}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def cache(self, name: str) -> Path:
        return self.work / "caches" / name

    # -- measuring -----------------------------------------------------------------

    def hyperfine(
        self,
        commands: list[list[str]],
        env: dict[str, str],
        *,
        runs: int,
        warmup: int,
        prepare: list[str] | None = None,
    ) -> list[float]:
        """Median wall seconds of each command, from one hyperfine call (no shell)."""
        export = self.work / "hyperfine.json"
        argv = ["hyperfine", "-N", "--style", "none", "-w", str(warmup), "-r", str(runs)]
        argv += ["--export-json", str(export)]
        if prepare:
            argv += ["--prepare", shlex.join(prepare)]
        argv += [shlex.join(c) for c in commands]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        if done.returncode != 0:
            raise BenchError(f"hyperfine failed: {done.stderr.strip()[-500:]}")
        results = json.loads(export.read_text())["results"]
        return [float(r["median"]) for r in results]

    def compare(
        self,
        subject: list[str],
        reference: list[str],
        env: dict[str, str],
        *,
        rounds: int | None = None,
        runs: int | None = None,
        warmup: int | None = None,
        prepare: list[str] | None = None,
    ) -> Pair:
        """Subject and reference in alternating hyperfine rounds."""
        subjects, references, ratios = [], [], []
        for _ in range(rounds or self.scale.rounds):
            s, r = self.hyperfine(
                [subject, reference],
                env,
                runs=runs or self.scale.runs,
                warmup=self.scale.warmup if warmup is None else warmup,
                prepare=prepare,
            )
            subjects.append(s)
            references.append(r)
            ratios.append(s / r)
        return Pair.of_rounds(subjects, references, ratios)

    def judge(self, figure: Figure, pair: Pair | None, limit: float) -> None:
        if pair is not None:
            figure.measured = ms(pair.subject)
            figure.reference_measured = ms(pair.reference)
            figure.ratio = pair.ratio
            figure.spread = pair.spread
            figure.met = pair.ratio <= limit if self.scale is FULL else None
        self.figures.append(figure)

    def timed(self, argv: list[str], env: dict[str, str], *, found: bool = False) -> float:
        return self.timed_run(argv, env, expect=b"DBGDSYMPath" if found else None)[0]

    def timed_run(
        self, argv: list[str], env: dict[str, str], *, expect: bytes | None = None
    ) -> tuple[float, bytes]:
        """Wall seconds of one run that must succeed quietly (but for publish's progress
        lines, which a large upload prints to a log), and its output."""
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=RUN_TIMEOUT)
        elapsed = time.perf_counter() - started
        said = [line for line in done.stderr.splitlines() if not line.startswith(b"publish: ")]
        if done.returncode != 0 or said:
            raise BenchError(f"{argv[0]} failed: {done.stderr[-300:]!r}")
        if expect is not None and expect not in done.stdout:
            raise BenchError(f"no {expect!r} in the output: {done.stdout[-300:]!r}")
        return elapsed, done.stdout

    def clear_fetch_cache(self, name: str = "fetch") -> None:
        shutil.rmtree(self.cache(name), ignore_errors=True)

    def wait_for_downloaders(self, cache: str = "fetch", uuid: str | None = None) -> None:
        """Until no downloader of `uuid` (the large one's by default) runs: they are
        detached, not our children."""
        held_in, uuid = CachePaths(str(self.cache(cache))), uuid or self.large_uuid
        deadline = time.monotonic() + DOWNLOADER_WAIT
        # The downloaders run with the measured processes' HOME, not the bench's own.
        while downloader_pids(uuid, str(self.home)) or locks.is_held(held_in, uuid):
            if time.monotonic() > deadline:
                raise BenchError("a downloader is still running after the helper answered")
            time.sleep(0.02)

    def peak_rss(self, argv: list[str], env: dict[str, str]) -> int:
        """Peak resident set of one process, KiB."""
        report = self.work / "time-v.txt"
        subprocess.run(
            [TIME, "-v", "-o", str(report), *argv],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT,
        )
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report.read_text())
        if found is None:
            raise BenchError(f"no peak RSS in {TIME} -v output")
        return int(found.group(1))


class BenchError(Exception):
    """A figure could not be measured because something did not behave."""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def slices(path: Path) -> list[str]:
    from dsymfind.apple import macho

    return [s.uuid for s in macho.read_slices(path) if s.uuid is not None]


class SuiteWithS3(Protocol):
    """What a figure that needs the S3 engine asks of the suite running it (bench.py's
    Suite): the figure modules name this, not the script that imports them."""

    work: Path
    scale: Scale
    figures: list[Figure]
    seaweed: Any

    def env(self, config: str | None = None) -> dict[str, str]: ...
    def judge(self, figure: Figure, pair: Pair | None, limit: float) -> None: ...
    def timed_run(self, *args: Any, **kwargs: Any) -> Any: ...
    def on_seaweed(self, figures: list[Figure], measure: Any) -> None: ...
    def s3_env(self, identity: str, config: str | None = None) -> dict[str, str]: ...
    def boto3_command(self, script: str, *args: str) -> list[str]: ...
