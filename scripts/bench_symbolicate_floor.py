"""The floors under the two symbolicate figures that llvm-symbolizer sets the goal of: what no
Python tool on symbolic's C library can go below on this machine, measured beside the
figure's two sides so that a figure which cannot be met is seen to be so.

- system-symbols (scripts/bench_system_symbols.py): `python -c pass`; python loading
  symbolic's C library as dsymfind/symbolicate/bindings.py loads it, and nothing else;
  (not a floor) the modules `dsymfind symbolicate` imports, with the library, and no work;
  llvm-symbolizer's whole run on the payload's addresses; `dsymfind symbolicate` of the
  payload.
- batches (scripts/bench_batches.py): the bare C lookups (symbolic_symcache_lookup and
  symbolic_lookup_result_free through cffi, as engine.py calls them) of every frame of the
  1,000 reports, the SymCaches opened as bindings.py opens them; reading the 1,000 report
  files and writing 1,000 files of the sizes `dsymfind symbolicate -o` writes; both
  together; each in one process and in two (forked after the library is loaded, each
  taking half the reports, as symbolicate/workers.py shares them); beside llvm-symbolizer
  given every address in one process and `dsymfind symbolicate -o` of the folder.

Every command runs in alternating rounds (each one's runs interleaved with the others'),
wall and CPU (user+system) time measured per run; medians are printed with the load
average. Every `-o` run and every written floor run writes into a folder of its own,
removed only after the last round: see bench_batches.py for why no run follows the removal
of another's outputs. Run alone:

    .venv/bin/python scripts/bench_symbolicate_floor.py [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import array
import itertools
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import bench_batches
import bench_system_symbols
from bench_core import CLI, FULL, PYTHON, QUICK, Bench, Figure, ms
from bench_system_symbols import Side, load_average
from support.symbolication import SYMBOLIZER

from dsymfind.cache.symcache_files import HEADER_BYTES
from dsymfind.paths import CachePaths
from dsymfind.symbolicate import bindings
from dsymfind.uuids import uuid_hex

SYMBOLIZER_SIDE = "llvm-symbolizer, the whole run"
SUBJECT_SIDE = "dsymfind symbolicate, the whole run"
# symbolic's C library loaded as bindings.py loads it (its bare package), nothing else.
LOAD_LIBRARY = "from dsymfind.symbolicate import bindings; bindings.lowlevel()"
# What `dsymfind symbolicate` of a MetricKit payload imports before any work, and the library:
# not a floor (its modules could be fewer), the share of the start-up the imports are.
IMPORTS_ONLY = (
    "import dsymfind.main, dsymfind.commands.symbolicate, dsymfind.symbolicate.metrickit, "
    f"dsymfind.symbolicate.output; {LOAD_LIBRARY}"
)

# The batch floor's process: argv is its plan folder, what it does (lookups, io or both),
# how many processes and the folder it writes into. The plan: `tables` (one SymCache file a
# line), `reports` (input, output under the folder, output size, first and end lookup),
# `lookups` (an array of int64: table index and image offset, in turn).
FLOOR_PROCESS = """
import array, os, sys
from dsymfind.symbolicate import bindings

plan, what, processes, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
header = int(sys.argv[5])
low = bindings.lowlevel()
lib, ffi = low.lib, low.ffi
tables = []
with open(os.path.join(plan, "tables")) as listing:
    for path in listing.read().split():
        with open(path, "rb") as kept:
            data = bytearray(kept.read())
        tables.append(bindings.SymCache.from_bytes(memoryview(data)[header:]))
pointers = [table.pointer for table in tables]
reports = []
with open(os.path.join(plan, "reports")) as listing:
    for line in listing.read().splitlines():
        source, target, size, first, end = line.split("\\t")
        reports.append((source, os.path.join(out, target), int(size), int(first), int(end)))
lookups = array.array("q")
with open(os.path.join(plan, "lookups"), "rb") as stored:
    lookups.frombytes(stored.read())

def run(share):
    lookup, free, address_of = lib.symbolic_symcache_lookup, lib.symbolic_lookup_result_free, ffi.addressof
    made = set()
    for source, target, size, first, end in share:
        if what != "io":
            for at in range(2 * first, 2 * end, 2):
                free(address_of(lookup(pointers[lookups[at]], lookups[at + 1])))
        if what != "lookups":
            with open(source, "rb") as report:
                text = report.read()
            folder = os.path.dirname(target)
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            with open(target, "wb") as written:
                written.write(text.ljust(size, b" ")[:size])

