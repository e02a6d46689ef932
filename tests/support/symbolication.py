"""The crashy fixtures for symbolication, their reference reader (llvm-symbolizer, run on
the same addresses), their instructions (llvm-objdump), and crash reports about them in
each input form."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsymfind.main import main
from support.fixtures import FIXTURES, UUIDS, dwarf_of, folder_with, toml_list, write_config

CRASHY_UUIDS = {u["arch"]: u["uuid"] for u in UUIDS["crashy"]["uuids"]}
CRASHY_EXEC_UUID = UUIDS["crashy_exec"]["uuids"][0]["uuid"]
CRASHY_DWARF = dwarf_of(FIXTURES / "crashy.dSYM")
CRASHY_EXEC_DWARF = dwarf_of(FIXTURES / "crashy_exec.dSYM")
# ld64.lld puts __TEXT at this address in every fixture executable.
TEXT_VMADDR = 0x100000000
SYMBOLIZER = shutil.which("llvm-symbolizer-14") or shutil.which("llvm-symbolizer")
OBJDUMP = shutil.which("llvm-objdump-14") or shutil.which("llvm-objdump")

_INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)(?:\s+(\S+))?")
_FUNCTION = re.compile(r"^([0-9a-f]{16}) <(.+)>:$")


def instructions(executable: Path, arch: str) -> list[tuple[int, str, str]]:
    """(address, mnemonic, operand) of every instruction in the executable's code."""
    assert OBJDUMP is not None
    listing = subprocess.run(
        [OBJDUMP, "-d", "--no-show-raw-insn", f"--arch={arch}", str(executable)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = []
    for line in listing.splitlines():
        match = _INSTRUCTION.match(line)
        if match and not _FUNCTION.match(line):
            found.append((int(match[1], 16), match[2], match[3] or ""))
    return found


def return_addresses(executable: Path, arch: str) -> list[int]:
    """The address after every call: what a backtrace holds for a caller's frame."""
    calls = ("bl", "callq", "call")
    listing = instructions(executable, arch)
    return [after[0] for (_, op, _), after in itertools.pairwise(listing) if op in calls]


def symbolizer(dwarf: Path, arch: str, addresses: list[int]) -> list[list[dict[str, Any]]]:
    """llvm-symbolizer --inlines for each file address: its frames, innermost first."""
    assert SYMBOLIZER is not None
    stdin = "".join(f"{dwarf} {address:#x}\n" for address in addresses)
    out = subprocess.run(
        [SYMBOLIZER, "--inlines", "--output-style=JSON", f"--default-arch={arch}"],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [json.loads(line)["Symbol"] for line in out.splitlines() if line.strip()]


def ips_report(uuid: str, arch: str, offsets: list[int], **body: Any) -> str:
    """A bug type 309 `.ips` whose crashed thread's frames are these offsets into crashy."""
    metadata = {"app_name": "crashy", "bug_type": "309", "name": "crashy"}
    content = {
        "cpuType": "ARM-64" if arch.startswith("arm64") else "X86-64",
        "faultingThread": 0,
        "threads": [
            {"triggered": True, "frames": [{"imageOffset": o, "imageIndex": 0} for o in offsets]}
        ],
        "usedImages": [
            {
                "source": "P",
                "arch": arch,
                "base": TEXT_VMADDR,
                "uuid": uuid.lower(),
                "path": "/Users/dev/crashy",
                "name": "crashy",
            }
        ],
        **body,
    }
    return json.dumps(metadata) + "\n" + json.dumps(content, indent=2) + "\n"


def crash_report(uuid: str, arch: str, offsets: list[int]) -> str:
    """The text `.crash` form of the same crash."""
    frames = "".join(
        f"{n:<4}crashy                        \t{TEXT_VMADDR + o:#018x} {TEXT_VMADDR:#x} + {o}\n"
        for n, o in enumerate(offsets)
    )
    hex_uuid = uuid.replace("-", "").lower()
    return (
        "Process:               crashy [4711]\n"
        f"Code Type:             {'ARM-64' if arch.startswith('arm64') else 'X86-64'} (Native)\n\n"
        f"Thread 0 Crashed:: Dispatch queue: com.apple.main-thread\n{frames}\n"
        f"Binary Images:\n{TEXT_VMADDR:#x} - {TEXT_VMADDR + 0x3FFF:#x} crashy {arch}  "
        f"<{hex_uuid}> /Users/dev/crashy\n"
    )


def crashy_search_path(tmp_path: Path, config_file: Path) -> Path:
    """crashy.dSYM in a search path, and no server: what most symbolicate tests run with."""
    folder = folder_with(tmp_path / "builds", "crashy.dSYM")
    write_config(config_file, f"search_paths = {toml_list([folder])}\n")
    return folder


def symbolicate(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`dsymfind symbolicate ARGV` in this process: its exit status, stdout and stderr."""
    status = main(["symbolicate", *argv])
    out, err = capsys.readouterr()
    return status, out, err
