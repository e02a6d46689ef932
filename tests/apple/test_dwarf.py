"""The bounded reader of a dSYM's first compile units, against llvm-dwarfdump's view of
real files built by clang, dsymutil and lld: DWARF 4 in a dSYM, DWARF 5 (string offsets)
in an object file, relative paths in the committed fixtures, a dSYM with many units, and
damaged bytes."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import git_builds
from support.fixtures import FIXTURES, dwarf_of, load_generator

from dsymfind.apple import dwarf, macho

_tools = load_generator()
CLANG = _tools.find_tool(_tools.TOOL_CANDIDATES["clang"])
DWARFDUMP = _tools.find_tool(_tools.TOOL_CANDIDATES["llvm-dwarfdump"])
_ATTRIBUTE = re.compile(r'^\s+(DW_AT_name|DW_AT_comp_dir)\s+\("(.*)"\)$')


def dwarfdump_units(path: Path) -> list[dwarf.Unit]:
    """Each compile unit's name and compile directory, as llvm-dwarfdump prints them."""
    out = subprocess.run(
        [DWARFDUMP, "--debug-info", str(path)], capture_output=True, text=True, check=True
    ).stdout
    units: list[dwarf.Unit] = []
    current: dict[str, str] | None = None
    for line in out.splitlines():
        if "DW_TAG_compile_unit" in line:
            current = {}
            units.append(dwarf.Unit(None, None))
        elif current is not None and not line.strip():
            current = None  # the unit's own attributes end at the first blank line
        elif current is not None and (found := _ATTRIBUTE.match(line)):
            current[found.group(1)] = found.group(2)
            units[-1] = dwarf.Unit(current.get("DW_AT_name"), current.get("DW_AT_comp_dir"))
    return units


def sources_in(folder: Path, count: int) -> Path:
    """A clone-like folder with `count` C files under Sources/."""
    (folder / "Sources").mkdir(parents=True)
    for number in range(count):
        text = f"int f{number}(int v) {{\n    return v + {number};\n}}\n"
        (folder / "Sources" / f"f{number}.c").write_text(text)
    (folder / "Sources" / "main.c").write_text("int main(void) {\n    return 0;\n}\n")
    return folder


def test_a_dsyms_first_units_are_what_llvm_dwarfdump_reads(tmp_path: Path) -> None:
    built = git_builds.build(sources_in(tmp_path / "ci", 2))
    dwarf_file = dwarf_of(built.dsym)
    units = dwarf.first_units(str(dwarf_file), built.uuid)
    assert units == dwarfdump_units(dwarf_file)
    assert {u.comp_dir for u in units} == {str(tmp_path / "ci")}
    assert all(u.name and u.name.startswith(str(tmp_path / "ci" / "Sources")) for u in units)


def test_dwarf_5_string_offsets_are_followed(tmp_path: Path) -> None:
    """clang's DWARF 5 names its strings by index (DW_FORM_strx1) into __debug_str_offs."""
    folder = sources_in(tmp_path / "ci", 1)
    obj = tmp_path / "f0.o"
    subprocess.run(
        [CLANG, "-target", "arm64-apple-macos11", *git_builds.CFLAGS, "-gdwarf-5", "-c",
         str(folder / "Sources" / "f0.c"), "-o", str(obj)],
        cwd=folder, check=True,
    )  # fmt: skip
    listed = subprocess.run(
        [DWARFDUMP, "--debug-info", "--show-form", str(obj)], capture_output=True, text=True
    ).stdout
    assert "DW_AT_comp_dir [DW_FORM_strx1]" in listed
    assert dwarf.first_units(str(obj)) == dwarfdump_units(obj)


def test_relative_compile_directories_come_back_as_written() -> None:
    dwarf_file = dwarf_of(FIXTURES / "hello.dSYM")
    assert dwarf.first_units(str(dwarf_file)) == dwarfdump_units(dwarf_file)


def test_only_the_first_units_are_read_in_a_few_small_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = git_builds.build(sources_in(tmp_path / "ci", 40))
    dwarf_file = dwarf_of(built.dsym)
    everything = dwarfdump_units(dwarf_file)
    assert len(everything) == 41
    reads: list[int] = []
    real_pread = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        data = real_pread(fd, length, offset)
        reads.append(len(data))
        return data

    monkeypatch.setattr(dwarf.os, "pread", counted)
    units = dwarf.first_units(str(dwarf_file), built.uuid)
    monkeypatch.undo()
    assert units == everything[: dwarf.MAX_UNITS]
    # The Mach-O header twice (identity, then sections); per unit its header and entry,
    # its abbreviation and two strings.
    assert len(reads) <= 2 + 4 * dwarf.MAX_UNITS
    assert sum(reads) <= dwarf.MAX_READ_BYTES


def test_a_file_without_dwarf_is_a_dwarf_error() -> None:
    with pytest.raises(dwarf.DwarfError, match="no compile unit"):
        dwarf.first_units(str(FIXTURES / "hello_stripped"))


def test_damaged_dwarf_gives_units_or_a_dwarf_error_and_nothing_else(tmp_path: Path) -> None:
    """Random bytes over __debug_info and __debug_abbrev: never another exception, never a
    read past the bound."""
    original = dwarf_of(FIXTURES / "universal.dSYM").read_bytes()
    target = tmp_path / "damaged"
    shutil.copyfile(dwarf_of(FIXTURES / "universal.dSYM"), target)
    with open(target, "rb") as f:
        first = macho.read_slices(target)[0]
        sections = macho.segment_sections(f.fileno(), first, dwarf.DWARF_SEGMENT)
    ranges = [sections[dwarf.INFO], sections[dwarf.ABBREV]]
    chooser = random.Random(7)
    outcomes = set()
    for _ in range(300):
        data = bytearray(original)
        start, size = chooser.choice(ranges)
        for _ in range(chooser.randint(1, 8)):
            data[start + chooser.randrange(min(size, 64))] = chooser.randrange(256)
        target.write_bytes(bytes(data))
        try:
            units = dwarf.first_units(str(target))
        except dwarf.DwarfError:
            outcomes.add("error")
        else:
            assert all(isinstance(u, dwarf.Unit) for u in units)
            outcomes.add("units")
    assert outcomes == {"error", "units"}


def test_a_form_indirect_a_thousand_times_over_is_a_dwarf_error() -> None:
    """DW_FORM_indirect names the form in the data: a run of them must end in DwarfError,
    not in a RecursionError that would sink a whole publish."""
    header = dwarf._Header(1 << 20, 4, 8, 4, 0)
    data = dwarf._Cursor(b"\x16" * 1010 + b"\x0b\x00")
    with pytest.raises(dwarf.DwarfError, match="indirect"):
        dwarf._value(data, 0x16, header, 0)
    assert dwarf._value(dwarf._Cursor(b"\x0b\x2a"), 0x16, header, 0) == (0x0B, 0x2A)
