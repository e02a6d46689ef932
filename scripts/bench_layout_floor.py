"""The floor under the batch figure (scripts/bench_miss_batch.py): what making the cache's
layout for 100 small dSYMs costs by itself, beside `curl --parallel` of the same URLs.

In alternating hyperfine rounds, each run into a folder never used before:
- `layout`: one Python process (scripts/layout_floor_make.py) makes exactly what the
  cache's layout needs for the 100 dSYMs, as the admission makes it (the same folders,
  files with the same bytes, the same fsyncs and renames, the UUID tree's folders and
  link, the answer and the status records), four dSYMs at once, with no network;
- `layout, no fsync`: the same without the fsyncs, to show their share;
- `plain files`: the same process writing the 100 DWARF files alone into one folder;
- `python -c pass`: the interpreter's start, which every Python side pays;
- `dsymfind fetch`: the batch figure's subject, from the same loopback server;
- `curl --parallel`: the batch figure's reference.

If `layout` alone is above the batch figure's goal times curl, the goal cannot be met by
any code that keeps this layout and its fsyncs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import marshal
import plistlib
import shlex
import statistics
import tempfile
from pathlib import Path

import bench_fixtures as fixtures
import bench_miss
from bench_core import CLI, FULL, PYTHON, Bench, Figure
from support.symbol_server import SymbolServer

from dsymfind import debugsymbols, paths
from dsymfind.apple import macho
from dsymfind.cache import place
from dsymfind.fetch import batch
from dsymfind.uuids import uuid_hex

MAKE = str(Path(__file__).resolve().parent / "layout_floor_make.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=FULL.rounds)
    parser.add_argument("--runs", type=int, default=3, help="hyperfine runs per side and round")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dsymfind-bench-") as work:
        bench = Bench(Path(work), dataclasses.replace(FULL, rounds=args.rounds))
        figures = bench_miss.MissFigures(bench)
        figures.prepare_miss()
        plan = bench.work / "layout-plan"
        plan.write_bytes(marshal.dumps(_plan(figures)))
        with SymbolServer(figures.served) as server:
            sides = _sides(figures, server, plan)
            figures.config(
                bench_miss.MISS_BATCH, f'[[servers]]\nurl = "{server.url}/"\nlayout = "native"\n'
            )
            env = bench.env(bench_miss.MISS_BATCH)
            medians: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.rounds):
                found = bench.hyperfine(list(sides.values()), env, runs=args.runs, warmup=1)
                for name, seconds in zip(sides, found, strict=True):
                    medians[name].append(seconds)
    _report(medians, args)
    return 0


def floor_figure(
    figures: bench_miss.MissFigures, server: SymbolServer, env: dict[str, str]
) -> None:
    """The layout's floor as a row of BENCHMARKS.md, beside the batch figure's reference:
    not judged itself, it says whether the batch figure's goal can be met."""
    bench = figures.bench
    plan = bench.work / "layout-plan"
    plan.write_bytes(marshal.dumps(_plan(figures)))
    sides = _sides(figures, server, plan)
    pair = bench.compare(sides["layout"], sides["curl --parallel"], env, runs=3, warmup=1)
    figure = Figure(
        f"the cache's layout alone for the same {bench_miss.BATCH_COUNT} dSYMs: its folders, "
        "files, fsyncs, renames, UUID tree, answers and records, in one Python process, no "
        "network (scripts/layout_floor_make.py)",
        f"`curl --parallel --parallel-max {batch.MAX_PARALLEL}` of the same URLs",
        f"none: the floor under the row above (above {bench_miss.BATCH_GOAL:g}x, no code that "
        "keeps this layout and its fsyncs meets that row's goal)",
    )
    figure.notes.append(
        "What the admission writes for each dSYM, with the same bytes, four dSYMs at once as "
        "the batch; every run into a folder never used before, as the batch figure's; "
        f"{bench.scale.rounds} alternating hyperfine rounds of 3 runs "
        "(scripts/bench_layout_floor.py also times it without fsyncs and beside plain files)."
    )
    bench.judge(figure, pair, bench_miss.BATCH_GOAL)
    figure.met = None


