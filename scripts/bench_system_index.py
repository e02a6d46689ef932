"""The system-index figure: `dsymfind index` of a DeviceSupport folder of 2,000 dylibs
against its floor, the least file-system work any index of these images must do here.

The dylibs are clones (tests/support/device_support.py's clone_with_uuid: each slice a new
UUID) of a few real ones that clang and lld build with symbol tables and no DWARF, thin
and universal, laid out as Xcode keeps an OS build (`iOS DeviceSupport/<version>
(<build>)/Symbols/System/Library/Frameworks/<name>.framework/<name>`). The floor makes one
entry per slice UUID, `xargs mkdir -p` of `systems/<HEX>` in a folder never used before:
whatever an index records, it must at least make a name per slice. As the bundle index's
floor figure (bench.py), every run of either goes into a folder never used before, in
alternating rounds, the floor first in every other round, and all the folders go only
after the last round. bench.py runs it with its own figures, or alone with
`--only system-index`.
"""

from __future__ import annotations

import resource
import shutil
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from bench_core import CLI, FULL, Bench, Figure, Pair
from support.device_support import build_device_support, clone_with_uuid

from dsymfind import paths
from dsymfind.uuids import uuid_hex

if TYPE_CHECKING:
    from collections.abc import Callable

FULL_DYLIBS, QUICK_DYLIBS = 2000, 100
GOAL = 3.0
# The real dylibs the clones are made of: two universal (arm64 + arm64e), three thin.
SOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/System/Library/PrivateFrameworks/UIKitCore.framework/UIKitCore", ("arm64", "arm64e")),
    ("/System/Library/Frameworks/CoreData.framework/CoreData", ("arm64", "arm64e")),
    ("/System/Library/Frameworks/Foundation.framework/Foundation", ("arm64",)),
    ("/usr/lib/system/libsystem_kernel.dylib", ("arm64e",)),
    ("/usr/lib/libobjc.A.dylib", ("arm64",)),
)
FUNCTIONS = 200  # per slice: a symbol table of some size, as a system library has


class SystemIndexFigure:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.count = FULL_DYLIBS if bench.scale is FULL else QUICK_DYLIBS
        self.root = bench.work / "system-index" / "iOS DeviceSupport"
        self.uuids: list[str] = []  # of every slice of every clone

    def steps(self) -> list[Callable[[], None]]:
        return [self.system_index_figure]

    def system_index_figure(self) -> None:
        figure = Figure(
            f"`dsymfind index` of a DeviceSupport folder of {self.count} dylibs against its floor",
            "one entry per slice UUID, by `xargs mkdir -p`",
            f"≤ {GOAL:g}x",
        )
        self._build()
        env = self.bench.env()
        parent = self.bench.work / "system-index-fresh"
        parent.mkdir()
        try:
            index_runs, floor_runs, cpu, said = self._rounds(env, parent)
        finally:
            shutil.rmtree(parent, ignore_errors=True)
        ratios = [i / f for i, f in zip(index_runs, floor_runs, strict=True)]
        pair = Pair.of_rounds(index_runs, floor_runs, ratios)
        figure.notes.append(
            f"Floor: `xargs mkdir -p` of `systems/<HEX>`, one folder per slice UUID "
            f"({len(self.uuids)} for {self.count} dylibs, thin and universal clones of "
            f"{len(SOURCES)} dylibs built by clang and lld with {FUNCTIONS} functions a "
            "slice), in a folder never used before: the least any index of these images "
            "must do here, a name per slice. The index also walks the tree, reads each "
            "file's Mach-O header, writes the records (a dict per shard, 256 shard files "
            "under a lock) and its state. Every run of "
            "either, alternating (the floor first in every other round), goes into a folder "
            f"never used before. Per-round ratios {_spread(ratios)}; index "
            f"{_spread(index_runs, ' s')}, floor {_spread(floor_runs, ' s')}; CPU "
            f"(user+system) {_spread(cpu['index'], ' s')} against "
            f"{_spread(cpu['floor'], ' s')}."
        )
        figure.notes.append(f"`dsymfind index` says: {said}")
        self.bench.judge(figure, pair, GOAL)

    def _build(self) -> None:
        """The OS build's tree: the clones under Frameworks, in the way Xcode lays them out."""
        made = build_device_support(
            self.bench.work / "system-index-sources",
            libraries=SOURCES,
            functions=FUNCTIONS,
        )
        frameworks = self.root / made.build_dir.name / "Symbols" / "System" / "Library"
        for number in range(self.count):
            source = made.libraries[number % len(made.libraries)]
            name = f"System{number:04d}"
            target = frameworks / "Frameworks" / f"{name}.framework" / name
            self.uuids += clone_with_uuid(source.path, target, f"system-index-{number}").values()

    def _rounds(
        self, env: dict[str, str], parent: Path
    ) -> tuple[list[float], list[float], dict[str, list[float]], str]:
        """Wall seconds of each side's runs, their CPU seconds, and what the index said."""
        index_runs: list[float] = []
        floor_runs: list[float] = []
        cpu: dict[str, list[float]] = {"index": [], "floor": []}
        listing = self.bench.work / "system-index-floor.txt"
        said = ""
        for number in range(self.bench.scale.rounds):
            floor = parent / f"floor-{number}" / "systems"
            listing.write_text("".join(f"{floor / uuid_hex(u)}\n" for u in self.uuids))
            fresh_cache = {**env, paths.CACHE_DIR_ENV: str(parent / f"index-{number}")}
            jobs = [
                ("index", [CLI, "index", str(self.root)], fresh_cache, index_runs),
                ("floor", ["xargs", "-a", str(listing), "mkdir", "-p"], env, floor_runs),
            ]
            for side, argv, run_env, runs in jobs if number % 2 == 0 else reversed(jobs):
                before = _children_cpu()
                wall, out = self.bench.timed_run(argv, run_env)
                cpu[side].append(_children_cpu() - before)
                runs.append(wall)
                said = said or _report_line(out)
        return index_runs, floor_runs, cpu, said


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _report_line(out: bytes) -> str:
    lines = [line for line in out.decode().splitlines() if "system images" in line]
    return lines[0] if lines else ""


def _spread(values: list[float], unit: str = "x") -> str:
    ordered = sorted(values)
    median = statistics.median(ordered)
    return f"{median:.2f}{unit} (from {ordered[0]:.2f}{unit} to {ordered[-1]:.2f}{unit})"
