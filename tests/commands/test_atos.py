"""`dsymfind atos`: Apple's options and output, checked against llvm-symbolizer on the
same addresses of the crashy fixtures and against atos output that Apple published."""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, write_config
from support.served import url_path
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_UUIDS,
    SYMBOLIZER,
    TEXT_VMADDR,
    crashy_search_path,
    return_addresses,
    symbolizer,
)

from dsymfind.main import main

BUNDLE = str(FIXTURES / "crashy.dSYM")
BINARY = str(FIXTURES / "crashy")
# Per slice (llvm-objdump): an instruction of twice() inlined into leaf(), and the
# return address in trigger() after its call to leaf().
INLINED = {"arm64": 0x338, "x86_64": 0x379}
# Apple's Technical Note TN2151 ("Understanding and Analyzing Application Crash
# Reports", Listing 1) runs `atos -arch arm64 -o .../TheElements -l 0x1000e4000
# 0x00000001000effdc` and records this line: the form every named address takes.
APPLE_LISTING = (
    "-[AtomicElementViewController myTransitionDidStop:finished:context:] "
    "(in TheElements) (AtomicElementViewController.m:203)"
)
ATOS_LINE = re.compile(
    r"^(?P<symbol>.+) \(in (?P<image>[^)]+)\) \((?P<file>[^():]+):(?P<line>\d+)\)$"
)

needs_symbolizer = pytest.mark.skipif(SYMBOLIZER is None, reason="no llvm-symbolizer")


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return crashy_search_path(tmp_path, config_file)


@pytest.fixture
def no_dsyms(config_file: Path) -> None:
    write_config(config_file, "")


