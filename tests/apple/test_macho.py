"""dsymfind.apple.macho: Mach-O identity reading, checked against LLVM and crafted input.

Three sources of truth: files built here with LLVM 14 (skipped without it), the
committed fixtures in tests/fixtures/macho with their uuids.json, and
`llvm-dwarfdump --uuid`. Malformed input is built from struct.pack in this file.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fixtures import FIXTURES

from dsymfind.apple import macho
from dsymfind.apple.macho import (
    MachOError,
    Slice,
    read_slices,
    read_slices_from_bytes,
    read_slices_with_stat,
    slice_for_uuid,
)
from dsymfind.errors import DsymfindError

UUIDS_JSON = FIXTURES / "uuids.json"
LLVM_BIN = Path("/usr/lib/llvm-14/bin")
UPPER_DASHED = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")
DWARFDUMP_LINE = re.compile(r"^UUID: (\S+) \((\S+)\) (.+)$")

# Header constants spelled out, so the tests do not share the reader's assumptions.
MH_MAGIC, MH_MAGIC_64 = 0xFEEDFACE, 0xFEEDFACF
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
MH_OBJECT, MH_EXECUTE, MH_DYLIB, MH_DSYM = 1, 2, 6, 10
LC_SEGMENT_64, LC_UUID, LC_ATOM_INFO = 0x19, 0x1B, 0x36
CPU_X86, CPU_X86_64, CPU_ARM, CPU_ARM64, CPU_PPC = 7, 0x01000007, 12, 0x0100000C, 18
UUID_A = bytes.fromhex("23516be429be350c91c9f36e7999f0f1")
UUID_A_TEXT = "23516BE4-29BE-350C-91C9-F36E7999F0F1"
UUID_B = bytes(range(16))
MACHO_MAGICS = {
    b"\xfe\xed\xfa\xce",
    b"\xce\xfa\xed\xfe",
    b"\xfe\xed\xfa\xcf",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",
    b"\xca\xfe\xba\xbf",
}


# --- crafting Mach-O bytes --------------------------------------------------------


def load_command(
    cmd: int, payload: bytes = b"", endian: str = "<", size: int | None = None
) -> bytes:
    cmdsize = 8 + len(payload) if size is None else size
    return struct.pack(endian + "II", cmd, cmdsize) + payload


def uuid_command(uuid: bytes = UUID_A, endian: str = "<") -> bytes:
    return load_command(LC_UUID, uuid, endian)


def segment_command() -> bytes:
    # An LC_SEGMENT_64 with no sections: cmdsize 72.
    payload = struct.pack("<16sQQQQiiII", b"__TEXT", 0, 0x4000, 0, 0x4000, 5, 5, 0, 0)
    return load_command(LC_SEGMENT_64, payload)


def thin(
    commands: Sequence[bytes] = (uuid_command(),),
    *,
    cputype: int = CPU_ARM64,
    cpusubtype: int = 0,
    filetype: int = MH_EXECUTE,
    endian: str = "<",
    is64: bool = True,
    ncmds: int | None = None,
    sizeofcmds: int | None = None,
    tail: bytes = b"",
) -> bytes:
    """A Mach-O header plus `commands`; ncmds and sizeofcmds may be made to lie."""
    body = b"".join(commands)
    fields = [
        MH_MAGIC_64 if is64 else MH_MAGIC,
        cputype,
        cpusubtype,
        filetype,
        len(commands) if ncmds is None else ncmds,
        len(body) if sizeofcmds is None else sizeofcmds,
        0,
    ]
    header = struct.pack(
        endian + ("IiIIIIII" if is64 else "IiIIIII"), *fields, *([0] if is64 else [])
    )
    return header + body + tail


def fat_raw(entries: Sequence[tuple[int, int, int, int]], *, is64: bool = False) -> bytes:
    """A universal header with the given (cputype, cpusubtype, offset, size) entries."""
    magic = FAT_MAGIC_64 if is64 else FAT_MAGIC
    layout = ">iIQQII" if is64 else ">iIIII"
    table = b"".join(struct.pack(layout, *entry, 5, *([0] if is64 else [])) for entry in entries)
    return struct.pack(">II", magic, len(entries)) + table


def fat(slices: Sequence[bytes], *, is64: bool = False, align: int = 32) -> bytes:
    """A universal file holding `slices`, each at an `align`-byte boundary."""
    entry_size = 32 if is64 else 20
    offset = 8 + entry_size * len(slices)
    entries, placed = [], []
    for data in slices:
        offset = -(-offset // align) * align
        cputype, cpusubtype = struct.unpack_from("<iI", data, 4)
        entries.append((cputype, cpusubtype, offset, len(data)))
        placed.append((offset, data))
        offset += len(data)
    out = bytearray(fat_raw(entries, is64=is64))
    for at, data in placed:
        out[len(out) :] = bytes(at - len(out))
        out[at:] = data
    return bytes(out)


# --- reference tools and fixtures -------------------------------------------------


def find_tool(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or shutil.which(name, path=str(LLVM_BIN))
        if found:
            return found
    return None


DWARFDUMP = find_tool("llvm-dwarfdump-14", "llvm-dwarfdump")


def dwarfdump_uuids(path: Path) -> list[tuple[str, str]]:
    """(arch, uuid) per slice, as LLVM's reader sees the file."""
    assert DWARFDUMP is not None
    out = subprocess.run(
        [DWARFDUMP, "--uuid", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found = [DWARFDUMP_LINE.match(line) for line in out.splitlines()]
    return [(match[2], match[1]) for match in found if match]


def ours(path: Path) -> list[tuple[str, str]]:
    return [(s.arch, s.uuid) for s in read_slices(path) if s.uuid is not None]


def is_macho(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) in MACHO_MAGICS


def fixture_machos() -> list[Any]:
    """Mach-O files in tests/fixtures/macho, as pytest params (one skip if none)."""
    if FIXTURES.is_dir():
        files = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and not p.is_symlink())
        machos = [p for p in files if is_macho(p)]
        if machos:
            return [pytest.param(p, id=str(p.relative_to(FIXTURES))) for p in machos]
    return [pytest.param(None, marks=pytest.mark.skip(reason="no Mach-O fixtures yet"))]


def uuids_json_entries() -> list[Any]:
    if not UUIDS_JSON.is_file():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason="no uuids.json yet"))]
    data: dict[str, Any] = json.loads(UUIDS_JSON.read_text())
    return [pytest.param(key, value, id=key) for key, value in sorted(data.items())]


