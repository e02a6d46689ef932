"""Every verb's stdout under the one error policy (dsymfind/commands/stdout.py), run as real
processes: a full device (/dev/full, which answers every write with ENOSPC) is one
error line and status 1, a reader that went away is silence and a SIGPIPE death's status."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.crash_reports import CRASH_REPORTS
from support.fixtures import FIXTURES
from support.processes import BIN, run_cli
from support.symbolication import CRASHY_UUIDS

from dsymfind import main
from dsymfind.commands import stdout

ARM = CRASHY_UUIDS["arm64"]
PE_FIXTURES = FIXTURES.parent / "pe"
FULL_DEVICE = "/dev/full"
NO_SPACE = "dsymfind: error: cannot write the output: No space left on device"
# Each public verb, --help and --version, with words that make it write to stdout on a
# machine whose cache holds the indexed fixtures (`indexed`).
INVOCATIONS: dict[str, list[str]] = {
    "install": ["install", "--dry-run"],
    "uninstall": ["uninstall", "--dry-run"],
    "doctor": ["doctor"],
    "index": ["index", str(FIXTURES)],
    "gc": ["gc", "--dry-run"],
    "check": ["check"],
    "publish": ["publish", str(FIXTURES / "crashy.dSYM"), "--to", "STORE", "--dry-run"],
    "status": ["status"],
    "forget": ["forget", ARM],
    "fetch": ["fetch", ARM],
    "prefetch": ["prefetch", str(CRASH_REPORTS / "hello-macos.ips")],
    "symbolicate": ["symbolicate", str(CRASH_REPORTS / "hello-macos.ips")],
    "lookup": ["lookup", ARM],
    "id": ["id", str(FIXTURES / "crashy")],
    "pdb": ["pdb", str(PE_FIXTURES / "hello32.exe")],
    "sources": ["sources", ARM],
    "config": ["config"],
    "builds": ["builds", "--store", "STORE", "--json"],
    "retire": ["retire", "--store", "STORE", "--older-than", "1d", "--dry-run"],
    "check-build": ["check-build", str(FIXTURES / "crashy"), str(FIXTURES / "crashy.dSYM")],
    "why": ["why", ARM],
    "atos": ["atos", "-o", str(FIXTURES / "crashy.dSYM"), "-arch", "arm64", "0x100000338"],
    "--help": ["--help"],
    "--version": ["--version"],
    "symbolicate --help": ["symbolicate", "--help"],
}


def test_every_public_verb_is_checked() -> None:
    """A verb added later joins INVOCATIONS, or this fails."""
    assert set(main.COMMANDS) <= set(INVOCATIONS)


@pytest.fixture
def indexed(tmp_path: Path) -> dict[str, str]:
    """The fixtures indexed into this test's cache, and where `publish` may write."""
    done = run_cli("index", str(FIXTURES))
    assert done.returncode == 0, done.stderr
    store = tmp_path / "store"
    store.mkdir()
    return {"STORE": str(store)}


def words_of(name: str, indexed: dict[str, str]) -> list[str]:
    return [indexed.get(word, word) for word in INVOCATIONS[name]]


def run_into(target: int, words: list[str]) -> subprocess.CompletedProcess[str]:
    """`dsymfind WORDS` with its stdout on the descriptor `target`."""
    return subprocess.run(
        [str(BIN / "dsymfind"), *words],
        stdout=target,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        check=False,
    )


def assert_quiet_otherwise(stderr: str) -> None:
    for unwanted in ("Traceback", "Exception ignored", "internal error"):
        assert unwanted not in stderr, stderr


@pytest.mark.parametrize("name", INVOCATIONS)
def test_a_full_device_is_one_error_line_and_status_1(indexed, name):
    with open(FULL_DEVICE, "w") as full:
        done = run_into(full.fileno(), words_of(name, indexed))
    assert_quiet_otherwise(done.stderr)
    assert done.stderr.splitlines()[-1:] == [NO_SPACE], done.stderr
    assert done.stderr.count("cannot write the output") == 1
    assert done.returncode == 1


@pytest.mark.parametrize("name", INVOCATIONS)
def test_a_reader_gone_is_silence(indexed, name):
    """As Unix tools end when the reader of their pipe has gone (`| head`): no word about
    it, and a SIGPIPE death's status."""
    reading, writing = os.pipe()
    os.close(reading)  # the reader is gone before the first write
    try:
        done = run_into(writing, words_of(name, indexed))
    finally:
        os.close(writing)
    assert_quiet_otherwise(done.stderr)
    assert "error" not in done.stderr, done.stderr
    assert done.returncode == stdout.CLOSED_PIPE_STATUS


def test_a_report_cut_short_by_head_ends_quietly(tmp_path: Path) -> None:
    """`dsymfind symbolicate big.ips | head -1`: the reader takes a line and goes while the
    one report written is far larger than the pipe holds."""
    header, body = (CRASH_REPORTS / "hello-macos.ips").read_text().split("\n", 1)
    padded = body.replace('"uptime"', '"padding" : "' + "x" * 500_000 + '",\n  "uptime"', 1)
    big = tmp_path / "big.ips"
    big.write_text(header + "\n" + padded)
    producer = subprocess.Popen(
        [str(BIN / "dsymfind"), "symbolicate", "--offline", str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert producer.stdout is not None and producer.stderr is not None
    assert producer.stdout.readline().startswith(b'{"app_name"')
    producer.stdout.close()
    err = producer.stderr.read().decode()
    assert producer.wait(timeout=120) == stdout.CLOSED_PIPE_STATUS
    assert_quiet_otherwise(err)
    assert "error" not in err
