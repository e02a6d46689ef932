"""The README's first command runs its demo end to end, so it cannot rot; and so does
`scripts/demo --team`, the team of docs/publishing.md on a real S3 engine."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fixtures import HELLO_UUID, UUIDS

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.py"


@pytest.fixture(scope="module")
def demo() -> str:
    """What `scripts/demo` printed: run once for the tests that read it (half a minute)."""
    done = subprocess.run(
        [sys.executable, str(DEMO)], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_fetches_verifies_and_answers_from_the_cache(demo: str) -> None:
    out = demo
    assert out.count("DBGDSYMPath: ") >= 5  # local, fetched, cached, universal (2), ssqp
    assert "<dict/>  (not found)" in out
    assert "DBGError" not in out
    assert "0 invalid, 0 leftover" in out
    # The bundled crash report, its app's dSYM fetched: the crashed thread named, with the
    # inlined callee before its caller, lines as llvm-symbolizer gives them (tests/symbolicate).
    assert "exit 0)" in out
    assert "0   crashy       twice + 16 (crashy.c:10) [inlined]\n" in out
    assert "1   crashy       leaf + 16 (crashy.c:14)\n" in out
    assert "2   crashy       trigger + 24 (crashy.c:27)\n" in out
    assert "3   dyld         start + 2840\n" in out


def test_the_demo_lists_the_build_checks_one_and_groups_reports(demo: str) -> None:
    out = demo
    assert re.search(r"^  1\.0 \(1\)  hello  .+  3 images", out, re.M), out
    assert "libvendor.dylib" in out and "missing  vendor binary shipped without a dSYM" in out
    assert "INCOMPLETE: 3 images: 2 in the inputs, 0 in the store, 0 stubs, 1 missing" in out
    assert re.search(r"^  1  3 +EXC_BAD_ACCESS \(SIGSEGV\)  twice > leaf > trigger", out, re.M)
    assert "4 reports in 2 groups" in out


def test_the_demo_serves_its_store_as_publish_writes_one_names_and_all(demo: str) -> None:
    """A newcomer first sees what lldb will show: each fetched dSYM under its own bundle and
    file names (published with them), never under its UUID; and on Linux, lldb itself
    loading one by its DWARF file, as docs/helper-contract.md says."""
    out = demo
    assert f"  hello.dSYM {HELLO_UUID} arm64: published\n" in out  # CI's step, shown
    answered = re.findall(r"^    DBGDSYMPath: (.+)$", out, re.M)
    assert answered and not [p for p in answered if re.search(UUID_NAMED, p)], answered
    fetched = [p for p in answered if "/cache/dsyms/" in p]
    for name in ("hello", "universal", "libgreet.dylib"):
        assert any(p.endswith(f"/{name}.dSYM/Contents/Resources/DWARF/{name}") for p in fetched)
    assert re.search(r"found .+/crashy\.dSYM/Contents/Resources/DWARF/crashy$", out, re.M)
    documented = (DEMO.parent.parent / "docs" / "helper-contract.md").read_text()
    assert "(lldb) target symbols add /path/to/cache/dsyms/<HEX>/" in documented
    if LLDB is not None:
        assert "(lldb) target symbols add " in out
        assert "Summary: hello`main at hello.c:13" in out, out


# A bundle or DWARF file named by a UUID, as a download without its metadata is.
UUID_NAMED = r"/[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(\.dSYM)?(/|$)"
LLDB = shutil.which("lldb-14") or shutil.which("lldb")


def test_the_team_demo_publishes_to_s3_and_fetches_with_read_only_keys() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO), "--team"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    started = re.search(
        r"^SeaweedFS S3 on (http://127\.0\.0\.1:(\d+)) \(pid (\d+)\), work folder (\S+);$",
        out,
        re.M,
    )
    assert started, out
    port, pid, work = int(started[2]), int(started[3]), started[4]

    # CI's keys published every UUID of the bundled dSYMs; the reader's were refused first.
    published = sorted(
        {u["uuid"] for name, v in UUIDS.items() if ".dSYM/" in name for u in v["uuids"]}
    )
    for uuid_text in published:
        assert re.search(rf"^  \S+\.dSYM {uuid_text} \w+: published$", out, re.M), uuid_text
        # The re-run: create-only.
        assert re.search(rf"^  \S+\.dSYM {uuid_text} \w+: exists$", out, re.M), uuid_text
    assert "dsymfind: error: s3://symbols/demo/" in out and "may not write" in out

    # The developer's helper answered DBGDSYMPath for each, fetched into its own cache.
    answered = dict(re.findall(r"^  ([0-9A-F-]{36})\n    DBGDSYMPath: (.+)$", out, re.M))
    assert sorted(answered) == published
    cache = f"{work}/developer/cache/dsyms/"
    assert all(path.startswith(cache) for path in answered.values()), answered
    # The wrong secret was an error naming the server, once, and not remembered as absent.
    (error,) = re.findall(r"DBGError: (.+)", out)
    assert f"team: s3://symbols/demo/{unified(published[0])}: access denied" in error
    assert out.count("<dict/>  (not found)") == 2  # the unpublished UUID: a 404, not a 403
    # One entry and one link per UUID the developer fetched.
    entries = len(published)
    assert f"{entries} entries, {entries} links checked; 0 invalid, 0 leftover" in out
    assert f"SeaweedFS stopped (pid {pid})" in out

    # Nothing is left running: not weed, nor a downloader, nor anything else the demo started.
    assert not Path(work).exists()
    deadline = time.monotonic() + 10
    while (left := processes_naming(work)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], left
    assert not Path(f"/proc/{pid}").exists() or work.encode() not in cmdline(pid)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def unified(uuid_text: str) -> str:
    hex_digits = uuid_text.replace("-", "").lower()
    return f"{hex_digits[:2]}/{hex_digits[2:]}/debuginfo"


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def processes_naming(folder: str) -> list[tuple[int, str]]:
    """This user's processes whose command line or environment names `folder`: weed's
    -dir and the helper's downloaders' DSYMFIND_CONFIG both lie in the demo's folder."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            words = Path(f"/proc/{entry}/cmdline").read_bytes()
            environment = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue  # gone, or another user's
        if folder.encode() in words or folder.encode() in environment:
            found.append((int(entry), words.replace(b"\0", b" ").decode(errors="replace")))
    return found