TBD = """--- !tapi-tbd
tbd-version: 4
targets: [ arm64-macos, arm64e-macos, x86_64-macos ]
install-name: '/usr/lib/libSystem.B.dylib'
exports:
  - targets: [ arm64-macos, arm64e-macos, x86_64-macos ]
    symbols: [ _printf, dyld_stub_binder ]
...
"""
HELLO_C = """int printf(const char *, ...);
__attribute__((noinline)) int helper(int x) { return x * 3 + 1; }
int main(int argc, char **argv) { (void)argv; printf("%d\\n", helper(argc)); return 0; }
"""
GREET_C = "int greet(int x) { return x + 42; }\n"


class Toolchain:
    """Builds small Mach-O files with LLVM 14 (no SDK: a TAPI stub stands in for libSystem)."""

    def __init__(self, root: Path) -> None:
        tools = {
            "clang": find_tool("clang-14"),
            "ld": find_tool("ld64.lld-14", "ld64.lld"),
            "dsymutil": find_tool("dsymutil-14", "dsymutil"),
            "lipo": find_tool("llvm-lipo-14", "llvm-lipo"),
            "strip": find_tool("llvm-strip-14", "llvm-strip"),
        }
        missing = [name for name, found in tools.items() if found is None]
        if missing or DWARFDUMP is None:
            pytest.skip(f"LLVM 14 Mach-O toolchain missing: {missing or ['llvm-dwarfdump']}")
        self.tool = {name: str(found) for name, found in tools.items()}
        self.root = root
        (root / "SDK/usr/lib").mkdir(parents=True)
        (root / "SDK/usr/lib/libSystem.tbd").write_text(TBD)
        (root / "hello.c").write_text(HELLO_C)
        (root / "greet.c").write_text(GREET_C)
        # dsymutil runs `lipo` for universal input: point it at llvm-lipo.
        (root / "bin").mkdir()
        (root / "bin/lipo").symlink_to(self.tool["lipo"])
        self.env = {
            **os.environ,
            "ZERO_AR_DATE": "1",
            "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '')}",
        }

    def run(self, *args: str) -> None:
        subprocess.run(args, cwd=self.root, env=self.env, check=True, capture_output=True)

    def compile(self, source: str, arch: str, out: str) -> None:
        self.run(
            self.tool["clang"], "-target", f"{arch}-apple-macos11", "-nostdinc", "-g", "-O1",
            "-ffile-compilation-dir=.", "-c", source, "-o", out,
        )  # fmt: skip

    def link(self, arch: str, obj: str, out: str, *extra: str) -> None:
        self.run(
            self.tool["ld"], "-arch", arch, "--threads=1", "-platform_version", "macos",
            "11.0", "11.0", "-syslibroot", "SDK", "-lSystem", "-oso_prefix", ".",
            *extra, "-o", out, obj,
        )  # fmt: skip

    def build(self) -> Path:
        (self.root / "x86").mkdir()
        self.compile("hello.c", "arm64", "hello.o")
        self.compile("hello.c", "x86_64", "hello_x86_64.o")
        self.compile("hello.c", "arm64e", "hello_arm64e.o")
        self.compile("greet.c", "arm64", "greet.o")
        self.link("arm64", "hello.o", "hello")
        self.link("x86_64", "hello_x86_64.o", "x86/hello")
        self.link("arm64e", "hello_arm64e.o", "hello_arm64e")
        self.link("arm64", "greet.o", "libgreet.dylib", "-dylib", "-install_name",
                  "@rpath/libgreet.dylib")  # fmt: skip
        # lld writes arm64e as ARM64_ALL; Apple's binaries carry 0x80000002.
        with (self.root / "hello_arm64e").open("r+b") as handle:
            handle.seek(8)
            handle.write(struct.pack("<I", 0x80000002))
        self.run(self.tool["lipo"], "-create", "hello", "x86/hello", "-output", "universal")
        self.run(self.tool["strip"], "hello", "-o", "hello_stripped")
        for name in ("hello", "universal", "libgreet.dylib", "hello_arm64e"):
            self.run(self.tool["dsymutil"], name, "-o", f"{name}.dSYM")
        universal64 = fat([(self.root / "x86/hello").read_bytes(),
                           (self.root / "hello").read_bytes()], is64=True, align=16384)  # fmt: skip
        (self.root / "universal64").write_bytes(universal64)
        return self.root


def dsym_dwarf(root: Path, name: str) -> Path:
    return root / f"{name}.dSYM/Contents/Resources/DWARF/{name}"


