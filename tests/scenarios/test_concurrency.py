"""Many helpers for many UUIDs at once, while gc keeps evicting everything it can.

Every answer must be a valid plist whose paths exist when the caller opens them (checked
right after each answer, as lldb would), or a DBGError; and the cache stays valid.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import FIXTURES, UUIDS, write_config
from support.processes import BIN

from dsymfind.cache import check, locks
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry

DRIVERS = 4
LOOKUPS_PER_DRIVER = 8
GC_RUNS = 4
GC_PAUSE = 0.5
# One driver: helpers as real processes, each answer's paths checked at once.
DRIVER = """
import json, os, plistlib, random, subprocess, sys
helper, uuids, count, seed = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
for _ in range(count):
    uuid = rng.choice(uuids)
    done = subprocess.run([helper, uuid], capture_output=True)
    result = {"uuid": uuid, "rc": done.returncode, "stderr": done.stderr.decode()}
    try:
        answer = plistlib.loads(done.stdout).get(uuid, {})
    except Exception as exc:
        result["invalid"] = repr(exc)
        answer = {}
    path = answer.get("DBGDSYMPath")
    result["path"] = path
    result["exists"] = path is not None and os.path.exists(path)
    result["error"] = answer.get("DBGError")
    print(json.dumps(result), flush=True)
"""


def all_fixture_dsyms() -> dict[str, Path]:
    found = {}
    for name, info in UUIDS.items():
        if info["filetype"] == "MH_DSYM":
            for item in info["uuids"]:
                found[item["uuid"]] = FIXTURES / name
    return found


def test_helpers_and_gc_at_once_never_answer_a_dangling_path(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    dsyms = all_fixture_dsyms()
    assert len(dsyms) >= 6
    for uuid, dwarf in dsyms.items():
        target = Path(tree_entry(str(tmp_path / "store"), uuid))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dwarf, target)
    with ss.SymbolServer(tmp_path / "store") as server:
        write_config(
            config_file,
            f"timeout = 2\nnegative_cache_ttl = 0\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
        )
        drivers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    DRIVER,
                    str(BIN / "dsymForUUID"),
                    ",".join(dsyms),
                    str(LOOKUPS_PER_DRIVER),
                    str(seed),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for seed in range(DRIVERS)
        ]
        gc_outputs: list[str] = []
        while any(d.poll() is None for d in drivers) and len(gc_outputs) < GC_RUNS:
            time.sleep(GC_PAUSE)
            gc = subprocess.run(
                [str(BIN / "dsymfind"), "gc", "--max-age", "0"],
                capture_output=True,
                text=True,
                check=False,
            )
            assert gc.returncode == 0, gc.stderr
            gc_outputs.append(gc.stdout)
        results = []
        for driver in drivers:
            out, _ = driver.communicate(timeout=120)
            results += [json.loads(line) for line in out.splitlines()]
        cache = CachePaths(str(cache_dir))
        deadline = time.monotonic() + 30
        while any(locks.is_held(cache, u) for u in dsyms) and time.monotonic() < deadline:
            time.sleep(0.1)

    assert len(results) > 8
    assert all(r["rc"] == 0 and r["stderr"] == "" and "invalid" not in r for r in results)
    dangling = [r for r in results if r["path"] is not None and not r["exists"]]
    assert dangling == []
    assert sum(r["exists"] for r in results) > 4  # answers were given, not only errors
    assert any("removed" in out for out in gc_outputs)  # and gc did evict meanwhile
    report = check.Checker(cache, stale_after=3600).run()
    assert [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID] == []