def atos(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    status = main(["atos", *argv])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def expected(frames: list[dict[str, Any]], image: str = "crashy") -> list[str]:
    """llvm-symbolizer's frames of one address (innermost first) as atos prints them."""
    return [
        f"{f['FunctionName']} (in {image}) ({os.path.basename(f['FileName'])}:{f['Line']})"
        for f in frames
    ]


def test_apples_published_line_has_the_form_the_verb_prints(local_dsyms, capsys):
    assert ATOS_LINE.match(APPLE_LISTING)
    # The same arithmetic as the listing's: the load address plus the frame's offset.
    load = 0x1000E4000
    status, out, _ = atos(
        "-arch", "arm64", "-o", str(CRASHY_DWARF), "-l", hex(load), hex(load + 0x398),
        capsys=capsys,
    )  # fmt: skip
    assert status == 0
    assert [ATOS_LINE.match(line)["image"] for line in out] == ["crashy"]  # type: ignore[index]


@needs_symbolizer
@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_file_addresses_of_each_slice_name_what_llvm_symbolizer_names(arch, local_dsyms, capsys):
    addresses = [TEXT_VMADDR + INLINED[arch], *return_addresses(FIXTURES / "crashy", arch)]
    reference = symbolizer(CRASHY_DWARF, arch, addresses)
    words = [hex(a) for a in addresses]
    # A return address past a function's last line (a noreturn call ends it) is in no
    # line range of the DWARF: llvm-symbolizer names it from the symbol table without a
    # line, the SymCache does not, and it is printed as it is (docs/symbolicate.md).
    bare = [not frames[-1]["Line"] for frames in reference]
    shown = [
        [word] if b else expected(f) for word, b, f in zip(words, bare, reference, strict=True)
    ]
    status, out, err = atos("-o", BINARY, "-arch", arch, *words, capsys=capsys)
    assert (status, err) == (2 if any(bare) else 0, "")
    # Without -i, the function the code is in: llvm-symbolizer's outermost frame.
    assert out == [lines[-1] for lines in shown]
    status, out, _ = atos("-o", BINARY, "-arch", arch, "-i", *words, capsys=capsys)
    assert out == [line for lines in shown for line in lines]
    assert len(reference[0]) == 2  # twice() inlined into leaf(): two lines


@needs_symbolizer
def test_load_address_slide_and_offset_read_the_same_addresses(local_dsyms, capsys):
    offset = INLINED["arm64"]
    frames = symbolizer(CRASHY_DWARF, "arm64", [TEXT_VMADDR + offset])[0]
    load = 0x104A5C000
    slide = load - TEXT_VMADDR
    for argv in (
        ["-l", hex(load), hex(load + offset)],
        ["-l", f"{load:x}", f"{load + offset:x}"],  # hex without 0x, as atos reads them
        ["-s", hex(slide), hex(load + offset)],
        ["-offset", hex(offset)],
        [hex(TEXT_VMADDR + offset)],
    ):
        status, out, _ = atos("-o", BUNDLE, "-arch", "arm64", "-i", *argv, capsys=capsys)
        assert (status, out) == (0, expected(frames)), argv


def test_a_uuid_is_found_as_the_helper_finds_it(local_dsyms, capsys):
    uuid = CRASHY_UUIDS["arm64"]
    status, out, _ = atos("-o", uuid.lower(), "-offset", "0x398", capsys=capsys)
    assert (status, out) == (0, ["geo::Point::norm() const (in crashy) (geometry.cpp:11)"])
    status, out, err = atos(
        "-o", "0BE7C0DE-0000-4000-8000-00000000DEAD", "--offline", "0x1", capsys=capsys
    )
    assert (status, out) == (1, [])
    assert err.count("\n") == 1 and "no dSYM for 0BE7C0DE" in err


def test_a_binary_without_a_dsym_is_named_by_its_own_symbols(no_dsyms, capsys):
    # x86_64's fail() (llvm-objdump): its start, and its call to stop() 8 bytes in.
    status, out, _ = atos(
        "-o", BINARY, "-arch", "x86_64", "--offline", "0x100000398", "0x100000370", capsys=capsys
    )
    assert status == 0
    assert out == ["fail (in crashy) + 8", "leaf (in crashy) + 0"]


def test_stdin_is_read_when_no_address_is_given(local_dsyms, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("0x100000398  0x100001000\n\n 0x100000398\n"))
    status, out, _ = atos("-o", BUNDLE, "-arch", "arm64", capsys=capsys)
    norm = "geo::Point::norm() const (in crashy) (geometry.cpp:11)"
    # An address no symbol covers is printed as it is, and makes the exit status 2.
    assert (status, out) == (2, [norm, "0x100001000", norm])


def test_full_paths_and_a_delimiter_between_inlined_frames(local_dsyms, capsys):
    address = hex(TEXT_VMADDR + INLINED["arm64"])
    status, out, _ = atos(
        "-o", BUNDLE, "-arch", "arm64", "-i", "-fullPath", "-d", " | ", address, capsys=capsys
    )
    assert status == 0
    assert out == ["twice (in crashy) (src/crashy.c:10) | leaf (in crashy) (src/crashy.c:14)"]


def test_a_bad_address_is_one_line_and_the_others_are_answered(local_dsyms, capsys):
    status, out, err = atos(
        "-o", BUNDLE, "-arch", "arm64", "-offset", "398", "0xzz", "-5", "398", capsys=capsys
    )
    assert status == 1
    assert out == ["geo::Point::norm() const (in crashy) (geometry.cpp:11)"] * 2
    assert err.splitlines() == [
        "dsymfind: error: not an address: '0xzz'",
        "dsymfind: error: not an address: '-5'",
    ]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-o", BUNDLE, "-arch", "ppc"], "no slice for -arch ppc (it has x86_64, arm64)"),
        (["-o", BUNDLE], "several slices: give -arch"),
        (["-o", "/no/such/file"], "/no/such/file: no such file, and not a UUID"),
        (["-o", BUNDLE, "-arch", "arm64", "-l", "0xq"], "not an address: '0xq'"),
    ],
)
def test_an_unusable_image_is_one_line_and_status_1(argv, said, local_dsyms, capsys):
    status, out, err = atos(*argv, "0x100000398", capsys=capsys)
    assert (status, out) == (1, [])
    assert err.count("\n") == 1 and said in err, err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-l", "0x1", "-s", "0x1"], "not allowed with argument"),
        (["-offs", "1"], "ambiguous option"),  # no abbreviation of -offset
    ],
)
def test_a_usage_mistake_is_one_line_and_status_1(argv, said, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["atos", "-o", BUNDLE, *argv])
    err = capsys.readouterr().err
    assert exited.value.code == 1 and err.count("\n") == 1 and said in err, err


def test_a_binary_s_own_symbols_never_stand_in_for_its_dsym(tmp_path, config_file, capsys):
    write_config(config_file, "")
    atos("-o", BINARY, "-arch", "arm64", "--offline", "0x100000398", capsys=capsys)
    crashy_search_path(tmp_path, config_file)
    status, out, _ = atos("-o", BINARY, "-arch", "arm64", "0x100000398", capsys=capsys)
    assert (status, out) == (0, ["geo::Point::norm() const (in crashy) (geometry.cpp:11)"])


def test_a_binary_s_dsym_is_fetched_from_the_servers_once(tmp_path, config_file, capsys):
    uuid = CRASHY_UUIDS["arm64"]
    root = tmp_path / "server"
    target = root / url_path(uuid).lstrip("/")
    target.parent.mkdir(parents=True)
    shutil.copyfile(CRASHY_DWARF, target)
    with ss.SymbolServer(root) as server:
        write_config(
            config_file, f"timeout = 10\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )
        for _ in range(2):  # the second from the cache
            status, out, err = atos(
                "-o", BINARY, "-arch", "arm64", "-i", hex(TEXT_VMADDR + 0x338), capsys=capsys
            )
            assert status == 0, err
            assert out == ["twice (in crashy) (crashy.c:10)", "leaf (in crashy) (crashy.c:14)"]
        assert server.count(url_path(uuid)) == 1
