"""The Mach-O reader refuses files cut short or whose load commands point past their end.

A truncated dSYM keeps its header and UUID intact, so the identity alone does not show
the cut: the reader checks that every segment, section and table its load commands
name lies inside the slice. Every case starts from a real fixture (tests/fixtures/macho)
and, where LLVM 14 is installed, is held against `llvm-dwarfdump --uuid`'s verdict.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fixtures import FIXTURES, HELLO_UUID, UNIVERSAL_UUIDS, UUIDS, dwarf_of

from dsymfind.apple import macho

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets
from fuzzing.properties import property_settings

DWARFDUMP = shutil.which("llvm-dwarfdump-14") or shutil.which(
    "llvm-dwarfdump", path="/usr/lib/llvm-14/bin"
)

# Load commands and section types, spelled out so the tests do not share the reader's tables.
LC_SYMTAB, LC_DYSYMTAB, LC_SEGMENT_64 = 0x2, 0xB, 0x19
LC_CODE_SIGNATURE, LC_FUNCTION_STARTS, LC_DYLD_INFO_ONLY = 0x1D, 0x26, 0x80000022
S_ZEROFILL = 0x1
HEADER_64 = 32  # sizeof(mach_header_64)
SEGMENT_64 = 72  # sizeof(segment_command_64)
SECTION_64 = 80  # sizeof(section_64)

THIN_DSYMS = ["hello.dSYM", "hello_arm64e.dSYM", "libgreet.dylib.dSYM"]
REAL_FILES = targets.macho_seeds()
THIN = {
    str(p.relative_to(FIXTURES)): p.read_bytes()
    for p in REAL_FILES
    if p.read_bytes()[:4] == b"\xcf\xfa\xed\xfe"
}


# --- reading the fixtures' load commands, independently of the reader ----------------------


def load_commands(data: bytes) -> list[tuple[int, int]]:
    """(cmd, offset) of each load command of a thin little-endian 64-bit Mach-O."""
    ncmds, sizeofcmds = struct.unpack_from("<II", data, 16)
    found, at = [], HEADER_64
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from("<II", data, at)
        found.append((cmd, at))
        at += cmdsize
    assert at == HEADER_64 + sizeofcmds
    return found


def commands_end(data: bytes) -> int:
    return HEADER_64 + struct.unpack_from("<I", data, 20)[0]


def command_at(data: bytes, wanted: int) -> int:
    return next(at for cmd, at in load_commands(data) if cmd == wanted)


def segment_at(data: bytes, name: str) -> int:
    return next(
        at
        for cmd, at in load_commands(data)
        if cmd == LC_SEGMENT_64 and data[at + 8 : at + 24].rstrip(b"\0") == name.encode()
    )


def section_at(data: bytes, segname: str, sectname: str) -> int:
    segment = segment_at(data, segname)
    (nsects,) = struct.unpack_from("<I", data, segment + 64)
    for number in range(nsects):
        at = segment + SEGMENT_64 + number * SECTION_64
        if data[at : at + 16].rstrip(b"\0") == sectname.encode():
            return at
    raise AssertionError(f"no section {segname},{sectname}")


def patched(data: bytes, at: int, layout: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(layout, out, at, value)
    return bytes(out)


def word(data: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", data, at)[0])


def llvm_verdict(path: Path) -> subprocess.CompletedProcess[str]:
    assert DWARFDUMP is not None
    return subprocess.run(
        [DWARFDUMP, "--uuid", str(path)], capture_output=True, text=True, check=False
    )


def assert_llvm_refuses(path: Path) -> None:
    done = llvm_verdict(path)
    assert done.returncode != 0, done.stdout
    assert "truncated or malformed" in done.stderr, done.stderr


def refusal(data: bytes) -> str:
    with pytest.raises(macho.MachOError) as caught:
        macho.read_slices_from_bytes(data)
    return str(caught.value)


# --- cut files ---------------------------------------------------------------------------


@pytest.mark.parametrize("bundle", THIN_DSYMS)
def test_the_first_half_of_a_real_dsym_is_refused(bundle: str, tmp_path: Path) -> None:
    whole = dwarf_of(FIXTURES / bundle).read_bytes()
    half = tmp_path / "half"
    half.write_bytes(whole[: len(whole) // 2])
    assert macho.read_slices_from_bytes(half.read_bytes()[:4096], file_size=len(whole))  # intact

    with pytest.raises(macho.MachOError) as caught:
        macho.read_slices(half)

    dwarf = segment_at(whole, "__DWARF")
    end = sum(struct.unpack_from("<QQ", whole, dwarf + 40))  # fileoff + filesize
    assert re.fullmatch(
        rf"{re.escape(str(half))}: truncated or malformed: segment __DWARF \(load command \d+\) "
        rf"ends at byte {end}, past the file's {len(whole) // 2} bytes",
        str(caught.value),
    )
    if DWARFDUMP is not None:
        assert_llvm_refuses(half)


def test_the_first_half_of_a_universal_dsym_is_refused() -> None:
    whole = dwarf_of(FIXTURES / "universal.dSYM").read_bytes()
    assert "extends past the end of the file" in refusal(whole[: len(whole) // 2])


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_real_fixture_less_its_last_byte_is_refused(path: Path, tmp_path: Path) -> None:
    """Thin, universal, fat64, arm64e, executables, stripped, dylib: each one ends in a range."""
    cut = tmp_path / path.name
    cut.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(macho.MachOError):
        macho.read_slices(cut)
    if DWARFDUMP is not None:
        done = llvm_verdict(cut)
        assert done.returncode != 0 and "truncated or malformed" in done.stderr, done


@property_settings(100)
@given(name=st.sampled_from(sorted(THIN)), where=st.floats(0, 1, exclude_max=True))
def test_a_thin_fixture_cut_anywhere_behind_its_load_commands_is_refused(
    name: str, where: float
) -> None:
    seed = THIN[name]
    start = commands_end(seed)
    cut = start + int(where * (len(seed) - start))
    assert targets.check_macho(seed[:cut]) is None


@pytest.mark.parametrize("relative", sorted(UUIDS))
def test_every_committed_fixture_still_reads_whole(relative: str) -> None:
    slices = macho.read_slices(FIXTURES / relative)
    expected = [(u["arch"], u["uuid"]) for u in UUIDS[relative]["uuids"]]
    assert [(s.arch, s.uuid) for s in slices] == expected
    assert {s.filetype_name for s in slices} == {UUIDS[relative]["filetype"]}


def test_a_file_given_as_its_head_is_judged_against_the_whole_size() -> None:
    whole = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
    head = whole[:4096]  # the header and load commands
    assert macho.read_slices_from_bytes(head, file_size=len(whole))[0].uuid == HELLO_UUID
    with pytest.raises(macho.MachOError, match="segment __DWARF"):
        macho.read_slices_from_bytes(head, file_size=len(whole) - 1)


def test_the_check_reads_the_load_commands_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Header-sized: one 4 KiB read for the file, at most one more per slice, never contents."""
    read: list[int] = []
    real_pread = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        read.append(length)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(macho.os, "pread", counting)
    for path in REAL_FILES:
        read.clear()
        slices = macho.read_slices(path)
        assert sum(read) <= macho.HEAD_READ_BYTES * (1 + len(slices)), path


