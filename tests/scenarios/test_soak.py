"""The soak (scripts/soak.py) at a small size: real helpers against a hostile loopback
server, helpers and downloaders SIGKILLed, gc, check --repair, index and fetch running
alongside, and no invariant broken. Bounded by count; the lateness margin is generous,
since the helpers' deadlines are their own and the machine may be loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKERS, LOOKUPS, KILLS = 3, 48, 4
# Seconds past the helper's deadline an answer may come on a loaded 2-core machine
# (start-up and exit, which the deadline does not count); only a hang exceeds it.
LATE_MARGIN = 20
RUN_LIMIT = 900


@pytest.mark.long
def test_a_small_soak_breaks_no_invariant(tmp_path: Path) -> None:
    figures_file = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "soak.py"),
            *("--workers", str(WORKERS), "--lookups", str(LOOKUPS), "--kills", str(KILLS)),
            *("--late-margin", str(LATE_MARGIN), "--json", str(figures_file)),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(figures_file.read_text())
    assert figures["violations"] == []
    assert sum(figures["answers"].values()) == LOOKUPS
    assert sum(figures["kills"].values()) == KILLS
    # The run did what it says: answers from the cache, a hostile server, maintenance.
    assert figures["answers"].get("dSYM", 0) + figures["answers"].get("dSYM and executable", 0) > 0
    assert all(figures["faults"].get(fault, 0) > 0 for fault in ("good", "5xx", "wrong bytes"))
    assert all(figures["maintenance"].get(name, 0) > 0 for name in ("gc", "check --repair"))
    assert figures["most_holders"] <= 1
    assert " 0 invalid" in figures["final_check"]
    assert "violations: 0" in done.stdout
