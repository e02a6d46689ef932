"""`dsymfind fetch FILE` fetches the dSYM of every slice of a Mach-O file, and says why it
cannot for anything else."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    PE_FIXTURES,
    UNIVERSAL_UUIDS,
)
from support.processes import fail_line, run_cli
from test_fetch_command import cached, server, server_env

__all__ = ["server"]  # the fixture, shared with the fetch tests


def test_fetch_a_universal_file_fetches_every_slice(
    server: ss.SymbolServer, cache_dir: Path
) -> None:
    done = run_cli("fetch", str(FIXTURES / "universal"), env=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = dict(line.split("  ", 1) for line in done.stdout.splitlines())
    assert set(lines) == set(UNIVERSAL_UUIDS.values())
    for uuid in UNIVERSAL_UUIDS.values():
        assert lines[uuid].startswith("found  ")
        assert cached(cache_dir, uuid)


def test_fetch_uuids_and_files_mixed(server: ss.SymbolServer, cache_dir: Path) -> None:
    given = [GREET_UUID, str(FIXTURES / "hello"), HELLO_UUID.lower()]

    done = run_cli("fetch", "--json", *given, env=server_env(server))

    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [r["uuid"] for r in results] == [GREET_UUID, HELLO_UUID]  # each once, in order
    assert all(r["state"] == "found" for r in results)
    assert cached(cache_dir, HELLO_UUID)


@pytest.mark.parametrize(
    "target",
    [
        PE_FIXTURES / "hello64.exe",  # a file, not a Mach-O
        FIXTURES / "hello.dSYM",  # a folder
        Path("no-such-file"),
        Path("0123-not-a-uuid"),
    ],
)
def test_fetch_of_neither_a_uuid_nor_a_mach_o_is_one_line(
    server: ss.SymbolServer, target: Path
) -> None:
    line = fail_line(run_cli("fetch", HELLO_UUID, str(target), env=server_env(server)))

    assert line.startswith(f"dsymfind: error: {str(target)!r} is neither a UUID nor a Mach-O file")
    assert server.requests == []  # nothing fetched before the mistake was found


def test_fetch_of_a_mistyped_uuid_says_so(server: ss.SymbolServer) -> None:
    # Hex digits and dashes naming no file: a UUID with a digit group missing.
    line = fail_line(run_cli("fetch", "4C4C449A-5555-3144-A19A", env=server_env(server)))

    assert line == "dsymfind: error: not a UUID: '4C4C449A-5555-3144-A19A'"
    assert server.requests == []


LC_UUID = 0x1B


def without_lc_uuid(source: Path, target: Path) -> Path:
    """A thin 64-bit Mach-O whose LC_UUID is renumbered to a command nobody knows."""
    data = bytearray(source.read_bytes())
    (ncmds,) = struct.unpack_from("<I", data, 16)
    at = 32  # after the mach_header_64
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == LC_UUID:
            struct.pack_into("<I", data, at, 0x7FFFFFFE)
        at += size
    target.write_bytes(data)
    return target


def test_fetch_of_a_mach_o_without_uuid_is_one_line(
    server: ss.SymbolServer, tmp_path: Path
) -> None:
    stripped = without_lc_uuid(FIXTURES / "hello", tmp_path / "hello")

    line = fail_line(run_cli("fetch", str(stripped), env=server_env(server)))

    assert (
        line
        == f"dsymfind: error: {stripped}: no slice has a UUID (LC_UUID), so no dSYM can match it"
    )
    assert server.requests == []