BUILT_FILES = [
    "hello",
    "hello.o",
    "x86/hello",
    "hello_stripped",
    "hello_arm64e",
    "libgreet.dylib",
    "universal",
    "universal64",
    "hello.dSYM/Contents/Resources/DWARF/hello",
    "universal.dSYM/Contents/Resources/DWARF/universal",
    "libgreet.dylib.dSYM/Contents/Resources/DWARF/libgreet.dylib",
    "hello_arm64e.dSYM/Contents/Resources/DWARF/hello_arm64e",
]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Toolchain(tmp_path_factory.mktemp("macho-build")).build()


# --- agreement with LLVM and the committed fixtures -------------------------------


@pytest.mark.parametrize("name", BUILT_FILES)
def test_built_files_match_dwarfdump(built: Path, name: str) -> None:
    assert ours(built / name) == dwarfdump_uuids(built / name)


@pytest.mark.parametrize("path", fixture_machos())
def test_fixture_files_match_dwarfdump(path: Path) -> None:
    if DWARFDUMP is None:
        pytest.skip("llvm-dwarfdump not installed")
    assert ours(path) == dwarfdump_uuids(path)


def expected_entries(value: Any) -> tuple[list[dict[str, Any]], Any]:
    """uuids.json values: a list of {arch, uuid, filetype}, or {filetype, uuids: [...]}."""
    if isinstance(value, dict):
        return list(value["uuids"]), value.get("filetype")
    return list(value), None


def filetype_matches(expected: Any, found: Slice) -> bool:
    if isinstance(expected, int):
        return expected == found.filetype
    name = str(expected).upper()
    return found.filetype_name in (name, "MH_" + name)


@pytest.mark.parametrize(("key", "value"), uuids_json_entries())
def test_reader_agrees_with_uuids_json(key: str, value: Any) -> None:
    entries, filetype = expected_entries(value)
    slices = read_slices(FIXTURES / key)
    want = sorted((entry["arch"], entry["uuid"].upper()) for entry in entries if entry.get("uuid"))
    assert sorted((s.arch, s.uuid) for s in slices if s.uuid) == want
    for entry in entries:
        kind = entry.get("filetype", filetype)
        found = slice_for_uuid(slices, entry["uuid"])
        assert found is not None
        assert kind is None or filetype_matches(kind, found), (kind, found)
    container = value.get("magic", "") if isinstance(value, dict) else ""
    if container.startswith("FAT"):
        assert all(s.offset > 0 for s in slices)
    elif container.startswith("MH_"):
        assert [s.offset for s in slices] == [0]


def committed(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"tests/fixtures/macho/{name} not there yet")
    return path


def test_committed_arm64e_fixture() -> None:
    (exe,) = read_slices(committed("hello_arm64e"))
    assert (exe.arch, exe.cpusubtype) == ("arm64e", 0x80000002)
    (dsym,) = read_slices(committed("hello_arm64e.dSYM/Contents/Resources/DWARF/hello_arm64e"))
    assert (dsym.arch, dsym.uuid) == ("arm64e", exe.uuid)


def test_committed_fat64_fixture() -> None:
    path = committed("universal64")
    assert path.read_bytes()[:4] == struct.pack(">I", FAT_MAGIC_64)
    slices = read_slices(path)
    assert sorted(s.arch for s in slices) == ["arm64", "x86_64"]
    assert all(s.uuid is not None and UPPER_DASHED.match(s.uuid) for s in slices)


# --- real files: shapes, arches, file types ---------------------------------------


def test_thin_executable_and_its_dsym(built: Path) -> None:
    (exe,) = read_slices(built / "hello")
    (dsym,) = read_slices(dsym_dwarf(built, "hello"))
    assert exe.uuid is not None and UPPER_DASHED.match(exe.uuid)
    assert exe.uuid == dsym.uuid
    assert (exe.arch, exe.filetype_name, dsym.filetype_name) == ("arm64", "MH_EXECUTE", "MH_DSYM")
    assert (exe.offset, exe.size) == (0, (built / "hello").stat().st_size)


def test_object_file_has_no_uuid(built: Path) -> None:
    (obj,) = read_slices(built / "hello.o")
    assert (obj.uuid, obj.filetype, obj.filetype_name) == (None, MH_OBJECT, "MH_OBJECT")


def test_stripped_binary_keeps_uuid(built: Path) -> None:
    assert read_slices(built / "hello_stripped")[0].uuid == read_slices(built / "hello")[0].uuid


def test_dylib(built: Path) -> None:
    (dylib,) = read_slices(built / "libgreet.dylib")
    assert (dylib.filetype, dylib.filetype_name) == (MH_DYLIB, "MH_DYLIB")


def by_arch(slices: list[Slice]) -> dict[str, Slice]:
    return {s.arch: s for s in slices}


def test_capability_bits_do_not_change_the_arch(built: Path) -> None:
    # The x86_64 executable carries CPU_SUBTYPE_LIB64 (0x80000003), its dSYM 3.
    (exe,) = read_slices(built / "x86/hello")
    dsym = by_arch(read_slices(dsym_dwarf(built, "universal")))["x86_64"]
    assert (exe.cpusubtype, dsym.cpusubtype) == (0x80000003, 3)
    assert exe.arch == dsym.arch == "x86_64"
    assert exe.uuid == dsym.uuid


def test_arm64e_with_ptrauth_bits(built: Path) -> None:
    (exe,) = read_slices(built / "hello_arm64e")
    (dsym,) = read_slices(dsym_dwarf(built, "hello_arm64e"))
    assert (exe.arch, exe.cpusubtype, exe.cputype) == ("arm64e", 0x80000002, CPU_ARM64)
    assert dsym.arch == "arm64e" and dsym.uuid == exe.uuid


def test_universal_and_its_dsym(built: Path) -> None:
    exe = read_slices(built / "universal")
    dsym = read_slices(dsym_dwarf(built, "universal"))
    assert sorted(by_arch(exe)) == ["arm64", "x86_64"]
    assert [(s.arch, s.uuid) for s in exe] == [(s.arch, s.uuid) for s in dsym]
    thin_uuids = {arch: read_slices(built / path)[0].uuid
                  for arch, path in (("arm64", "hello"), ("x86_64", "x86/hello"))}  # fmt: skip
    assert {s.arch: s.uuid for s in exe} == thin_uuids
    assert all(s.filetype_name == "MH_DSYM" for s in dsym)
    # dsymutil packs fat dSYM slices at 32-byte boundaries, not pages.
    assert dsym[0].offset == 64 and all(s.offset % 32 == 0 for s in dsym)
    assert any(s.offset % 4096 for s in dsym)


def test_fat64(built: Path) -> None:
    slices = read_slices(built / "universal64")
    assert sorted((s.arch, s.uuid) for s in slices) == sorted(ours(built / "universal"))
    assert slices[0].offset == 16384 and all(s.offset % 16384 == 0 for s in slices)
    assert slices[0].offset + slices[0].size <= slices[1].offset


def test_fat64_beyond_4gib_offsets_are_checked_not_trusted() -> None:
    data = fat_raw([(CPU_ARM64, 0, 2**33, 4096)], is64=True) + bytes(64)
    with pytest.raises(MachOError, match="past the end of the file"):
        read_slices_from_bytes(data)


@pytest.mark.parametrize("name", BUILT_FILES)
def test_bytes_and_file_readers_agree(built: Path, name: str) -> None:
    assert read_slices_from_bytes((built / name).read_bytes()) == read_slices(built / name)


def read_listed(path: Path) -> tuple[list[Slice], os.stat_result]:
    """As `dsymfind index` reads a DWARF file os.scandir has just listed as regular."""
    (entry,) = [e for e in os.scandir(path.parent) if e.name == path.name]
    assert entry.is_file(follow_symlinks=False)
    return read_slices_with_stat(entry.path, listed=True)


@pytest.mark.parametrize("name", BUILT_FILES)
def test_a_listed_file_reads_as_llvm_reads_it_with_the_stat_of_the_file_read(
    built: Path, name: str
) -> None:
    # Thin, universal (32- and 64-bit tables, slices from the same first read), arm64e.
    slices, info = read_listed(built / name)
    assert [(s.arch, s.uuid) for s in slices if s.uuid is not None] == dwarfdump_uuids(built / name)
    assert slices == read_slices(built / name)
    st_now = (built / name).stat()
    assert (info.st_ino, info.st_size, info.st_mtime_ns) == (
        st_now.st_ino,
        st_now.st_size,
        st_now.st_mtime_ns,
    )


def test_a_listed_file_whose_load_commands_run_past_the_first_read(tmp_path: Path) -> None:
    padding = load_command(0x99, bytes(8000))  # LLVM skips a command it does not know
    path = tmp_path / "long"
    path.write_bytes(thin([padding, uuid_command()], filetype=MH_DSYM))
    (found,), info = read_listed(path)
    assert [(found.arch, found.uuid)] == dwarfdump_uuids(path) == [("arm64", UUID_A_TEXT)]
    assert info.st_size == path.stat().st_size > macho.HEAD_READ_BYTES


