"""Only the batch figure of scripts/bench_miss.py: `dsymfind fetch` of 100 small dSYMs from
one loopback server beside `curl --parallel` of the same URLs, at the full scale's rounds
(or `--rounds`).

`--profile COMMAND...` instead runs COMMAND once, followed by the batch's argv (`dsymfind
fetch UUID...`), in the batch's environment, on a cold cache, against the same server: for
instance `--profile strace -c -f` or `--profile /usr/bin/time -v`. It says on stderr how
many of the UUIDs were found.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_fixtures as fixtures
import bench_miss
from bench_core import CLI, FULL, Bench
from support.symbol_server import SymbolServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=FULL.rounds)
    parser.add_argument("--profile", nargs=argparse.REMAINDER, help="a command to run it under")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dsymfind-bench-") as work:
        bench = Bench(Path(work), dataclasses.replace(FULL, rounds=args.rounds))
        figures = bench_miss.MissFigures(bench)
        figures.prepare_miss()
        with SymbolServer(figures.served) as server:
            if args.profile:
                return _profiled(figures, server, args.profile)
            figures.batch_figure(server)
    for figure in bench.figures:
        spread = "" if figure.spread is None else f" (rounds {figure.spread[0]:.2f}x to "
        spread += "" if figure.spread is None else f"{figure.spread[1]:.2f}x)"
        print(f"{figure.name}: {figure.measured} vs {figure.reference_measured}")
        print(f"  {figure.ratio:.2f}x{spread}, goal {figure.goal}; reference: {figure.reference}")
    return 0


def _profiled(figures: bench_miss.MissFigures, server: SymbolServer, command: list[str]) -> int:
    """One cold batch under `command`; its exit status."""
    bench = figures.bench
    figures.config(
        bench_miss.MISS_BATCH, f'[[servers]]\nurl = "{server.url}/"\nlayout = "native"\n'
    )
    uuids = [fixtures.bench_uuid(n) for n in range(bench_miss.BATCH_COUNT)]
    done = subprocess.run(
        [*command, CLI, "fetch", *uuids],
        env=bench.env(bench_miss.MISS_BATCH),
        stdout=subprocess.PIPE,
        check=False,
    )
    found = sum(b"  found  " in line for line in done.stdout.splitlines())
    print(f"{found} of {len(uuids)} found; exit status {done.returncode}", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
