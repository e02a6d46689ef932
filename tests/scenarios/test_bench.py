"""The benchmark suite runs (`--quick`), so it cannot rot; its figures are not judged here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# One row per figure of BENCHMARKS.md, by the start of its name.
FIGURES = [
    "helper answer from the cache tree",
    "helper answer from the negative cache",
    "a cache hit through the registered launcher",
    "cache-tree answer with an s3:// server configured",
    "negative-cache answer with an s3:// server configured",
    "helper answer via search paths",
    "sequential helper lookups of cached UUIDs",
    "cold fetch of a",
    "peak RSS of that fetch",
    "peak RSS of the downloader fetching a",
    "download killed at",
    "over HTTPS from a loopback server",
    "helpers at once for one missing UUID",
    "`dsymfind index` over",
    "`dsymfind index` again over",
    "dSYM bundles against its mkdir floor",
    "UUID read of a",
    "images, dSYMs cached, warm",
    "images, dSYMs cached, cold",
    "lookup rate of a",
    "peak RSS of `dsymfind symbolicate`",
    "`dsymfind symbolicate` of the",
    "`dsymfind symbolicate --group",
    "`dsymfind symbolicate` of a folder of",
    "soak: ",
]
# Measured against a SeaweedFS engine, which needs `weed` (the test extra installs it).
S3_FIGURES = [
    "`dsymfind publish` of a",
    "`dsymfind publish` again of",
    "helper fetch of a",
    "`dsymfind retire` of",
]
WEED = (Path(sysconfig.get_path("scripts")) / "weed").is_file() or shutil.which("weed") is not None
TOOLS = ["hyperfine", "curl", "strace", "openssl", "clang-14", "ld64.lld-14"]
TOOLS += ["/usr/lib/llvm-14/bin/dsymutil"]


@pytest.mark.long
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
        timeout=900,  # the quick bench, its soak included, on a loaded machine
        check=False,
    )

    assert done.returncode == 0, done.stderr
    text = report.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    for name in FIGURES:
        (row,) = [r for r in rows if name in r]
        assert "not measured" not in row, row
    for name in S3_FIGURES:
        (row,) = [r for r in rows if name in r]
        assert ("not measured" not in row) is WEED, row
    assert "downloads per round: [1]" in text
    # Shaping a link needs root and a network namespace; without them the note says why.
    (link,) = [r for r in rows if "over a link shaped to" in r]
    assert "not measured" not in link or "skipped: " in text, link
    # A machine without a tmpfs at /dev/shm skips that floor figure with a note.
    (tmpfs,) = [r for r in rows if "bundles on tmpfs against its mkdir floor" in r]
    assert "not measured" not in tmpfs or "no tmpfs at /dev/shm" in text, tmpfs
    for row in rows:
        if "with an s3:// server configured" in row:
            assert "botocore not imported" in row, row
    if WEED:
        (republish,) = [r for r in rows if r.startswith("| `dsymfind publish` again of")]
        assert republish.endswith("| met |"), republish
    (uuid_read,) = [r for r in rows if r.startswith("| UUID read of a")]
    assert uuid_read.endswith("| met |"), uuid_read
    assert "PYTHONDONTWRITEBYTECODE is removed" in text