# --- load commands pointing past the end: refused, naming the range, as LLVM refuses them --


def mutate_symtab_strsize(data: bytes) -> bytes:
    return patched(data, command_at(data, LC_SYMTAB) + 20, "<I", len(data))


def mutate_symtab_nsyms(data: bytes) -> bytes:
    return patched(data, command_at(data, LC_SYMTAB) + 12, "<I", len(data) // 16)


def mutate_dysymtab_indirect(data: bytes) -> bytes:
    return patched(data, command_at(data, LC_DYSYMTAB) + 8 + 13 * 4, "<I", len(data))


def mutate_dyld_info_export(data: bytes) -> bytes:
    return patched(data, command_at(data, LC_DYLD_INFO_ONLY) + 8 + 9 * 4, "<I", len(data))


def mutate_code_signature(data: bytes) -> bytes:
    at = command_at(data, LC_CODE_SIGNATURE)
    return patched(data, at + 12, "<I", word(data, at + 12) + 1)  # one byte past the end


def mutate_function_starts(data: bytes) -> bytes:
    return patched(data, command_at(data, LC_FUNCTION_STARTS) + 12, "<I", len(data))


def mutate_text_size(data: bytes) -> bytes:
    return patched(data, section_at(data, "__TEXT", "__text") + 40, "<Q", len(data))


def mutate_text_relocations(data: bytes) -> bytes:
    return patched(data, section_at(data, "__TEXT", "__text") + 60, "<I", len(data) // 8 + 1)


def mutate_linkedit_filesize(data: bytes) -> bytes:
    return patched(data, segment_at(data, "__LINKEDIT") + 48, "<Q", len(data))


def mutate_symtab_stroff(data: bytes) -> bytes:
    return patched(data, command_at(data, LC_SYMTAB) + 16, "<I", len(data))


BROKEN = [
    ("hello", mutate_symtab_strsize, "LC_SYMTAB's string table"),
    ("hello", mutate_symtab_nsyms, "LC_SYMTAB's symbol table"),
    ("hello", mutate_dysymtab_indirect, "LC_DYSYMTAB's indirect symbol table"),
    ("hello", mutate_dyld_info_export, "LC_DYLD_INFO_ONLY's export info"),
    ("hello", mutate_code_signature, "LC_CODE_SIGNATURE's data"),
    ("libgreet.dylib", mutate_function_starts, "LC_FUNCTION_STARTS's data"),
    ("hello", mutate_text_size, "section __TEXT,__text"),
    ("hello", mutate_text_relocations, "the relocations of section __TEXT,__text"),
    ("hello.dSYM", mutate_linkedit_filesize, "segment __LINKEDIT"),
    ("hello.dSYM", mutate_symtab_stroff, "LC_SYMTAB's string table"),
]


def sections_of(data: bytes) -> int:
    return sum(word(data, at + 64) for cmd, at in load_commands(data) if cmd == LC_SEGMENT_64)


def test_the_structure_check_makes_no_python_call_per_section() -> None:
    """`dsymfind index` reads thousands of dSYMs of dozens of sections each: the sections
    are checked in one loop per segment, not one function (or three) per section."""
    path = dwarf_of(FIXTURES / "hello.dSYM")
    sections = sections_of(path.read_bytes())
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code.co_filename == macho.__file__:
            calls[frame.f_code.co_name] += 1

    sys.setprofile(profile)
    try:
        macho.read_slices(path)
    finally:
        sys.setprofile(None)
    assert sections > 10
    assert calls and max(calls.values()) < sections, calls


@pytest.mark.parametrize("name", ["hello.dSYM", "hello"])
def test_the_checks_unpack_the_fields_they_read_and_no_names(name: str) -> None:
    """Checking a section unpacks five numbers, not its two names as bytes objects (a name
    is unpacked only for the message that refuses it): on every segment and section of a
    real dSYM and executable, they are the values the full layouts give."""
    source = FIXTURES / name
    data = dwarf_of(source).read_bytes() if source.is_dir() else source.read_bytes()
    _, segment, section, lean_segment, lean_section = macho._SEGMENT_LAYOUTS["<"][LC_SEGMENT_64]
    segments = [at for cmd, at in load_commands(data) if cmd == LC_SEGMENT_64]
    assert segments and lean_section.size == section.size
    for at in segments:
        full = segment.unpack_from(data, at + 8)
        assert lean_segment.unpack_from(data, at + 8) == (full[3], full[4], full[7])
        first = at + 8 + segment.size
        for number in range(full[7]):
            fields = section.unpack_from(data, first + number * section.size)
            lean = lean_section.unpack_from(data, first + number * section.size)
            assert lean == (fields[3], fields[4], fields[6], fields[7], fields[8])
            assert all(isinstance(value, int) for value in lean)


@pytest.mark.parametrize(
    ("name", "mutate", "named"), BROKEN, ids=[f"{n}-{m.__name__[7:]}" for n, m, _ in BROKEN]
)
def test_a_range_past_the_end_is_refused_by_name(
    name: str, mutate: Callable[[bytes], bytes], named: str, tmp_path: Path
) -> None:
    source = FIXTURES / name
    data = mutate(dwarf_of(source).read_bytes() if source.is_dir() else source.read_bytes())
    message = refusal(data)
    assert message.startswith(f"<memory>: truncated or malformed: {named} (load command ")
    assert f"past the file's {len(data)} bytes" in message
    if DWARFDUMP is not None:
        (tmp_path / name).write_bytes(data)
        assert_llvm_refuses(tmp_path / name)


def test_a_broken_slice_of_a_universal_file_is_named() -> None:
    data = bytearray((FIXTURES / "universal").read_bytes())
    offset, size = struct.unpack_from(">II", data, 8 + 20 + 8)  # the second (arm64) entry
    data[offset : offset + size] = mutate_code_signature(bytes(data[offset : offset + size]))
    assert re.match(
        r"<memory>: slice 1 \(arm64\) at offset \d+: truncated or malformed: "
        r"LC_CODE_SIGNATURE's data \(load command \d+\) ends at byte \d+, past the slice's "
        rf"{size} bytes",
        refusal(bytes(data)),
    )


# --- what occupies no bytes of the file is not held to it --------------------------------


def x86_64_dsym_slice() -> bytes:
    """The x86_64 slice of universal.dSYM as a thin file: its __TEXT keeps the __eh_frame."""
    data = dwarf_of(FIXTURES / "universal.dSYM").read_bytes()
    offset, size = struct.unpack_from(">II", data, 8 + 8)  # the first entry
    return data[offset : offset + size]


def test_a_dsyms_copies_of_the_executables_sections_are_not_held_to_the_file(
    tmp_path: Path,
) -> None:
    """dsymutil keeps __text with offset 0 and its full size, in a __TEXT with a filesize."""
    data = x86_64_dsym_slice()
    segment, text = segment_at(data, "__TEXT"), section_at(data, "__TEXT", "__text")
    assert struct.unpack_from("<QQ", data, segment + 40)[1] > 0  # filesize
    assert word(data, text + 48) == 0  # offset
    # A 1 GiB __text, as in a large app (in a __TEXT as large, as LLVM checks addresses).
    big_app = patched(patched(data, segment + 32, "<Q", 1 << 31), text + 40, "<Q", 1 << 30)
    (found,) = macho.read_slices_from_bytes(big_app)
    assert (found.uuid, found.filetype_name) == (UNIVERSAL_UUIDS["x86_64"], "MH_DSYM")
    if DWARFDUMP is not None:
        (tmp_path / "big").write_bytes(big_app)
        done = llvm_verdict(tmp_path / "big")
        assert done.returncode == 0 and UNIVERSAL_UUIDS["x86_64"] in done.stdout, done


def test_a_zerofill_section_is_not_held_to_the_file() -> None:
    data = (FIXTURES / "hello").read_bytes()
    section = section_at(data, "__DATA", "__data")
    zerofill = patched(data, section + 64, "<I", S_ZEROFILL)
    bss = patched(zerofill, section + 40, "<Q", len(data) * 4)
    assert macho.read_slices_from_bytes(bss)[0].uuid == HELLO_UUID


# --- exact boundaries: a range may end at the file's last byte, not one byte further ------


def text_moved_to_the_end(data: bytes) -> bytes:
    """hello with __TEXT,__text's contents (its size and address kept) moved to bytes
    appended to the file: the section ends at the file's last byte and overlaps nothing."""
    section = section_at(data, "__TEXT", "__text")
    size = struct.unpack_from("<Q", data, section + 40)[0]
    return patched(data, section + 48, "<I", len(data)) + bytes(size)


def text_relocations_at_the_end(data: bytes) -> bytes:
    """hello with __TEXT,__text given one relocation entry, in 8 bytes appended to the file."""
    section = section_at(data, "__TEXT", "__text")
    moved = patched(patched(data, section + 56, "<I", len(data)), section + 60, "<I", 1)
    return moved + bytes(8)


BOUNDARIES = [
    pytest.param(text_moved_to_the_end, "section __TEXT,__text", id="contents"),
    pytest.param(
        text_relocations_at_the_end, "the relocations of section __TEXT,__text", id="relocations"
    ),
]


@pytest.mark.parametrize(("build", "named"), BOUNDARIES)
def test_a_section_range_ending_at_the_files_last_byte_is_read(
    build: Callable[[bytes], bytes], named: str, tmp_path: Path
) -> None:
    fits = build((FIXTURES / "hello").read_bytes())
    assert macho.read_slices_from_bytes(fits)[0].uuid == HELLO_UUID
    if DWARFDUMP is not None:
        (tmp_path / "fits").write_bytes(fits)
        done = llvm_verdict(tmp_path / "fits")
        assert done.returncode == 0 and HELLO_UUID in done.stdout, done


@pytest.mark.parametrize(("build", "named"), BOUNDARIES)
def test_a_section_range_ending_one_byte_past_the_file_is_refused(
    build: Callable[[bytes], bytes], named: str, tmp_path: Path
) -> None:
    past = build((FIXTURES / "hello").read_bytes())[:-1]  # the range's last byte cut off
    message = refusal(past)
    assert message.startswith(f"<memory>: truncated or malformed: {named} (load command ")
    assert f"ends at byte {len(past) + 1}, past the file's {len(past)} bytes" in message
    if DWARFDUMP is not None:
        (tmp_path / "past").write_bytes(past)
        assert_llvm_refuses(tmp_path / "past")
