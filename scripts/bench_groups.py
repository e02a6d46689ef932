"""The --group figure: `dsymfind symbolicate --group` of 10,000 reports whose frames are
named already (so nothing is looked up or fetched), in reports per second.

The reports come from tests/support/crash_groups.py: `.ips` reports about crashy over a
handful of signatures, versions and times. Each round is one run of the command line,
wall time from start to the JSON written; the figure is the median round. The CPU time
of the same runs is noted beside it, as the machine may be shared. bench.py runs it
after its own figures, or alone with `--only groups`.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench_core import CLI, FULL, RUN_TIMEOUT, BenchError, Figure
from support.crash_groups import variations

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench_core import SuiteWithS3 as Suite

GOAL = 5_000  # reports a second
FULL_REPORTS, QUICK_REPORTS = 10_000, 500


class GroupsFigure:
    def __init__(self, suite: Suite) -> None:
        self.suite = suite

    def steps(self) -> list[Callable[[], None]]:
        return [self.groups_figure]

    def groups_figure(self) -> None:
        suite = self.suite
        count = FULL_REPORTS if suite.scale is FULL else QUICK_REPORTS
        figure = Figure(
            f"`dsymfind symbolicate --group --format json` of {count} already symbolicated "
            ".ips reports",
            "—",
            f"≥ {GOAL} reports/s",
        )
        folder = suite.work / "groups"
        reports = _write_reports(folder / "in", count)
        argv = [CLI, "symbolicate", "--group", "--offline", "--format", "json"]
        argv += ["-o", str(folder / "groups.json"), *reports]
        env = suite.env()
        walls, cpus = [], []
        for timed in [False] + [True] * suite.scale.fetch_rounds:
            wall, cpu = _run(argv, env)
            if timed:
                walls.append(wall)
                cpus.append(cpu)
        grouped = json.loads((folder / "groups.json").read_text())
        if grouped["reports"] != count:
            raise BenchError(f"--group counted {grouped['reports']} reports of {count}")
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        rate = count / wall
        figure.measured = (
            f"{rate:,.0f} reports/s ({wall:.2f} s wall, {len(grouped['groups'])} groups)"
        )
        figure.met = rate >= GOAL if suite.scale is FULL else None
        figure.notes.append(
            f"median of {len(walls)} runs; their CPU time (user + system) {cpu:.2f} s, "
            f"{count / cpu:,.0f} reports per CPU second"
        )
        suite.figures.append(figure)


def _write_reports(folder: Path, count: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, text in enumerate(variations(count)):
        path = folder / f"r{number:05d}.ips"
        path.write_text(text)
        paths.append(str(path))
    return paths


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run, which must group every report (exit status 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=RUN_TIMEOUT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise BenchError(f"symbolicate --group failed: {done.stderr[-300:]!r}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu
