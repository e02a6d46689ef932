"""The committed Mach-O fixtures agree with LLVM's reader and can be rebuilt.

tests/fixtures/macho/uuids.json is the expected data that other tests read;
these tests keep it honest: against `llvm-dwarfdump --uuid` on the committed
files, against the files' own headers, and against a fresh rebuild.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import load_generator

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MACHO = FIXTURES / "macho"
SCRIPT = FIXTURES / "make_macho.py"

UUID_LINE = re.compile(r"^UUID: (\S+) \((\S+)\) (.+)$")
UPPER_DASHED = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")


make_macho = load_generator()


def expected() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads((MACHO / "uuids.json").read_text())
    return data


def tool(name: str) -> str | None:
    found: str | None = make_macho.find_tool(make_macho.TOOL_CANDIDATES[name])
    return found


def dwarfdump_uuids(
    dwarfdump: str, root: Path, paths: list[str]
) -> dict[str, list[dict[str, str]]]:
    result = subprocess.run(
        [dwarfdump, "--uuid", *paths], cwd=root, capture_output=True, text=True, check=True
    )
    found: dict[str, list[dict[str, str]]] = {path: [] for path in paths}
    for line in result.stdout.splitlines():
        match = UUID_LINE.match(line)
        assert match, f"unexpected llvm-dwarfdump output: {line!r}"
        uuid, arch, path = match.groups()
        found[path].append({"arch": arch, "uuid": uuid})
    return found


def read_header(path: Path) -> tuple[str, list[tuple[int, int, int]]]:
    """(container magic, [(cputype, cpusubtype, filetype) per slice])."""
    data = path.read_bytes()
    (magic,) = struct.unpack_from(">I", data, 0)
    if magic == 0xCAFEBABE:
        count = struct.unpack_from(">I", data, 4)[0]
        offsets = [struct.unpack_from(">I", data, 16 + 20 * i)[0] for i in range(count)]
        name = "FAT_MAGIC"
    elif magic == 0xCAFEBABF:
        count = struct.unpack_from(">I", data, 4)[0]
        offsets = [struct.unpack_from(">Q", data, 16 + 32 * i)[0] for i in range(count)]
        name = "FAT_MAGIC_64"
    else:
        offsets, name = [0], "MH_MAGIC_64"
    slices = []
    for offset in offsets:
        mh_magic, cputype, cpusubtype, filetype = struct.unpack_from("<IiII", data, offset)
        assert mh_magic == 0xFEEDFACF, f"{path}: no 64-bit Mach-O at {offset}"
        slices.append((cputype, cpusubtype, filetype))
    return name, slices


def test_manifest_lists_every_fixture_once() -> None:
    data = expected()
    tops = {path.split("/")[0] for path in data}
    assert tops == {
        "hello",
        "hello_stripped",
        "hello.dSYM",
        "libgreet.dylib",
        "libgreet.dylib.dSYM",
        "universal",
        "universal.dSYM",
        "universal64",
        "universal64.dSYM",
        "hello_arm64e",
        "hello_arm64e.dSYM",
        "crashy",
        "crashy.dSYM",
        "crashy_exec",
        "crashy_exec.dSYM",
    }
    for path, entry in data.items():
        assert (MACHO / path).is_file(), path
        assert entry["uuids"], path
        for item in entry["uuids"]:
            assert UPPER_DASHED.match(item["uuid"]), item


def test_uuids_shared_only_within_one_link() -> None:
    data = expected()

    def uuids(path: str) -> set[str]:
        return {item["uuid"] for item in data[path]["uuids"]}

    groups = {
        "hello": ["hello", "hello_stripped", "hello.dSYM/Contents/Resources/DWARF/hello"],
        "libgreet": [
            "libgreet.dylib",
            "libgreet.dylib.dSYM/Contents/Resources/DWARF/libgreet.dylib",
        ],
        "universal": ["universal", "universal.dSYM/Contents/Resources/DWARF/universal"],
        "universal64": ["universal64", "universal64.dSYM/Contents/Resources/DWARF/universal64"],
        "arm64e": ["hello_arm64e", "hello_arm64e.dSYM/Contents/Resources/DWARF/hello_arm64e"],
        "crashy": ["crashy", "crashy.dSYM/Contents/Resources/DWARF/crashy"],
        "crashy_exec": ["crashy_exec", "crashy_exec.dSYM/Contents/Resources/DWARF/crashy_exec"],
    }
    assert sorted(p for paths in groups.values() for p in paths) == sorted(data)
    seen: set[str] = set()
    for paths in groups.values():
        group = uuids(paths[0])
        for path in paths[1:]:
            assert uuids(path) == group, path
        assert not group & seen
        seen |= group
    assert len(uuids("universal")) == len(uuids("universal64")) == 2


def test_headers_match_manifest() -> None:
    names = {0x2: "MH_EXECUTE", 0x6: "MH_DYLIB", 0xA: "MH_DSYM"}
    for path, entry in expected().items():
        magic, slices = read_header(MACHO / path)
        assert magic == entry["magic"], path
        assert [names[filetype] for _, _, filetype in slices] == (
            [entry["filetype"]] * len(entry["uuids"])
        ), path


def test_arm64e_cpusubtypes() -> None:
    # The executable carries what Apple ships (subtype 2 + ptrauth ABI bit);
    # dsymutil writes the bare subtype into the dSYM.
    _, exe = read_header(MACHO / "hello_arm64e")
    _, dsym = read_header(MACHO / "hello_arm64e.dSYM/Contents/Resources/DWARF/hello_arm64e")
    assert exe == [(0x0100000C, 0x80000002, 0x2)]
    assert dsym == [(0x0100000C, 0x2, 0xA)]


def test_committed_files_agree_with_llvm_dwarfdump() -> None:
    dwarfdump = tool("llvm-dwarfdump")
    if dwarfdump is None:
        pytest.skip("llvm-dwarfdump (the reference UUID reader) is not installed")
    data = expected()
    found = dwarfdump_uuids(dwarfdump, MACHO, list(data))
    assert found == {path: entry["uuids"] for path, entry in data.items()}


def rebuild_skip_reason() -> str | None:
    missing = [name for name in make_macho.TOOL_CANDIDATES if tool(name) is None]
    if missing:
        return f"cannot rebuild fixtures, missing: {', '.join(missing)}"
    # The committed UUIDs come from Debian's LLVM 14; another clang or lld
    # emits other code or layout and so other UUIDs, which is not a failure.
    for name in ("clang", "ld64.lld"):
        path = tool(name)
        assert path is not None
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, check=False
        ).stdout
        if not re.search(r"\b14\.\d+\.\d+", version):
            return f"{name} is not LLVM 14 ({version.splitlines()[:1]}); UUIDs would differ"
    return None


@pytest.mark.parametrize("fat64_tools", [True, False], ids=["prefer-fat64-tools", "fallback"])
def test_rebuild_reproduces_uuids(tmp_path: Path, fat64_tools: bool) -> None:
    reason = rebuild_skip_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "macho"
    cmd = [sys.executable, str(SCRIPT), str(out)]
    if not fat64_tools:
        cmd.append("--no-fat64-tools")
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    rebuilt = json.loads((out / "uuids.json").read_text())
    assert rebuilt == expected()
    # The rebuilt manifest was read back by llvm-dwarfdump in the script;
    # check the files themselves once more, independently of the script.
    found = dwarfdump_uuids(tool("llvm-dwarfdump") or "", out, list(rebuilt))
    assert found == {path: entry["uuids"] for path, entry in rebuilt.items()}
