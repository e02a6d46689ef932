"""A real Apple-built Swift dSYM (tests/fixtures/apple/SentrySwift.dSYM, arm64): names,
inline chains and lines against llvm-symbolizer on the same addresses, and demangling.

llvm-symbolizer 14 does not demangle Swift (`--demangle` leaves `_T` names as they are),
so it is the oracle for the mangled names and lines; the demangled forms are checked for
what a reader recognises: the module and type names, no mangled prefix left, and a name
the demangler cannot read shown as it is.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from support.fixtures import TESTS, dwarf_of
from support.symbolication import SYMBOLIZER

from dsymfind.symbolicate import symcaches
from dsymfind.symbolicate.engine import ImageSymbols, SourceLocations, demangle

SWIFT_DWARF = dwarf_of(TESTS / "fixtures" / "apple" / "SentrySwift.dSYM")
SWIFT_UUID = "0285884D-3DE9-3051-B23A-63B48BF99F35"
# Its __text section (llvm-objdump --macho --private-headers): __TEXT is at 0.
TEXT_START, TEXT_SIZE = 0x77D4, 0x635B0
# Every 1028th byte of the code: about 400 addresses, spread over every source file.
STRIDE = 0x404
MANGLED_PREFIXES = ("_T", "$s", "$S", "_$s")


@pytest.fixture(scope="module")
def swift_table():
    return symcaches.build(str(SWIFT_DWARF), SWIFT_UUID)


def oracle(addresses: list[int]) -> list[list[tuple[str, int]]]:
    """llvm-symbolizer's (mangled name, line) of each address, innermost first."""
    assert SYMBOLIZER is not None
    out = subprocess.run(
        [SYMBOLIZER, "--inlines", "--output-style=JSON", "--no-demangle", f"--obj={SWIFT_DWARF}"],
        input="".join(f"{address:#x}\n" for address in addresses),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    symbols = [json.loads(line)["Symbol"] for line in out.splitlines() if line.strip()]
    return [[(f["FunctionName"], f["Line"]) for f in frames] for frames in symbols]


def test_names_and_lines_are_llvm_symbolizers(swift_table):
    addresses = list(range(TEXT_START, TEXT_START + TEXT_SIZE, STRIDE))
    locations = SourceLocations(swift_table)
    compared = 0
    for address, expected in zip(addresses, oracle(addresses), strict=True):
        entries = locations.located(address, {}, bytes.decode)
        got = [(location.symbol, location.line or 0) for location in entries]
        if not got and all(line == 0 for _, line in expected):
            # Code without line information (thunks, metadata accessors): llvm-symbolizer
            # names it from the symbol table, symbolic's table holds nothing there.
            continue
        assert got == expected, hex(address)
        compared += 1
    assert compared >= 350
    assert any(len(frames) > 3 for frames in oracle(addresses))  # deep inline chains


def test_swift_names_are_demangled(swift_table):
    engine = ImageSymbols(swift_table)
    names = {
        located.symbol
        for address in range(TEXT_START, TEXT_START + TEXT_SIZE, STRIDE)
        for located in engine.at(address)
    }
    assert "SentrySwift.SentryClient.startCrashHandler() -> ()" in names
    assert (
        "SentrySwift.BinaryImage.init(appleCrashBinaryImagesDict: "
        "[Swift.String : Swift.AnyObject]) -> SentrySwift.BinaryImage?"
    ) in names
    left = [name for name in names if name.startswith(MANGLED_PREFIXES)]
    # What the demangler cannot read is shown as it is: a few at most, and mangled still.
    assert len(left) <= 3 and all(demangle(name) == name for name in left), left
    # Demangled Swift names carry their module: this one's, or the standard library's.
    assert sum("Swift." in name for name in names) > len(names) * 3 // 4


def test_an_inline_chain_is_demangled_frame_by_frame(swift_table):
    chain = ImageSymbols(swift_table).at(0x11874)
    assert [located.inline for located in chain] == [True, True, True, False]
    outer = chain[-1]
    assert outer.symbol.startswith("SentrySwift.(OSContext in _") and outer.line == 75
    assert outer.symbol.endswith(").serialized.getter : [Swift.String : Any]")
    assert all(located.file and located.file.endswith("/Contexts.swift") for located in chain)
    assert "of Swift.Array.append(A) -> ()" in chain[2].symbol
    assert not any(located.symbol.startswith(MANGLED_PREFIXES) for located in chain)