def test_a_listed_file_cut_short_or_not_mach_o_is_refused(built: Path, tmp_path: Path) -> None:
    whole = dsym_dwarf(built, "hello").read_bytes()
    cut = tmp_path / "cut"
    cut.write_bytes(whole[: len(whole) // 2])
    foreign = tmp_path / "hello.c"
    foreign.write_bytes((built / "hello.c").read_bytes())
    for path, message in ((cut, "truncated or malformed"), (foreign, "not a Mach-O file")):
        assert DWARFDUMP is not None
        llvm = subprocess.run([DWARFDUMP, "--uuid", str(path)], capture_output=True, text=True)
        assert llvm.returncode != 0 and "UUID:" not in llvm.stdout  # LLVM refuses it too
        with pytest.raises(MachOError, match=message) as caught:
            read_listed(path)
        assert str(caught.value).startswith(f"{path}: ")


def test_a_listed_file_swapped_for_a_symlink_is_not_followed(built: Path, tmp_path: Path) -> None:
    """Between the listing and the open the entry may become a symlink (to a device, whose
    open can have side effects, or to any file elsewhere): open() refuses it."""
    folder = tmp_path / "DWARF"
    folder.mkdir()
    path = folder / "hello"
    path.write_bytes(dsym_dwarf(built, "hello").read_bytes())
    (entry,) = list(os.scandir(folder))
    assert entry.is_file(follow_symlinks=False)
    path.unlink()
    path.symlink_to(dsym_dwarf(built, "hello"))
    with pytest.raises(MachOError, match="cannot read"):
        read_slices_with_stat(entry.path, listed=True)


def test_prefix_with_file_size(built: Path) -> None:
    path = dsym_dwarf(built, "universal")
    data = path.read_bytes()
    slices = read_slices(path)
    prefix = data[: slices[1].offset + 4096]
    assert read_slices_from_bytes(prefix, file_size=len(data)) == slices
    with pytest.raises(MachOError, match="past the end of the file"):
        read_slices_from_bytes(prefix)
    with pytest.raises(MachOError, match="file ended early"):
        read_slices_from_bytes(data[:100], file_size=len(data))
    with pytest.raises(MachOError, match="smaller"):
        read_slices_from_bytes(data, file_size=10)


# --- crafted well-formed files ----------------------------------------------------


def test_crafted_thin_big_and_little_endian() -> None:
    for endian in "<>":
        data = thin([uuid_command(endian=endian)], cputype=CPU_PPC, endian=endian, is64=False)
        (found,) = read_slices_from_bytes(data)
        assert (found.uuid, found.arch, found.size) == (UUID_A_TEXT, "ppc", len(data))


def test_unknown_load_commands_are_skipped() -> None:
    odd = load_command(LC_ATOM_INFO, bytes(8))
    data = thin([segment_command(), odd, uuid_command(), load_command(0x7FFFFFFF)])
    assert read_slices_from_bytes(data)[0].uuid == UUID_A_TEXT


def test_no_uuid_is_none() -> None:
    assert read_slices_from_bytes(thin([segment_command()]))[0].uuid is None


def test_load_commands_past_the_first_4_kib_are_read() -> None:
    padding = load_command(0x99, bytes(8000))
    data = thin([padding, uuid_command()], filetype=MH_DSYM)
    (found,) = read_slices_from_bytes(data)
    assert (found.uuid, found.filetype_name) == (UUID_A_TEXT, "MH_DSYM")


def test_fat_slices_in_arch_table_order() -> None:
    data = fat([thin([uuid_command(UUID_B)], cputype=CPU_X86_64, cpusubtype=3), thin()])
    slices = read_slices_from_bytes(data)
    assert [s.arch for s in slices] == ["x86_64", "arm64"]
    assert [s.offset for s in slices] == [64, 128]  # 32-byte aligned
    assert slices[1].uuid == UUID_A_TEXT


@pytest.mark.parametrize(
    ("cputype", "cpusubtype", "name"),
    [
        (CPU_ARM64, 0, "arm64"),
        (CPU_ARM64, 0x80000002, "arm64e"),
        (CPU_ARM64, 0x81000002, "arm64e"),
        (CPU_ARM64, 2, "arm64e"),
        (CPU_X86_64, 0x80000003, "x86_64"),
        (CPU_X86_64, 8, "x86_64h"),
        (CPU_X86, 3, "i386"),
        (CPU_ARM, 9, "armv7"),
        (CPU_ARM, 11, "armv7s"),
        (CPU_ARM, 12, "armv7k"),
        (0x0200000C, 1, "arm64_32"),
        (CPU_PPC, 0, "ppc"),
        (CPU_ARM64, 7, "cputype:16777228/7"),
        (99, 0x80000004, "cputype:99/4"),
        (-1, 0, "cputype:-1/0"),
    ],
)
def test_arch_names(cputype: int, cpusubtype: int, name: str) -> None:
    assert macho.arch_name(cputype, cpusubtype) == name
    data = thin(cputype=cputype, cpusubtype=cpusubtype)
    assert read_slices_from_bytes(data)[0].arch == name


@pytest.mark.parametrize(
    ("filetype", "name"),
    [(1, "MH_OBJECT"), (2, "MH_EXECUTE"), (6, "MH_DYLIB"), (8, "MH_BUNDLE"), (10, "MH_DSYM"),
     (11, "MH_KEXT_BUNDLE"), (12, "MH_FILESET"), (77, "MH_UNKNOWN(77)")],
)  # fmt: skip
def test_filetype_names(filetype: int, name: str) -> None:
    assert read_slices_from_bytes(thin(filetype=filetype))[0].filetype_name == name


# --- slice_for_uuid and Slice -----------------------------------------------------


def test_slice_for_uuid() -> None:
    slices = read_slices_from_bytes(fat([thin([uuid_command(UUID_B)]), thin(cputype=CPU_X86_64)]))
    assert slice_for_uuid(slices, UUID_A_TEXT) is slices[1]
    assert slice_for_uuid(slices, UUID_A_TEXT.lower()) is slices[1]
    assert slice_for_uuid(slices, UUID_A.hex()) is slices[1]
    assert slice_for_uuid(slices, f" {UUID_A_TEXT}\n") is slices[1]
    assert slice_for_uuid(slices, "00000000-0000-0000-0000-000000000000") is None
    for junk in ("", "not-a-uuid", UUID_A_TEXT[:-1], UUID_A_TEXT + "0", "G" * 32):
        assert slice_for_uuid(slices, junk) is None
    assert slice_for_uuid([], UUID_A_TEXT) is None


def test_slice_is_an_immutable_value() -> None:
    (found,) = read_slices_from_bytes(thin())
    twin = Slice(UUID_A_TEXT, "arm64", CPU_ARM64, 0, MH_EXECUTE, "MH_EXECUTE", 0, found.size)
    assert found == twin and hash(found) == hash(twin) and found != "arm64"
    assert pickle.loads(pickle.dumps(found)) == found
    assert "arch='arm64'" in repr(found)
    with pytest.raises(AttributeError):
        found.uuid = None
    with pytest.raises(AttributeError):
        del found.arch
    match found:
        case Slice(uuid, arch):
            assert (uuid, arch) == (UUID_A_TEXT, "arm64")


def test_error_type() -> None:
    assert issubclass(MachOError, DsymfindError)


def test_import_stays_light() -> None:
    # Imported when a helper first checks a local hit: dataclasses (with inspect) would
    # cost more than the module. Its records are NamedTuples (typing) since a hit is
    # remembered and the hot path loads no Mach-O reader.
    code = "import sys, dsymfind.apple.macho; print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- malformed input: every lie is a MachOError with a message --------------------

ONE_SLICE = thin()
GOOD_AT_64 = (CPU_ARM64, 0, 64, len(ONE_SLICE))


def fat_with_payload(entries: Sequence[tuple[int, int, int, int]], *, is64: bool = False) -> bytes:
    header = fat_raw(entries, is64=is64)
    return header + bytes(64 - len(header)) + ONE_SLICE if len(header) <= 64 else header


MALFORMED: list[tuple[str, bytes, str]] = [
    ("empty", b"", "empty file"),
    ("three-bytes", b"\xcf\xfa\xed", "only 3 bytes"),
    ("elf", b"\x7fELF" + bytes(60), "not a Mach-O file"),
    ("truncated-64-header", thin()[:20], "truncated Mach-O header"),
    ("truncated-32-header", thin(is64=False)[:27], "truncated Mach-O header"),
    ("fat-no-arches", fat_raw([]), "no architectures"),
    ("fat-truncated-header", struct.pack(">I", FAT_MAGIC) + b"\x00", "truncated universal"),
    ("fat-10e9-arches", struct.pack(">II", FAT_MAGIC, 10**9) + bytes(64), "1000000000 arch"),
    ("fat64-10e9-arches", struct.pack(">II", FAT_MAGIC_64, 10**9) + bytes(64), "1000000000"),
    ("fat-33-arches", fat_raw([GOOD_AT_64] * 33), "33 architectures"),
    ("fat-table-truncated", fat_raw([GOOD_AT_64] * 3)[:40], "arch table"),
    ("fat-little-endian", struct.pack("<II", FAT_MAGIC, 1) + bytes(64), "little-endian"),
    ("slice-offset-beyond-file", fat_with_payload([(CPU_ARM64, 0, 10**6, 100)]), "past the end"),
    ("slice-size-beyond-file", fat_with_payload([(CPU_ARM64, 0, 64, 10**6)]), "past the end"),
    ("slice-size-2^64", fat_with_payload([(CPU_ARM64, 0, 64, 2**64 - 1)], is64=True), "past"),
    ("slice-offset-2^64", fat_with_payload([(CPU_ARM64, 0, 2**64 - 8, 32)], is64=True), "past"),
    ("slice-overlaps-fat-header", fat_with_payload([(CPU_ARM64, 0, 0, 64)]), "overlaps the univ"),
    ("slice-inside-arch-table", fat_with_payload([(CPU_ARM64, 0, 20, 40)]), "overlaps the univ"),
    ("slice-too-small", fat_with_payload([(CPU_ARM64, 0, 64, 8)]), "too small"),
    ("slices-overlap", fat_with_payload([GOOD_AT_64, (CPU_X86_64, 3, 90, 30)]), "overlap"),
    ("slice-not-macho", fat_raw([(CPU_ARM64, 0, 32, 32)]) + bytes(36), "not a Mach-O"),
    (
        "nested-fat",
        fat_with_payload([(CPU_ARM64, 0, 64, 60)])[:64] + fat_raw([GOOD_AT_64]) + bytes(32),
        "starts with ca fe ba be",
    ),
    (
        "fat-cputype-mismatch",
        fat_with_payload([(CPU_X86_64, 3, 64, len(ONE_SLICE))]),
        "slice 0 (x86_64): the slice's own Mach-O header says arm64",
    ),
    ("ncmds-huge", thin(ncmds=0xFFFFFFFF), "ncmds is 4294967295"),
    (
        "ncmds-more-than-present",
        thin([uuid_command()], ncmds=3, tail=bytes(64)),
        "but sizeofcmds (24 bytes) ends after 1 load commands",
    ),
    ("ncmds-runs-past", thin([uuid_command(), bytes(8)], ncmds=3), "cmdsize 0"),
    ("cmdsize-0", thin([load_command(0x99, bytes(8), size=0)]), "cmdsize 0"),
    ("cmdsize-4", thin([load_command(0x99, bytes(8), size=4)]), "cmdsize 4"),
    ("cmdsize-past-sizeofcmds", thin([load_command(0x99, bytes(8), size=64)]), "cmdsize 64"),
    ("cmdsize-2^32-1", thin([load_command(0x99, bytes(8), size=2**32 - 1)]), "does not fit"),
    ("sizeofcmds-beyond-file", thin(sizeofcmds=5000), "past the end of the Mach-O"),
    ("sizeofcmds-huge", thin(sizeofcmds=0xFFFFFFF0), "sizeofcmds is 4294967280"),
    ("lc-uuid-cmdsize-16", thin([load_command(LC_UUID, bytes(8))]), "LC_UUID) has cmdsize 16"),
    ("lc-uuid-cmdsize-8", thin([load_command(LC_UUID)]), "LC_UUID) has cmdsize 8"),
    ("two-lc-uuids", thin([uuid_command(), uuid_command(UUID_B)]), "second LC_UUID"),
    (
        "read-budget",
        fat(
            [
                thin([load_command(0x99, bytes(200_000))], cputype=CPU_ARM64, cpusubtype=n)
                for n in range(4)
            ]
        ),
        "read limit",
    ),
]


@pytest.mark.parametrize(("data", "message"), [pytest.param(d, m, id=i) for i, d, m in MALFORMED])
def test_malformed_bytes(data: bytes, message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(MachOError, match=re.escape(message)) as caught:
        read_slices_from_bytes(data)
    assert time.perf_counter() - start < 0.5
    assert str(caught.value).startswith("<memory>: ")


@pytest.mark.parametrize(("data", "message"), [pytest.param(d, m, id=i) for i, d, m in MALFORMED])
def test_malformed_files(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "crafted"
    path.write_bytes(data)
    with pytest.raises(MachOError, match=re.escape(message)) as caught:
        read_slices(path)
    assert str(caught.value).startswith(f"{path}: ")


# --- special files and I/O failures -----------------------------------------------


def returns_quickly(call: Callable[[], object], seconds: float = 5.0) -> BaseException | None:
    """Run `call` in a thread; fail if it blocks, else return what it raised."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test thread
            raised.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "read_slices blocked"
    return raised[0] if raised else None


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.perf_counter()
    exc = returns_quickly(lambda: read_slices(fifo))
    assert isinstance(exc, MachOError) and "FIFO" in str(exc) and str(fifo) in str(exc)
    assert time.perf_counter() - start < 0.5


def test_fifo_swapped_in_after_stat_does_not_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    regular = tmp_path / "regular"
    regular.write_bytes(b"x")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    real_stat = os.stat
    # The race: the path was a regular file when stat'ed, a FIFO when opened.
    monkeypatch.setattr(os, "stat", lambda path, **kw: real_stat(regular))
    exc = returns_quickly(lambda: read_slices(fifo))
    assert isinstance(exc, MachOError) and "FIFO" in str(exc)


def test_device_is_never_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_open(*args: object) -> int:
        raise AssertionError("opened a device")

    monkeypatch.setattr(os, "open", no_open)
    with pytest.raises(MachOError, match=r"^/dev/null: a character device"):
        read_slices("/dev/null")


def bind_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(), "a directory"),
        (lambda p: p.symlink_to("/dev/null"), "a character device"),
        (lambda p: p.symlink_to(p.parent / "missing"), "No such file"),
        (bind_socket, "a socket"),
    ],
    ids=["directory", "device", "dangling-symlink", "socket"],
)
def test_special_files(tmp_path: Path, make: Callable[[Path], None], message: str) -> None:
    path = tmp_path / "thing"
    make(path)
    with pytest.raises(MachOError, match=re.escape(message)) as caught:
        read_slices(path)
    assert str(path) in str(caught.value)


def test_path_types_and_nul(built: Path) -> None:
    assert read_slices(str(built / "hello")) == read_slices(built / "hello")
    with pytest.raises(MachOError, match="NUL"):
        read_slices("hel\0lo")


def test_no_permission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret"
    path.write_bytes(thin())
    path.chmod(0)
    if os.geteuid() != 0:  # root reads anyway; then simulate the refusal
        with pytest.raises(MachOError, match="Permission denied"):
            read_slices(path)

    def refuse(*args: object) -> int:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(MachOError, match=f"{re.escape(str(path))}: .*Permission denied"):
        read_slices(path)


def test_io_error_while_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bad-disk"
    path.write_bytes(thin())

    def failing(fd: int, length: int, offset: int) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "pread", failing)
    with pytest.raises(MachOError, match="Input/output error"):
        read_slices(path)


def test_file_shrinking_while_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "shrinking"
    path.write_bytes(thin())
    monkeypatch.setattr(os, "pread", lambda fd, length, offset: b"")
    with pytest.raises(MachOError, match="file ended early"):
        read_slices(path)


def test_short_preads_are_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "slow"
    path.write_bytes(thin())
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, length, offset: real(fd, min(length, 7), offset))
    assert read_slices(path)[0].uuid == UUID_A_TEXT


def test_no_descriptor_leaks(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    path.write_bytes(thin(ncmds=9))
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for _ in range(50):
        with pytest.raises(MachOError):
            read_slices(path)
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


# --- bounded reading --------------------------------------------------------------


@pytest.fixture
def pread_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """(offset, bytes returned) of every os.pread the reader makes."""
    log: list[tuple[int, int]] = []
    real = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        data = real(fd, length, offset)
        log.append((offset, len(data)))
        return data

    monkeypatch.setattr(os, "pread", counting)
    yield log


def sparse_copy(source: bytes, path: Path, size: int) -> Path:
    path.write_bytes(source)
    os.truncate(path, size)  # a hole: 200 MB that take no disk
    return path


BIG = 200 * 1024 * 1024


def test_200mb_thin_dsym_reads_one_page(
    built: Path, tmp_path: Path, pread_log: list[tuple[int, int]]
) -> None:
    dsym = dsym_dwarf(built, "hello").read_bytes()
    path = sparse_copy(dsym, tmp_path / "big", BIG)
    (found,) = read_slices(path)
    assert found.uuid == read_slices_from_bytes(dsym)[0].uuid and found.size == BIG
    assert sum(n for _, n in pread_log) <= 64 * 1024
    assert pread_log == [(0, macho.HEAD_READ_BYTES)]


def test_200mb_fat_dsym_reads_little(tmp_path: Path, pread_log: list[tuple[int, int]]) -> None:
    # Two ~100 MB slices at 32-byte boundaries, as dsymutil lays them out.
    first = thin([segment_command(), uuid_command()], filetype=MH_DSYM)
    second = thin([uuid_command(UUID_B)], cputype=CPU_X86_64, cpusubtype=3, filetype=MH_DSYM)
    half = BIG // 2
    table = fat_raw([(CPU_ARM64, 0, 64, half - 64), (CPU_X86_64, 3, half, half)])
    path = tmp_path / "big.dSYM"
    with path.open("wb") as handle:
        for at, data in ((0, table), (64, first), (half, second)):
            handle.seek(at)
            handle.write(data)
        handle.truncate(BIG)
    slices = read_slices(path)
    assert [s.uuid for s in slices] == [UUID_A_TEXT, "00010203-0405-0607-0809-0A0B0C0D0E0F"]
    assert sum(n for _, n in pread_log) <= 64 * 1024
    assert len(pread_log) == 2  # the first 4 KiB (header and slice 0), then slice 1


def test_long_load_commands_read_only_what_sizeofcmds_needs(
    tmp_path: Path, pread_log: list[tuple[int, int]]
) -> None:
    data = thin([load_command(0x99, bytes(10_000)), uuid_command()], tail=bytes(10**6))
    path = tmp_path / "long"
    path.write_bytes(data)
    assert read_slices(path)[0].uuid == UUID_A_TEXT
    assert sum(n for _, n in pread_log) == 32 + 10_008 + 24


# --- properties: anything in, slices or MachOError out ----------------------------


def check_total(data: bytes) -> None:
    try:
        slices = read_slices_from_bytes(data)
    except MachOError as exc:
        assert str(exc).startswith("<memory>: ") and len(str(exc)) > len("<memory>: ")
        return
    for found in slices:
        assert found.offset + found.size <= len(data)
        assert found.uuid is None or UPPER_DASHED.match(found.uuid)


SEEDS = [
    thin([segment_command(), uuid_command(), load_command(LC_ATOM_INFO, bytes(8))]),
    thin([uuid_command(endian=">")], cputype=CPU_PPC, endian=">", is64=False),
    fat([thin([uuid_command(UUID_B)], cputype=CPU_X86_64, cpusubtype=3), thin()]),
    fat([thin(), thin(cputype=CPU_X86_64, cpusubtype=3)], is64=True),
]


def real_seeds() -> list[bytes]:
    """The committed fixtures (tens of KiB each), when present."""
    if not FIXTURES.is_dir():
        return []
    return [p.read_bytes() for p in sorted(FIXTURES.rglob("*")) if p.is_file() and is_macho(p)]


ALL_SEEDS = SEEDS + real_seeds()
WORD_VALUES = [
    0,
    1,
    2,
    3,
    4,
    8,
    16,
    24,
    64,
    4096,
    2**31,
    2**32 - 1,
    FAT_MAGIC,
    MH_MAGIC_64,
    LC_UUID,
]


@settings(max_examples=300, deadline=200)
@given(st.binary(max_size=6000))
def test_random_bytes_only_raise_macho_error(data: bytes) -> None:
    check_total(data)


@settings(max_examples=300, deadline=200)
@given(st.data())
def test_mutated_headers_only_raise_macho_error(data: st.DataObject) -> None:
    seed = bytearray(data.draw(st.sampled_from(ALL_SEEDS), label="seed"))
    header = min(len(seed), 512)  # where the fat table, mach header and commands live
    edits = data.draw(st.lists(st.tuples(st.integers(0, header - 1), st.integers(0, 255)),
                               min_size=1, max_size=8), label="edits")  # fmt: skip
    for at, value in edits:
        seed[at] = value
    # Whole 32-bit words, biased to the first ten: the fat header and arch entry, or
    # the Mach-O header's ncmds/sizeofcmds, where lies matter most.
    word_index = st.integers(0, 9) | st.integers(0, header // 4 - 1)
    word_value = st.sampled_from(WORD_VALUES) | st.integers(0, 2**32 - 1)
    words = data.draw(st.lists(st.tuples(word_index, word_value), max_size=4), label="words")
    for index, value in words:
        seed[index * 4 : index * 4 + 4] = struct.pack("<I", value)
    cut = data.draw(st.integers(0, len(seed)), label="cut")
    check_total(bytes(seed[:cut] if data.draw(st.booleans(), label="truncate") else seed))


small_lie = st.integers(-3, 3) | st.sampled_from([2**32 - 1, 2**31, 10**6])
command = st.tuples(
    st.sampled_from([LC_UUID, LC_SEGMENT_64, LC_ATOM_INFO]) | st.integers(0, 2**32 - 1),
    st.integers(0, 40),  # payload bytes
    st.none() | st.integers(0, 64) | st.just(2**32 - 1),  # cmdsize, None: truthful
)


@settings(max_examples=300, deadline=200)
@given(
    commands=st.lists(command, max_size=6),
    ncmds_lie=small_lie,
    sizeofcmds_lie=small_lie,
    fat_wrap=st.booleans(),
)
def test_lying_load_commands_only_raise_macho_error(
    commands: list[tuple[int, int, int | None]],
    ncmds_lie: int,
    sizeofcmds_lie: int,
    fat_wrap: bool,
) -> None:
    parts = [load_command(cmd, bytes(n), size=size) for cmd, n, size in commands]
    ncmds = max(0, len(parts) + ncmds_lie) % 2**32
    sizeofcmds = max(0, sum(map(len, parts)) + sizeofcmds_lie) % 2**32
    data = thin(parts, ncmds=ncmds, sizeofcmds=sizeofcmds, tail=bytes(16))
    check_total(fat([data]) if fat_wrap else data)


def test_limits_are_consistent() -> None:
    assert macho.MAX_FAT_ARCHS * 32 + 8 <= macho.HEAD_READ_BYTES  # arch table in the first read
    assert macho.MAX_LOAD_COMMANDS_BYTES <= macho.MAX_TOTAL_READ_BYTES
