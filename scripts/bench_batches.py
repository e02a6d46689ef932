"""The batch figure: `dsymfind symbolicate` of a folder of reports in one run, beside
llvm-symbolizer given every address of every report in one process.

Images and reports come from bench_fixtures.py; the dSYMs are linked into a cache's UUID
tree, as a fetch or `dsymfind index` leaves them, and a first run builds the SymCaches
(the warm state). bench.py runs this after its own figures, or alone with `--only batches`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import bench_fixtures as fixtures
from bench_core import CLI, FULL, RUN_TIMEOUT, Bench, BenchError, Figure
from support.symbolication import SYMBOLIZER, TEXT_VMADDR

from dsymfind.apple import crashreport
from dsymfind.symbolicate import formats, workers
from dsymfind.symbolicate.addresses import lookup_offset, return_address_step
from dsymfind.uuids import tree_entry

FUNCTIONS_PER_IMAGE = 300
FRAMES_PER_THREAD = 50
LIMIT = 1.0
BATCHES = "batches"


class Sizes(NamedTuple):
    images: int
    reports: int
    frames: int  # per report


FULL_SIZES = Sizes(20, 1_000, 100)
QUICK_SIZES = Sizes(4, 50, 100)


class BatchFigures:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.sizes = FULL_SIZES if bench.scale is FULL else QUICK_SIZES
        self.work = bench.work / BATCHES
        self.folder = self.work / "reports"
        self.out = self.work / "out"
        self.images: list[fixtures.Image] = []

    def steps(self) -> list[Callable[[], None]]:
        return [self.prepare_batches, self.batch_figure]

    def prepare_batches(self) -> None:
        started = time.monotonic()
        sizes = self.sizes
        self.images = fixtures.symbolication_images(
            self.work / "images", sizes.images, FUNCTIONS_PER_IMAGE
        )
        for n in range(sizes.reports):
            # A folder per hundred reports, as a triage box keeps them by day or device.
            path = self.folder / f"day{n // 100:02d}" / f"report{n:04d}.ips"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                fixtures.symbolication_report(self.images, sizes.frames, FRAMES_PER_THREAD, n)
            )
        cache = self.bench.cache(BATCHES)
        for image in self.images:
            entry = Path(tree_entry(str(cache / "uuids"), image.uuid))
            entry.parent.mkdir(parents=True, exist_ok=True)
            entry.symlink_to(image.dwarf)
        self.bench.write_config(BATCHES, f"cache_dir = {json.dumps(str(cache))}\n")
        self.bench.findings.append(
            f"Batch fixtures generated in {time.monotonic() - started:.0f} s: "
            f"{sizes.reports} reports of {sizes.frames} frames over {sizes.images} images."
        )

    def batch_figure(self) -> None:
        sizes = self.sizes
        figure = Figure(
            f"`dsymfind symbolicate` of a folder of {sizes.reports:,} reports "
            f"({sizes.frames} frames each, {sizes.images} images, SymCaches warm) in one run",
            "llvm-symbolizer-14 --inlines --output-style=JSON, every address of every "
            "report on stdin (`FILE ADDR` lines, one process)",
            f"≤ {LIMIT:.1f}x wall",
        )
        if SYMBOLIZER is None:
            figure.notes.append("not measured: no llvm-symbolizer installed")
            self.bench.figures.append(figure)
            return
        env = self.bench.env(BATCHES)
        line = shlex.join([CLI, "symbolicate", "-o", str(self.out), str(self.folder)])
        subject = ["sh", "-c", f"{line} >/dev/null 2>/dev/null"]
        listing = self.work / "addresses"
        listing.write_text(self._symbolizer_input())
        argv = [SYMBOLIZER, "--inlines", "--output-style=JSON", "--default-arch=arm64"]
        reference = ["sh", "-c", f"{shlex.join(argv)} <{shlex.quote(str(listing))} >/dev/null"]
        done = subprocess.run(
            subject, env=env, capture_output=True, check=False, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0:  # also builds the SymCaches: the warm state
            raise BenchError(f"{shlex.join(subject)} failed: {done.stderr[-300:]!r}")
        written = sum(1 for p in self.out.rglob("*.ips"))
        if written != sizes.reports:
            raise BenchError(f"the batch wrote {written} reports, not {sizes.reports}")
        # Each run writes into a new folder, as a CI job does. The last run's is moved
        # aside, not removed: on ext4 without a journal the inode allocator passes over
        # each inode freed in the last 30 s (dirty_expire_centisecs) one at a time, so
        # 1,000 files removed just before a run made each of its 1,000 files cost more to
        # create, a cost of the benchmark's own. They are all removed after the figure.
        moved = self.work / "earlier-outputs"
        moved.mkdir(exist_ok=True)
        out, aside = shlex.quote(str(self.out)), shlex.quote(str(moved))
        prepare = ["sh", "-c", f'[ ! -e {out} ] || mv {out} "$(mktemp -d -p {aside})"']
        try:
            pair = self.bench.compare(subject, reference, env, runs=3, warmup=1, prepare=prepare)
        finally:
            shutil.rmtree(moved, ignore_errors=True)
        figure.notes.append(
            f"Both through `sh -c`. dsymfind {self._sharing()} under -o (mirroring the "
            "folder, a new one each run); "
            "llvm-symbolizer reads "
            "the DWARF of each file named and only looks up, its output to /dev/null."
        )
        self.bench.judge(figure, pair, LIMIT)

    def _sharing(self) -> str:
        """What the run does, as symbolicate/workers.py shares this many reports out."""
        count = workers.count(self.sizes.reports)
        if not count:
            return (
                "reads every report in one process (a batch this short is not shared out), "
                "finds each dSYM in the cache once, opens each SymCache once, looks every "
                "frame up and writes each report back"
            )
        return (
            f"shares the reports out among {count} worker processes, one per core: each "
            "reads its share, the run finds each dSYM in the cache once, and each worker "
            "opens the SymCaches, looks every frame up and writes its reports back"
        )

    def _symbolizer_input(self) -> str:
        lines = []
        for path in sorted(self.folder.rglob("*.ips")):
            for image, target in lookups(path):
                lines.append(f"{self.images[image].dwarf} {TEXT_VMADDR + target:#x}\n")
        return "".join(lines)


def lookups(path: Path) -> list[tuple[int, int]]:
    """Each frame of the report at `path` as symbolicate looks it up: its image's index
    and the image offset (a return address one instruction back)."""
    step = return_address_step("arm64")
    report = formats.parse(crashreport.read_text(str(path)))
    found = []
    for frame in report.frames():
        if frame.image is None or frame.offset is None:
            continue
        target = lookup_offset(frame.offset, frame.position, step)
        if target is not None:
            found.append((frame.image, target))
    return found
