"""The benchmark suite runs (`--quick`), so it cannot rot; its figures are not judged here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# One row per figure of BENCHMARKS.md, by the start of its name.
FIGURES = [
    "helper answer from the cache tree",
    "helper answer from the negative cache",
    "a cache hit through the registered launcher",
    "helper answer via search paths",
    "sequential helper lookups of cached UUIDs",
    "cold fetch of a",
    "peak RSS of that fetch",
    "helpers at once for one missing UUID",
    "`dsymfind index` over",
    "`dsymfind index` again over",
    "UUID read of a",
]
TOOLS = ["hyperfine", "curl", "strace", "clang-14", "ld64.lld-14", "/usr/lib/llvm-14/bin/dsymutil"]


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) or not os.access("/usr/bin/time", os.X_OK),
    reason="the benchmark's tools are not installed (scripts/bench installs them as root)",
)
def test_quick_bench_measures_every_figure(tmp_path: Path) -> None:
    report = tmp_path / "BENCHMARKS.md"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--output", str(report)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    text = report.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    for name in FIGURES:
        (row,) = [r for r in rows if name in r]
        assert "not measured" not in row, row
    assert "downloads per round: [1]" in text
    (uuid_read,) = [r for r in rows if r.startswith("| UUID read of a")]
    assert uuid_read.endswith("| met |"), uuid_read
    assert "PYTHONDONTWRITEBYTECODE is removed" in text
