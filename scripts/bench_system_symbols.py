"""The system-symbols figure: `dsymfind symbolicate` of a MetricKit payload whose frames all
fall in Apple's libraries, named from their symbol tables, beside llvm-symbolizer on the
same addresses in one process.

The libraries are clones (tests/support/device_support.py's clone_with_uuid) of a few thin
arm64 dylibs clang and lld build with symbol tables and no DWARF, laid out as Xcode keeps an
OS build and recorded by `dsymfind index` as a teammate's Mac would have them. The payload
has FRAMES frames over IMAGES images, in call stacks of STACK_DEPTH; its SymCaches are built
by a first run (the warm state). Each side runs in alternating rounds (the reference first
in every other one), wall and CPU (user+system) time measured per run; a one-frame payload
against one address measures the start-up both pay. bench.py runs it with its own figures,
or alone with `--only system-symbols`.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from bench_core import CLI, FULL, RUN_TIMEOUT, Bench, BenchError, Figure, Pair, ms
from support.device_support import build_device_support, clone_with_uuid
from support.symbolication import SYMBOLIZER

from dsymfind.symbolicate.addresses import return_address_step

if TYPE_CHECKING:
    from collections.abc import Callable

FULL_SIZE, QUICK_SIZE = (50, 500), (5, 50)  # (images, frames)
STACK_DEPTH = 50
# Runs of each side per round of the scale (each side's runs alternate with the other's).
RUNS_PER_ROUND = 4
GOAL = 1.0
FUNCTIONS = 300  # per library: a symbol table of some size
# Thin arm64 dylibs the clones are made of (llvm-symbolizer is given --default-arch arm64).
SOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/System/Library/PrivateFrameworks/UIKitCore.framework/UIKitCore", ("arm64",)),
    ("/System/Library/Frameworks/CoreData.framework/CoreData", ("arm64",)),
    ("/System/Library/Frameworks/Foundation.framework/Foundation", ("arm64",)),
    ("/usr/lib/system/libsystem_kernel.dylib", ("arm64",)),
    ("/usr/lib/libobjc.A.dylib", ("arm64",)),
)
FIRST_BASE, BASE_STEP = 0x1_8000_0000, 0x100_0000
NAME = "system-symbols"


class Image(NamedTuple):
    name: str
    path: Path
    uuid: str
    base: int
    functions: list[tuple[str, int]]  # (name, file address), exported and longer than 8 bytes


class SystemSymbolsFigure:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.images_count, self.frames_count = FULL_SIZE if bench.scale is FULL else QUICK_SIZE
        self.work = bench.work / NAME
        self.root = self.work / "Xcode" / "iOS DeviceSupport"
        self.images: list[Image] = []
        # (env, payload, its listing) once built: the floors (bench_symbolicate_floor.py)
        # measure on the same fixtures.
        self.prepared: tuple[dict[str, str], Path, Path] | None = None

    def steps(self) -> list[Callable[[], None]]:
        return [self.system_symbols_figure]

    def system_symbols_figure(self) -> None:
        figure = Figure(
            f"`dsymfind symbolicate` of a {self.frames_count}-frame MetricKit payload over "
            f"{self.images_count} system images, named from their symbol tables, SymCaches "
            "warm",
            "llvm-symbolizer-14 on the same addresses (`FILE ADDR` lines on stdin, one process)",
            f"≤ {GOAL:.1f}x",
        )
        if SYMBOLIZER is None:
            figure.notes.append("not measured: no llvm-symbolizer installed")
            self.bench.figures.append(figure)
            return
        started = time.monotonic()
        self._build()
        env = self._indexed_env()
        payload, listing = self._report(self.frames_count, "payload")
        one_payload, one_listing = self._report(1, "one-frame")
        built = time.monotonic() - started
        self._check_names(env, payload, listing)  # also the warm-up: builds the SymCaches
        self.prepared = (env, payload, listing)
        subject, reference = Side(self._symbolicate(payload)), Side(self._symbolizer())
        self._rounds(env, subject, reference, with_stdin=listing)
        start_subject = Side(self._symbolicate(one_payload))
        start_reference = Side(self._symbolizer())
        self._rounds(env, start_subject, start_reference, with_stdin=one_listing)
        ratios = [s / r for s, r in zip(subject.wall, reference.wall, strict=True)]
        self.bench.judge(figure, Pair.of_rounds(subject.wall, reference.wall, ratios), GOAL)
        figure.notes += [
            f"Fixtures in {built:.0f} s: {self.images_count} clones of {len(SOURCES)} thin "
            f"arm64 dylibs of {FUNCTIONS} functions (symbol tables, no DWARF), indexed by "
            f"`dsymfind index`; the payload's {self.frames_count} frames in call stacks of "
            f"{STACK_DEPTH}, each at a random exported function. Both sides run with output "
            "to /dev/null; symbolicate's names were checked against llvm-symbolizer's first.",
            f"Wall {_spread(subject.wall, ' s')} against {_spread(reference.wall, ' s')}; "
            f"CPU (user+system) {_spread(subject.cpu, ' s')} against "
            f"{_spread(reference.cpu, ' s')}, ratio "
            f"{statistics.median(subject.cpu) / statistics.median(reference.cpu):.2f}x.",
            f"Start-up (a one-frame payload against one address): wall "
            f"{ms(statistics.median(start_subject.wall))} against "
            f"{ms(statistics.median(start_reference.wall))}; CPU "
            f"{ms(statistics.median(start_subject.cpu))} against "
            f"{ms(statistics.median(start_reference.cpu))}.",
            f"Load average at the end: {load_average()}.",
        ]

    # -- fixtures ------------------------------------------------------------------

    def _build(self) -> None:
        made = build_device_support(self.work / "sources", libraries=SOURCES, functions=FUNCTIONS)
        frameworks = self.root / made.build_dir.name / "Symbols" / "System" / "Library"
        for number in range(self.images_count):
            source = made.libraries[number % len(made.libraries)]
            name = f"System{number:04d}"
            target = frameworks / "Frameworks" / f"{name}.framework" / name
            (uuid,) = clone_with_uuid(source.path, target, f"{NAME}-{number}").values()
            functions = source.functions["arm64"]
            long_enough = [
                (symbol, start)
                for (symbol, start), (_, end) in itertools.pairwise(functions)
                if end - start > 8 and "_local_" not in symbol
            ]
            base = FIRST_BASE + number * BASE_STEP
            self.images.append(Image(name, target, uuid, base, long_enough))

    def _indexed_env(self) -> dict[str, str]:
        cache = self.bench.cache(NAME)
        self.bench.write_config(NAME, f"cache_dir = {json.dumps(str(cache))}\n")
        env = self.bench.env(NAME)
        done = subprocess.run(
            [CLI, "index", str(self.root)], env=env, capture_output=True, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0:
            raise BenchError(f"dsymfind index failed: {done.stderr[-300:]!r}")
        return env

    def _report(self, count: int, stem: str) -> tuple[Path, Path]:
        """A payload of `count` frames and llvm-symbolizer's input for the addresses its
        frames are looked up at (a return address one instruction back)."""
        chosen = random.Random(count)
        frames, lines = [], []
        step = return_address_step("arm64")
        for number in range(count):
            image = self.images[chosen.randrange(len(self.images))]
            _symbol, start = chosen.choice(image.functions)
            offset = start + 8
            position = number % STACK_DEPTH
            frames.append((image, offset))
            # Quoted: an OS build's folder name has blanks ("17.5.1 (21F90)").
            lines.append(f'"{image.path}" {offset - (step if position else 0):#x}\n')
        stacks = []
        for first in range(0, count, STACK_DEPTH):
            root: dict[str, object] | None = None
            for image, offset in reversed(frames[first : first + STACK_DEPTH]):
                entry = {
                    "binaryUUID": image.uuid,
                    "binaryName": image.name,
                    "offsetIntoBinaryTextSegment": offset,
                    "address": image.base + offset,
                    "sampleCount": 1,
                }
                root = {**entry, "subFrames": [root] if root else []}
            stacks.append({"threadAttributed": len(stacks) == 0, "callStackRootFrames": [root]})
        crash = {
            "diagnosticMetaData": {"appVersion": "1.0", "appBuildVersion": "1"},
            "callStackTree": {"callStacks": stacks, "callStackPerThread": True},
        }
        payload = self.work / f"{stem}.json"
        payload.write_text(json.dumps({"crashDiagnostics": [crash]}))
        listing = self.work / f"{stem}.addresses"
        listing.write_text("".join(lines))
        return payload, listing

    # -- commands --------------------------------------------------------------------

    @staticmethod
    def _symbolicate(payload: Path) -> list[str]:
        return [CLI, "symbolicate", "--offline", "--all-threads", "--format", "json", str(payload)]

    @staticmethod
    def _symbolizer() -> list[str]:
        """llvm-symbolizer, the `FILE ADDR` lines given on its stdin."""
        assert SYMBOLIZER is not None
        return [SYMBOLIZER, "--default-arch=arm64", "--functions=linkage"]

    def _check_names(self, env: dict[str, str], payload: Path, listing: Path) -> None:
        """symbolicate names every frame as llvm-symbolizer does, from the symbol table."""
        done = subprocess.run(
            self._symbolicate(payload), env=env, capture_output=True, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0:
            raise BenchError(f"symbolicate failed: {done.stderr[-300:]!r}")
        rows = [row for t in json.loads(done.stdout)["threads"] for row in t["frames"]]
        with listing.open() as stdin:
            said = subprocess.run(
                self._symbolizer(), stdin=stdin, capture_output=True, text=True, check=True
            ).stdout
        expected = [block.splitlines()[0] for block in said.strip("\n").split("\n\n")]
        named = [row["symbol"] for row in rows]
        if named != expected or not all(row.get("symbol_table") for row in rows):
            raise BenchError("symbolicate's names are not llvm-symbolizer's")

    def _rounds(
        self, env: dict[str, str], subject: Side, reference: Side, *, with_stdin: Path
    ) -> None:
        for number in range(self.bench.scale.rounds * RUNS_PER_ROUND):
            sides = [subject, reference] if number % 2 else [reference, subject]
            for side in sides:
                side.run(env, with_stdin if side is reference else None)


class Side:
    """One command's runs: wall and CPU seconds of each."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, env: dict[str, str], stdin: Path | None) -> None:
        before = _children_cpu()
        started = time.perf_counter()
        with open(stdin or os.devnull, "rb") as given:
            done = subprocess.run(
                self.argv,
                env=env,
                stdin=given,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=RUN_TIMEOUT,
                check=False,
            )
        self.wall.append(time.perf_counter() - started)
        self.cpu.append(_children_cpu() - before)
        if done.returncode != 0:
            raise BenchError(f"{self.argv[0]} exited {done.returncode}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _spread(values: list[float], unit: str) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.3f}{unit} ({ordered[0]:.3f}-{ordered[-1]:.3f}{unit})"


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
