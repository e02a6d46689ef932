"""The atos figure: `dsymfind atos` of one address beside llvm-symbolizer of the same one.

The image is the crashy fixture's dSYM (tests/fixtures/macho, real DWARF from clang and
dsymutil), copied into the run's folder; the address is one where a function was inlined,
so both print two frames. dsymfind's SymCache is built by hyperfine's warm-up runs and
kept in the run's cache, as a second lookup of the same image finds it. bench.py runs this
after its own figures, or alone with `--only atos`.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from bench_core import CLI, RUN_TIMEOUT, Bench, BenchError, Figure, ms
from support.fixtures import FIXTURES, dwarf_of
from support.symbolication import SYMBOLIZER, TEXT_VMADDR

if TYPE_CHECKING:
    from collections.abc import Callable

GOAL = 1.5
CONFIG = "atos"
# twice() inlined into leaf() in crashy's arm64 slice (tests/commands/test_atos.py).
ADDRESS = TEXT_VMADDR + 0x338
EXPECTED = b"twice (in crashy) (crashy.c:10)\nleaf (in crashy) (crashy.c:14)\n"


class AtosFigure:
    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    def steps(self) -> list[Callable[[], None]]:
        return [self.atos_figure]

    def atos_figure(self) -> None:
        bench = self.bench
        figure = Figure(
            "`dsymfind atos -i` of one address (a dSYM on disk, its SymCache kept)",
            "`llvm-symbolizer-14 --inlines` of the same address in the same DWARF file",
            f"≤ {GOAL}x",
        )
        if SYMBOLIZER is None:
            figure.notes.append("not measured: no llvm-symbolizer installed")
            bench.figures.append(figure)
            return
        bundle = bench.work / "atos" / "crashy.dSYM"
        shutil.copytree(FIXTURES / "crashy.dSYM", bundle)
        dwarf = str(dwarf_of(bundle))
        cache = bench.cache(CONFIG)
        bench.write_config(CONFIG, f"cache_dir = '{cache}'\n")
        env = bench.env(CONFIG)
        address = hex(ADDRESS)
        subject = [CLI, "atos", "-o", dwarf, "-arch", "arm64", "-i", address]
        reference = [SYMBOLIZER, f"--obj={dwarf}", "--default-arch=arm64", "--inlines", address]
        done = subprocess.run(subject, env=env, capture_output=True, timeout=RUN_TIMEOUT)
        if done.returncode != 0 or done.stdout != EXPECTED:
            raise BenchError(f"dsymfind atos answered {done.stdout!r}: {done.stderr[-300:]!r}")
        pair = bench.compare(subject, reference, env)
        floor = bench.compare([CLI, "--version"], reference, env)
        figure.notes.append(
            "Both start a process and print two frames. dsymfind starts Python, reads the "
            "dSYM's Mach-O header for the slice's UUID and __TEXT address and opens its kept "
            "SymCache; llvm-symbolizer reads the DWARF itself. The start-up floor, "
            f"`dsymfind --version` (Python, main.py and argparse), was {ms(floor.subject)} "
            f"({floor.ratio:.2f}x) in rounds of its own."
        )
        bench.judge(figure, pair, GOAL)
