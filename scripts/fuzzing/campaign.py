"""A bounded coverage-guided fuzz campaign over every reader: `scripts/fuzz [--seconds N |
--quick | --runs N]`.

Each target (fuzzing.run_target) runs in its own process under atheris (libFuzzer),
seeded from the real fixtures, for a fixed time or a fixed number of inputs (--runs: the
same work on any machine, however loaded, which is what the suite runs). The campaign fails (exit 1) when any
target finds an input that makes a foreign exception escape, or a call slow, huge or
wrong (fuzzing.targets); the input is saved under --crash-dir/<target>/ and named.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

SCRIPTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCRIPTS))

from fuzzing import targets  # noqa: E402 - after the path that makes it importable

DEFAULT_SECONDS = 60  # seven targets: a seven-minute campaign
QUICK_SECONDS = 10
DEFAULT_CRASH_DIR = targets.ROOT / "build" / "fuzz"
# libFuzzer's own guards, beyond targets' 100 ms and 4 MiB: a hang or a runaway process.
HANG_SECONDS = 10
RSS_LIMIT_MB = 2048
# Time to import and instrument dsymfind before the clock of -max_total_time starts.
STARTUP_SECONDS = 60
# With --runs nothing is timed: this only stops a wedged target. A few thousand inputs take
# seconds on an idle machine, so only a hang (each input is cut at HANG_SECONDS) comes near it.
RUNS_GUARD_SECONDS = 900

SEEDS: dict[str, Callable[[], list[bytes]]] = {
    "macho": lambda: [p.read_bytes() for p in targets.macho_seeds()],
    "archive": targets.archive_seeds,
    "plist": targets.plist_seeds,
    "plistread": targets.plist_reader_seeds,
    "pe": lambda: [p.read_bytes() for p in targets.pe_seeds()],
    "pdbfile": lambda: [p.read_bytes() for p in targets.pdb_seeds()],
    "reporttext": targets.report_seeds,
    "sample": lambda: targets.hang_seeds("sample"),
    "spindump": lambda: targets.hang_seeds("spindump"),
}
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__)
    parser.add_argument("targets", nargs="*", choices=[[], *SEEDS], default=[], metavar="TARGET",
                        help=f"targets to run (default: all of {', '.join(SEEDS)})")  # fmt: skip
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help=f"per target (default {DEFAULT_SECONDS})")
    budget.add_argument("--quick", action="store_true", help=f"{QUICK_SECONDS} s per target")
    budget.add_argument("--runs", type=int, help="inputs per target, however long they take")
    parser.add_argument("--crash-dir", type=Path, default=DEFAULT_CRASH_DIR,
                        help="where crashing inputs are saved, one folder per target")  # fmt: skip
    args = parser.parse_args(argv)
    budget = _budget(args.runs, args.seconds or (QUICK_SECONDS if args.quick else DEFAULT_SECONDS))
    if not _have_atheris():
        return 2
    failed = [name for name in args.targets or SEEDS if not _run(name, budget, args.crash_dir)]
    if failed:
        print(f"fuzz: FAILED: {', '.join(failed)}; inputs saved under {args.crash_dir}")
        return 1
    print("fuzz: no crash, no slow or huge call")
    return 0


def _have_atheris() -> bool:
    """atheris, installed on first use from a binary wheel (never compiled here)."""
    if importlib.util.find_spec("atheris") is not None:
        return True
    print("fuzz: installing atheris (binary wheel) into this environment")
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--only-binary=:all:", "atheris"]
    if subprocess.run(install, check=False).returncode != 0:
        print("fuzz: atheris has no wheel for this Python and platform; cannot fuzz")
        return False
    return True


class Budget(NamedTuple):
    """How a target is stopped (libFuzzer's flag) and when the campaign gives up on it."""

    flag: str
    wall_seconds: int


def _budget(runs: int | None, seconds: int) -> Budget:
    if runs is not None:
        return Budget(f"-runs={runs}", RUNS_GUARD_SECONDS)
    return Budget(f"-max_total_time={seconds}", seconds + STARTUP_SECONDS)


def _run(name: str, budget: Budget, crash_dir: Path) -> bool:
    """One target within `budget`; whether it found nothing."""
    artifacts = crash_dir / name
    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"dsymfind-fuzz-{name}-") as scratch:
        corpus, seeds = Path(scratch, "corpus"), Path(scratch, "seeds")
        corpus.mkdir()
        seeds.mkdir()
        for index, seed in enumerate(SEEDS[name]()):
            (seeds / f"seed-{index}").write_bytes(seed)
        command = [
            sys.executable,
            str(SCRIPTS / "fuzzing" / "run_target.py"),
            name,
            budget.flag,
            f"-timeout={HANG_SECONDS}",
            f"-rss_limit_mb={RSS_LIMIT_MB}",
            f"-max_len={targets.MAX_INPUT_BYTES - 1}",
            f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1",
            str(corpus),
            str(seeds),
        ]
        env = {**os.environ, "PYTHONPATH": str(SCRIPTS)}
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, errors="replace",
                timeout=budget.wall_seconds, env=env, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            print(f"{name}: did not stop within {budget.wall_seconds} s")
            return False
    return _report(name, done, artifacts)


def _report(name: str, done: subprocess.CompletedProcess[str], artifacts: Path) -> bool:
    stats = {key: int(value) for key, value in _STAT.findall(done.stderr)}
    runs, rate = stats.get("number_of_executed_units", 0), stats.get("average_exec_per_sec", 0)
    new = stats.get("new_units_added", 0)
    if done.returncode == 0:
        print(f"{name}: ok, {runs} inputs ({rate}/s), {new} new coverage units")
        return True
    print(f"{name}: FAILED ({_exit_status(done.returncode)}) after {runs} inputs; libFuzzer said:")
    print("\n".join(done.stderr.splitlines()[-40:]))
    saved = sorted(artifacts.iterdir(), key=lambda p: p.stat().st_mtime)[-3:]
    print(f"{name}: crashing inputs in {artifacts}: {', '.join(p.name for p in saved)}")
    return False


def _exit_status(returncode: int) -> str:
    """libFuzzer's own failures are exit codes; a signal came from outside it (a SIGKILL from
    the kernel's OOM killer or a supervisor), which the input need not have caused."""
    if returncode >= 0:
        return f"exit {returncode}"
    name = signal.strsignal(-returncode) or f"signal {-returncode}"
    return f"killed ({name}), from outside the fuzzer"


if __name__ == "__main__":
    raise SystemExit(main())
