"""The README's first command runs its demo end to end, so it cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "scripts" / "demo.py"


def test_the_demo_fetches_verifies_and_answers_from_the_cache() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("DBGDSYMPath: ") >= 5  # local, fetched, cached, universal (2), ssqp
    assert "<dict/>  (not found)" in out
    assert "DBGError" not in out
    assert "0 invalid, 0 leftover" in out
