"""The symbolicate figures: reports over generated images, beside llvm-symbolizer on the
same addresses and `dsymfind fetch` of the same dSYMs.

Images and reports come from bench_fixtures.py. For the warm and cold figures the dSYMs
are linked into a cache's UUID tree, as a fetch or `dsymfind index` leaves them; for the
served one they are on a loopback server and the cache is emptied before each run.
bench.py runs these after its own figures, or alone with `--only symbolicate`.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import bench_fixtures as fixtures
from bench_core import CLI, FULL, KIB, RUN_TIMEOUT, Bench, BenchError, Figure, Pair, ms
from support.symbol_server import SymbolServer
from support.symbolication import SYMBOLIZER, TEXT_VMADDR

from dsymfind.apple import crashreport
from dsymfind.cache import symcache_files
from dsymfind.paths import CachePaths
from dsymfind.symbolicate import formats, symcaches
from dsymfind.symbolicate.addresses import lookup_offset, return_address_step
from dsymfind.symbolicate.engine import ImageSymbols
from dsymfind.symbolicate.model import Frame, Report
from dsymfind.uuids import tree_entry, uuid_hex

FUNCTIONS_PER_IMAGE = 300
FRAMES_PER_THREAD = 50
LOOKUP_GOAL = 100_000
# In-process lookup passes over a report, each with fresh engines (nothing remembered).
LOOKUP_PASSES = 5
# Passes over the kept tables' digests, timed in-process (the median is reported).
DIGEST_PASSES = 20
WARM, SERVED = "symbolicate", "symbolicate-served"


class Sizes(NamedTuple):
    images: int  # generated images, each with its dSYM
    frames: int  # frames of the report the timed figures symbolicate
    big_frames: int  # frames of the report of the memory and lookup-rate figures


FULL_SIZES = Sizes(20, 2_000, 20_000)
QUICK_SIZES = Sizes(4, 200, 2_000)


class SymbolicateFigures:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.sizes = FULL_SIZES if bench.scale is FULL else QUICK_SIZES
        self.work = bench.work / "symbolicate"
        self.images: list[fixtures.Image] = []
        self.report = self.work / "report.ips"
        self.big_report = self.work / "big-report.ips"
        self.cold_seconds: float | None = None

    def steps(self) -> list[Callable[[], None]]:
        return [
            self.prepare_symbolicate,
            self.warm_and_cold_figures,
            self.lookup_figure,
            self.memory_figure,
            self.served_figure,
        ]

    # -- fixtures ------------------------------------------------------------------

    def prepare_symbolicate(self) -> None:
        started = time.monotonic()
        sizes = self.sizes
        self.images = fixtures.symbolication_images(
            self.work / "images", sizes.images, FUNCTIONS_PER_IMAGE
        )
        if len({image.uuid for image in self.images}) != sizes.images:
            raise BenchError("two generated images have the same UUID")
        self.report.write_text(
            fixtures.symbolication_report(self.images, sizes.frames, FRAMES_PER_THREAD, seed=1)
        )
        self.big_report.write_text(
            fixtures.symbolication_report(self.images, sizes.big_frames, FRAMES_PER_THREAD, 2)
        )
        for image in self.images:
            entry = Path(tree_entry(str(self.bench.cache(WARM) / "uuids"), image.uuid))
            entry.parent.mkdir(parents=True, exist_ok=True)
            entry.symlink_to(image.dwarf)
        self.bench.write_config(WARM, f"cache_dir = {json.dumps(str(self.bench.cache(WARM)))}\n")
        self.bench.findings.append(
            f"Symbolicate fixtures generated in {time.monotonic() - started:.0f} s: "
            f"{sizes.images} images of {FUNCTIONS_PER_IMAGE} functions (DWARF files of "
            f"{self.images[0].dwarf.stat().st_size / 1e3:.0f} kB), reports of {sizes.frames} "
            f"and {sizes.big_frames} frames, {FRAMES_PER_THREAD} to a thread."
        )

    # -- the figures ---------------------------------------------------------------

    def warm_and_cold_figures(self) -> None:
        if SYMBOLIZER is None:
            for name in ("warm", "cold"):
                figure = Figure(self._name(name), "llvm-symbolizer", "")
                figure.notes.append("not measured: no llvm-symbolizer installed")
                self.bench.figures.append(figure)
            return
        env = self.bench.env(WARM)
        subject = self._symbolicate_command(self.report)
        reference = self._symbolizer_command(self.report)
        self._expect_success(subject, env)  # builds the SymCaches: the warm state
        warm = self.bench.compare(subject, reference, env)
        self._judge(self._name("warm"), warm, 1.0, "the SymCaches built by an earlier run")
        self.bench.figures[-1].notes.append(self._digest_note())
        tables = shlex.join(["rm", "-rf", CachePaths(str(self.bench.cache(WARM))).symcaches])
        cold = self.bench.compare(subject, reference, env, prepare=["sh", "-c", tables])
        self.cold_seconds = cold.subject
        self._judge(self._name("cold"), cold, 2.0, "the SymCaches removed before each run")

    def _digest_note(self) -> str:
        """What checking the kept tables' digests costs a warm run, measured in-process."""
        cache = CachePaths(str(self.bench.cache(WARM)))
        version = symcaches.current_version()
        tables = [
            Path(cache.symcache_file(uuid_hex(image.uuid), version)).read_bytes()
            for image in self.images
        ]
        passes = []
        for _ in range(DIGEST_PASSES):
            started = time.perf_counter()
            for kept in tables:
                symcache_files.header(memoryview(kept)[symcache_files.HEADER_BYTES :])
            passes.append(time.perf_counter() - started)
        size = sum(len(kept) for kept in tables)
        return (
            f"Each run checks every table's CRC-32 before using it: for these "
            f"{len(tables)} tables ({size / 1e6:.1f} MB), {ms(statistics.median(passes))} "
            f"in-process (median of {DIGEST_PASSES} passes; range "
            f"{ms(min(passes))}-{ms(max(passes))})."
        )

    def _name(self, state: str) -> str:
        sizes = self.sizes
        return (
            f"`dsymfind symbolicate` of a {sizes.frames}-frame report over {sizes.images} "
            f"images, dSYMs cached, {state}"
        )

    def _judge(self, name: str, pair: Pair, limit: float, state: str) -> None:
        figure = Figure(
            name,
            "llvm-symbolizer-14 --inlines --output-style=JSON, the same addresses on stdin "
            "(`FILE ADDR` lines, one process)",
            f"≤ {limit:.1f}x",
        )
        figure.notes.append(
            f"{state}; both through `sh -c` (output to /dev/null). dsymfind reads the "
            "report, finds each dSYM in the cache, opens or builds its SymCache, looks "
            "every frame up and writes the report back; llvm-symbolizer reads the DWARF of "
            "each file named and only looks up."
        )
        self.bench.judge(figure, pair, limit)

    def lookup_figure(self) -> None:
        """Frames per second of the lookups alone, in this process, SymCaches open."""
        cache = CachePaths(str(self.bench.cache(WARM)))
        rates = {}
        for path in (self.report, self.big_report):
            report = formats.parse(crashreport.read_text(str(path)))
            tables = {i.uuid: symcaches.load(cache, str(i.dwarf), i.uuid) for i in self.images}
            passes = [self._lookup_rate(report, tables) for _ in range(LOOKUP_PASSES)]
            rates[path] = (statistics.median(passes), len(report.frames()), _distinct(report))
        rate, frames, distinct = rates[self.big_report]
        figure = Figure(
            f"lookup rate of a {frames}-frame report (in-process, SymCaches open)",
            "—",
            f"≥ {LOOKUP_GOAL:,} frames/s",
        )
        figure.measured = f"{rate:,.0f} frames/s"
        figure.met = rate >= LOOKUP_GOAL if self.bench.scale is FULL else None
        small_rate, small_frames, small_distinct = rates[self.report]
        figure.notes.append(
            f"The engine's own loop (ImageSymbols.frame for each frame, fresh engines each of "
            f"{LOOKUP_PASSES} passes, median): {distinct} distinct addresses among {frames} "
            f"frames, each looked up once in symbolic's table; the {small_frames}-frame report "
            f"({small_distinct} distinct) ran at {small_rate:,.0f} frames/s."
        )
        self.bench.figures.append(figure)

    @staticmethod
    def _lookup_rate(report: Report, tables: dict[str, Any]) -> float:
        engines = {uuid: ImageSymbols(table) for uuid, table in tables.items()}
        frames = [(engines[report.images[f.image].uuid or ""], f) for f in _looked_up(report)]
        started = time.perf_counter()
        for engine, frame in frames:
            engine.frame(frame.offset or 0, frame.position)
        return len(frames) / (time.perf_counter() - started)

    def memory_figure(self) -> None:
        env = self.bench.env(WARM)
        argv = self._symbolicate_command(self.big_report)
        figure = Figure(
            f"peak RSS of `dsymfind symbolicate` of a {self.sizes.big_frames}-frame report",
            "llvm-symbolizer on the same addresses",
            "—",
        )
        figure.measured = f"{self.bench.peak_rss(argv, env) / KIB:.1f} MB"
        if SYMBOLIZER is not None:
            reference = self._symbolizer_command(self.big_report)
            figure.reference_measured = f"{self.bench.peak_rss(reference, env) / KIB:.1f} MB"
        figure.notes.append("`/usr/bin/time -v` (Maximum resident set size), SymCaches warm.")
        self.bench.figures.append(figure)

    def served_figure(self) -> None:
        served = self.work / "served"
        paths = [fixtures.serve_native(served, i.uuid, i.dwarf) for i in self.images]
        server = SymbolServer(served).start()
        try:
            self._served_figure(server, paths)
        finally:
            server.stop()

    def _served_figure(self, server: SymbolServer, paths: list[str]) -> None:
        cache = self.bench.cache(SERVED)
        self.bench.write_config(
            SERVED,
            f"cache_dir = {json.dumps(str(cache))}\ntimeout = 600\n"
            f'[[servers]]\nurl = "{server.url}/"\nlayout = "native"\n',
        )
        env, uuids = self.bench.env(SERVED), [image.uuid for image in self.images]
        empty = ["rm", "-rf", str(cache)]
        subject = self._symbolicate_command(self.report)
        batch = [CLI, "fetch", *uuids]
        serial = self.work / "serial-fetch.sh"
        serial.write_text("".join(shlex.join([CLI, "fetch", u]) + " >/dev/null\n" for u in uuids))
        before = [server.count(p) for p in paths]
        subprocess.run(empty, check=True)
        self._expect_success(subject, env)
        requests = [server.count(p) - b for p, b in zip(paths, before, strict=True)]
        if requests != [1] * len(paths):
            raise BenchError(f"symbolicate asked the server {requests} times per dSYM, not once")
        medians = self._rounds([subject, batch, ["sh", str(serial)]], env, empty)
        figure = Figure(
            f"`dsymfind symbolicate` of the {self.sizes.frames}-frame report, its "
            f"{self.sizes.images} dSYMs on a loopback server",
            "`dsymfind fetch` of the same UUIDs (one call)",
            "< the same fetches one at a time",
        )
        figure.measured, figure.reference_measured = ms(medians[0]), ms(medians[1])
        figure.ratio = medians[0] / medians[1]
        figure.met = medians[0] < medians[2] if self.bench.scale is FULL else None
        alone = (
            "" if self.cold_seconds is None else f", symbolication alone {ms(self.cold_seconds)}"
        )
        figure.notes.append(
            f"The cache is emptied before each run; each dSYM was asked for once. The same "
            f"{len(uuids)} fetches one `dsymfind fetch` at a time took {ms(medians[2])}"
            f"{alone} (the cold figure: dSYMs cached, SymCaches not built)."
        )
        self.bench.figures.append(figure)

    def _rounds(
        self, commands: list[list[str]], env: dict[str, str], prepare: list[str]
    ) -> list[float]:
        rounds = [
            self.bench.hyperfine(commands, env, runs=3, warmup=0, prepare=prepare)
            for _ in range(self.bench.scale.rounds)
        ]
        return [statistics.median(r[i] for r in rounds) for i in range(len(commands))]

    # -- commands --------------------------------------------------------------------

    def _symbolicate_command(self, report: Path) -> list[str]:
        """`dsymfind symbolicate` of every thread, through sh to write its output nowhere."""
        line = shlex.join([CLI, "symbolicate", "--all-threads", str(report)])
        return ["sh", "-c", f"{line} >/dev/null 2>/dev/null"]

    def _symbolizer_command(self, report: Path) -> list[str]:
        """llvm-symbolizer given the very addresses dsymfind looks up, one process."""
        assert SYMBOLIZER is not None
        listing = report.with_suffix(".addresses")
        if not listing.exists():
            listing.write_text(self._symbolizer_input(report))
        argv = [SYMBOLIZER, "--inlines", "--output-style=JSON", "--default-arch=arm64"]
        return ["sh", "-c", f"{shlex.join(argv)} <{shlex.quote(str(listing))} >/dev/null"]

    def _symbolizer_input(self, report: Path) -> str:
        parsed = formats.parse(crashreport.read_text(str(report)))
        lines = []
        step = return_address_step("arm64")
        for frame in _looked_up(parsed):
            target = lookup_offset(frame.offset or 0, frame.position, step)
            if target is not None:
                dwarf = self.images[frame.image or 0].dwarf
                lines.append(f"{dwarf} {TEXT_VMADDR + target:#x}\n")
        return "".join(lines)

    @staticmethod
    def _expect_success(command: list[str], env: dict[str, str]) -> None:
        """One run that must exit 0: every frame named (its stderr is the images' status)."""
        done = subprocess.run(
            command, env=env, capture_output=True, check=False, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0:
            raise BenchError(f"{shlex.join(command)} failed: {done.stderr[-300:]!r}")


def _looked_up(report: Report) -> list[Frame]:
    return [f for f in report.frames() if f.image is not None and f.offset is not None]


def _distinct(report: Report) -> int:
    return len({(f.image, f.offset, f.position > 0) for f in _looked_up(report)})