def _sides(
    figures: bench_miss.MissFigures, server: SymbolServer, plan: Path
) -> dict[str, list[str]]:
    """The commands timed, each through `sh -c` and `mktemp -d` as the batch figure's."""
    work = figures.bench.work
    fresh = {}
    for name in ("layout", "bare", "plain", "caches", "curl"):
        fresh[name] = work / f"floor-{name}"
        fresh[name].mkdir(exist_ok=True)

    def in_new(folder: Path, command: str) -> list[str]:
        return ["sh", "-c", f"d=$(mktemp -d -p {shlex.quote(str(folder))}) && exec {command}"]

    make = f'{shlex.quote(PYTHON)} {shlex.quote(MAKE)} {shlex.quote(str(plan))} "$d"'
    uuids = [fixtures.bench_uuid(n) for n in range(bench_miss.BATCH_COUNT)]
    curl = ["curl", "-sSf", "--parallel", "--parallel-max", str(batch.MAX_PARALLEL)]
    curl += ["-H", "Connection: close"]
    outputs = " ".join(
        f'-o "$d/{n}" {shlex.quote(server.url + path)}' for n, path in enumerate(figures.paths)
    )
    fetch = f'env {paths.CACHE_DIR_ENV}="$d" {shlex.join([CLI, "fetch", *uuids])}'
    return {
        "layout": in_new(fresh["layout"], make),
        "layout, no fsync": in_new(fresh["bare"], make + " --no-fsync"),
        "plain files": in_new(fresh["plain"], make + " --plain"),
        "python -c pass": [PYTHON, "-c", "pass"],
        "dsymfind fetch": in_new(fresh["caches"], fetch),
        "curl --parallel": in_new(fresh["curl"], f"{shlex.join(curl)} {outputs}"),
    }


def _plan(figures: bench_miss.MissFigures) -> list[dict[str, object]]:
    """Per dSYM what the admission writes, with the bytes the cache would hold."""
    plan: list[dict[str, object]] = []
    for n in range(bench_miss.BATCH_COUNT):
        uuid = fixtures.bench_uuid(n)
        hex_name = uuid_hex(uuid)
        dwarf = figures.tree.dwarf(n).read_bytes()
        (piece,) = macho.read_slices_from_bytes(dwarf)
        # A native server's bare DWARF file: wrapped as <UUID>.dSYM/.../DWARF/<UUID>.
        bundle = uuid + place.DSYM_EXTENSION
        dwarf_path = f"/cache/dsyms/{hex_name}/{bundle}/Contents/Resources/DWARF/{uuid}"
        uuid_plist = {
            debugsymbols.ARCHITECTURE: piece.arch,
            debugsymbols.DSYM_PATH: dwarf_path,
            debugsymbols.VERSION: "3",
            debugsymbols.DOWNLOADED_FROM: "http://127.0.0.1:8000/",
        }
        record = {"uuid": uuid, "pid": 1, "state": "running", "started": 0.0, "updated": 0.0}
        record |= {"message": "", "transfers": {"http://127.0.0.1:8000/": [len(dwarf), None]}}
        done = record | {"state": "done", "message": "from http://127.0.0.1:8000/"}
        plan.append(
            {
                "hex": hex_name,
                "uuid": uuid,
                "bundle": bundle,
                "dwarf_name": uuid,
                "dwarf": dwarf,
                "info_plist": place._info_plist(uuid),
                "uuid_plist": plistlib.dumps(uuid_plist, fmt=plistlib.FMT_XML),
                "answer": marshal.dumps((1, uuid_plist, [(dwarf_path, 0, 0, 0)])),
                "running": json.dumps(record).encode(),
                "done": json.dumps(done | {"finished": 0.0}).encode(),
            }
        )
    return plan


def _report(medians: dict[str, list[float]], args: argparse.Namespace) -> None:
    curl = medians["curl --parallel"]
    goal = bench_miss.BATCH_GOAL
    print(
        f"{args.rounds} alternating hyperfine rounds of {args.runs} runs (median of each side, "
        "then the median of the per-round ratios to curl):"
    )
    for name, seconds in medians.items():
        ratios = [s / c for s, c in zip(seconds, curl, strict=True)]
        print(
            f"  {name:18} {statistics.median(seconds) * 1000:8.1f} ms  "
            f"{statistics.median(ratios):5.2f}x curl (rounds {min(ratios):.2f}x to {max(ratios):.2f}x)"
        )
    floor = statistics.median(s / c for s, c in zip(medians["layout"], curl, strict=True))
    verdict = "above" if floor > goal else "within"
    print(
        f"the layout's floor is {floor:.2f}x curl: {verdict} the batch figure's goal of {goal:g}x"
    )


if __name__ == "__main__":
    raise SystemExit(main())