if processes == 1:
    run(reports)
else:
    half = (len(reports) + 1) // 2
    children = []
    for share in (reports[:half], reports[half:]):
        pid = os.fork()
        if pid == 0:
            run(share)
            os._exit(0)
        children.append(pid)
    for pid in children:
        if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
            sys.exit(1)
"""


class Floors:
    def __init__(
        self,
        bench: Bench,
        rounds: int,
        systems: bench_system_symbols.SystemSymbolsFigure | None = None,
    ) -> None:
        """`systems`: the system-symbols figure whose fixtures the floors reuse, once built."""
        self.bench, self.rounds = bench, rounds
        self.systems = systems
        self.frames_count = 0  # the system-symbols payload's, once measured
        self.outs = bench.work / "outs"
        self.runs = itertools.count()

    def fresh_out(self) -> Path:
        """A folder no run has written into: outputs are removed after the last round."""
        return self.outs / f"run{next(self.runs):04d}"

    # -- figure 2 -------------------------------------------------------------------

    def system_symbols_figures(self) -> None:
        """The system-symbols floors as rows of BENCHMARKS.md, each beside llvm-symbolizer's
        whole run; not judged themselves, they say whether that figure can be met."""
        if SYMBOLIZER is None:
            return  # the figure above says "not measured"
        sides = self.system_symbols()
        reference = sides.pop(SYMBOLIZER_SIDE)[0]
        del sides[SUBJECT_SIDE]  # the figure above
        reference_wall = statistics.median(reference.wall)
        reference_cpu = statistics.median(reference.cpu)
        for name, (side, _) in sides.items():
            wall, cpu = statistics.median(side.wall), statistics.median(side.cpu)
            figure = Figure(
                f"under the {self.frames_count}-frame MetricKit figure: {name}",
                "llvm-symbolizer-14, the whole run on the same addresses",
                "none: a floor (where a floor alone is near 1.0x, the figure above cannot be met)",
                measured=f"{ms(wall)} wall, {ms(cpu)} CPU",
                reference_measured=f"{ms(reference_wall)} wall, {ms(reference_cpu)} CPU",
                ratio=wall / reference_wall,
            )
            figure.notes.append(
                f"{self.rounds} rounds, each command's runs interleaved with the others' in a "
                f"rotating order (scripts/bench_symbolicate_floor.py); CPU is user+system: "
                f"{cpu / reference_cpu:.2f}x llvm-symbolizer's; load average at the end "
                f"{load_average()}."
            )
            self.bench.figures.append(figure)

    def system_symbols(self) -> dict[str, tuple[Side, Path | None]]:
        figure = self.systems or bench_system_symbols.SystemSymbolsFigure(self.bench)
        if figure.prepared is None:
            figure._build()
            env = figure._indexed_env()
            payload, listing = figure._report(figure.frames_count, "payload")
            figure._check_names(env, payload, listing)  # also builds the SymCaches (warm)
            figure.prepared = (env, payload, listing)
        env, payload, listing = figure.prepared
        self.frames_count = figure.frames_count
        assert SYMBOLIZER is not None
        sides = {
            "python -c pass": (Side([PYTHON, "-c", "pass"]), None),
            "python + symbolic's C library (bindings.py's load)": (
                Side([PYTHON, "-c", LOAD_LIBRARY]),
                None,
            ),
            "python + symbolicate's imports and the library, no work": (
                Side([PYTHON, "-c", IMPORTS_ONLY]),
                None,
            ),
            SYMBOLIZER_SIDE: (
                Side([SYMBOLIZER, "--default-arch=arm64", "--functions=linkage"]),
                listing,
            ),
            SUBJECT_SIDE: (Side(figure._symbolicate(payload)), None),
        }
        self._rounds(env, sides)
        self._print(
            f"system-symbols: {figure.frames_count} frames over {figure.images_count} images",
            sides,
        )
        return sides

    # -- figure 1 -------------------------------------------------------------------

    def batches(self) -> None:
        figure = bench_batches.BatchFigures(self.bench)
        figure.prepare_batches()
        env = self.bench.env(bench_batches.BATCHES)
        warm = self.fresh_out()
        first = Side([CLI, "symbolicate", "-o", str(warm), str(figure.folder)])
        first.run(env, None)  # builds the SymCaches: the warm state
        plan = self.bench.work / "floor-plan"
        self._plan(figure, warm, plan)
        listing = self.bench.work / "addresses"
        listing.write_text(figure._symbolizer_input())
        assert SYMBOLIZER is not None
        symbolizer = [SYMBOLIZER, "--inlines", "--output-style=JSON", "--default-arch=arm64"]
        sides: dict[str, tuple[Side, Path | None]] = {}
        for what, processes in itertools.product(("lookups", "io", "both"), (1, 2)):
            name = f"floor: {what}, {processes} process{'es' if processes > 1 else ''}"
            argv = [PYTHON, "-c", FLOOR_PROCESS, str(plan), what, str(processes)]
            sides[name] = (_WithOut(argv, self, [str(HEADER_BYTES)]), None)
        sides["llvm-symbolizer, the whole run"] = (Side(symbolizer), listing)
        subject = [CLI, "symbolicate", "-o"]
        sides["dsymfind symbolicate -o, the whole run"] = (
            _WithOut(subject, self, [str(figure.folder)]),
            None,
        )
        self._rounds(env, sides)
        sizes = figure.sizes
        self._print(
            f"batches: {sizes.reports} reports of {sizes.frames} frames over {sizes.images} images",
            sides,
        )

    def _plan(self, figure: bench_batches.BatchFigures, written: Path, plan: Path) -> None:
        """The floor process's plan: the SymCache files, each report's lookups (the
        addresses llvm-symbolizer is given) and its output's size."""
        plan.mkdir()
        cache = CachePaths(str(self.bench.cache(bench_batches.BATCHES)))
        version = bindings.latest_version()
        images = figure.images
        tables = [cache.symcache_file(uuid_hex(image.uuid), version) for image in images]
        (plan / "tables").write_text("\n".join(tables) + "\n")
        lookups = array.array("q")
        lines = []
        for path in sorted(figure.folder.rglob("*.ips")):
            first = len(lookups) // 2
            for pair in bench_batches.lookups(path):
                lookups.extend(pair)
            relative = path.relative_to(figure.folder)
            size = (written / relative).stat().st_size
            lines.append(f"{path}\t{relative}\t{size}\t{first}\t{len(lookups) // 2}\n")
        (plan / "lookups").write_bytes(lookups.tobytes())
        (plan / "reports").write_text("".join(lines))

    def _rounds(self, env: dict[str, str], sides: dict[str, tuple[Side, Path | None]]) -> None:
        order = list(sides.values())
        for number in range(self.rounds):
            # Each round in another order: no side always follows the same one.
            turn = order[number % len(order) :] + order[: number % len(order)]
            for side, stdin in turn:
                side.run(env, stdin)

    def _print(self, title: str, sides: dict[str, tuple[Side, Path | None]]) -> None:
        print(f"\n{title} ({self.rounds} rounds; load average {load_average()})")
        for name, (side, _) in sides.items():
            wall, cpu = statistics.median(side.wall), statistics.median(side.cpu)
            print(f"  {name:<52} wall {ms(wall):>10}   CPU (user+sys) {ms(cpu):>10}")
        sys.stdout.flush()


class _WithOut(Side):
    """A command given a folder no run has written into: `head`, the folder, `tail`."""

    def __init__(self, head: list[str], floors: Floors, tail: list[str]) -> None:
        super().__init__(head)
        self.head, self.floors, self.tail = head, floors, tail

    def run(self, env: dict[str, str], stdin: Path | None) -> None:
        self.argv = [*self.head, str(self.floors.fresh_out()), *self.tail]
        super().run(env, stdin)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small fixtures, few rounds")
    parser.add_argument("--rounds", type=int, help="rounds of every command (default 10; 2)")
    parser.add_argument(
        "--only", choices=("batches", "system-symbols"), help="only this figure's floors"
    )
    args = parser.parse_args()
    if SYMBOLIZER is None:
        print("floor: no llvm-symbolizer installed", file=sys.stderr)
        return 1
    scale = QUICK if args.quick else FULL
    rounds = args.rounds or (2 if args.quick else 10)
    with tempfile.TemporaryDirectory(prefix="dsymfind-floor-") as work:
        floors = Floors(Bench(Path(work), scale), rounds)
        if args.only != "batches":
            floors.system_symbols()
        if args.only != "system-symbols":
            floors.batches()
        shutil.rmtree(floors.outs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
