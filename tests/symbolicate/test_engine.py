"""Names, files and lines from symbolic's SymCache against llvm-symbolizer on the same
addresses: every instruction of the crashy fixtures, both architectures, inlined frames
and callers included; the address rules; demangling."""

from __future__ import annotations

import os

import pytest
from support.fixtures import FIXTURES
from support.processes import modules_loaded_running
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_EXEC_DWARF,
    CRASHY_EXEC_UUID,
    CRASHY_UUIDS,
    TEXT_VMADDR,
    instructions,
    return_addresses,
    symbolizer,
)

from dsymfind.symbolicate import symcaches
from dsymfind.symbolicate.engine import (
    UNKNOWN_START,
    ImageSymbols,
    Located,
    SourceLocations,
    demangle,
)


def symbols_of(dwarf, uuid):
    return ImageSymbols(symcaches.build(str(dwarf), uuid))


def as_oracle(located):
    """What llvm-symbolizer says of one frame, in its terms."""
    return (located.symbol, os.path.normpath(located.file or ""), located.line)


def oracle_frames(frames):
    return [(f["FunctionName"], os.path.normpath(f["FileName"]), f["Line"]) for f in frames]


@pytest.mark.parametrize(
    ("executable", "dwarf", "arch", "uuid"),
    [
        ("crashy", CRASHY_DWARF, "arm64", CRASHY_UUIDS["arm64"]),
        ("crashy", CRASHY_DWARF, "x86_64", CRASHY_UUIDS["x86_64"]),
        ("crashy_exec", CRASHY_EXEC_DWARF, "arm64", CRASHY_EXEC_UUID),
    ],
)
def test_every_instruction_resolves_as_llvm_symbolizer_does(executable, dwarf, arch, uuid):
    addresses = [address for address, _, _ in instructions(FIXTURES / executable, arch)]
    expected = symbolizer(dwarf, arch, addresses)
    engine = symbols_of(dwarf, uuid)
    compared = 0
    for address, frames in zip(addresses, expected, strict=True):
        if frames[0]["FunctionName"] == "<invalid>" or frames[0]["Line"] == 0:
            # Padding between functions (x86_64's nops after a ret): llvm-symbolizer names
            # the function before it, without a line; symbolic names none. No backtrace
            # holds such an address.
            continue
        got = [as_oracle(located) for located in engine.at(address - TEXT_VMADDR)]
        assert got == oracle_frames(frames), hex(address)
        compared += 1
    assert compared >= 30
    # The fixture does have an inlined frame and a C++ name, or this test proves little.
    assert any(len(frames) > 1 for frames in expected)


@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_the_direct_reader_says_what_symbolics_own_lookup_says(arch):
    from symbolic.symcache import SymCache  # symbolic's own wrapper: the oracle

    table = symcaches.build(str(CRASHY_DWARF), CRASHY_UUIDS[arch])
    direct = SourceLocations(table)
    symcache = SymCache.from_bytes(table.data())
    offsets = [a - TEXT_VMADDR for a, _, _ in instructions(FIXTURES / "crashy", arch)]
    for offset in [*offsets, 0, 1 << 40]:
        assert direct.located(offset, {}, bytes.decode) == located(symcache.lookup(offset))


def located(own):
    """symbolic's own entries as the direct reader makes them: the outer function's start
    for every entry, the names as the table has them."""
    start = own[-1].sym_addr if own and own[-1].sym_addr != UNKNOWN_START else None
    return [
        Located(s.symbol, start, s.full_path or None, s.line or None, i < len(own) - 1)
        for i, s in enumerate(own)
    ]


@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_callers_are_looked_up_inside_the_call_instruction(arch):
    """A return address is resolved as the call before it: the caller's line, as
    llvm-symbolizer gives for the call instruction's address."""
    returns = return_addresses(FIXTURES / "crashy", arch)
    calls = [address - (4 if arch == "arm64" else 1) for address in returns]
    expected = symbolizer(CRASHY_DWARF, arch, calls)
    engine = symbols_of(CRASHY_DWARF, CRASHY_UUIDS[arch])
    assert len(returns) >= 3
    for address, frames in zip(returns, expected, strict=True):
        caller = engine.frame(address - TEXT_VMADDR, position=1)
        assert [as_oracle(located) for located in caller] == oracle_frames(frames)


def test_frame_zero_is_looked_up_at_the_pc_itself():
    engine = symbols_of(CRASHY_DWARF, CRASHY_UUIDS["arm64"])
    first_of_trigger = next(
        a
        for a, _, _ in instructions(FIXTURES / "crashy", "arm64")
        if engine.at(a - TEXT_VMADDR) and engine.at(a - TEXT_VMADDR)[-1].symbol == "trigger"
    )
    offset = first_of_trigger - TEXT_VMADDR
    assert engine.frame(offset, position=0)[-1].symbol == "trigger"
    # As a return address the same offset belongs to the call before it: the function above.
    assert engine.frame(offset, position=1)[-1].symbol != "trigger"


def test_an_inlined_callee_comes_before_its_caller_with_the_callers_start():
    engine = symbols_of(CRASHY_DWARF, CRASHY_UUIDS["arm64"])
    chains = [engine.at(a - TEXT_VMADDR) for a, _, _ in instructions(FIXTURES / "crashy", "arm64")]
    inlined = next(chain for chain in chains if len(chain) == 2)
    assert [(frame.symbol, frame.inline) for frame in inlined] == [("twice", True), ("leaf", False)]
    assert inlined[0].start == inlined[1].start is not None


def test_cpp_names_are_demangled():
    engine = symbols_of(CRASHY_DWARF, CRASHY_UUIDS["x86_64"])
    names = {
        located.symbol
        for address, _, _ in instructions(FIXTURES / "crashy", "x86_64")
        for located in engine.at(address - TEXT_VMADDR)
    }
    assert "geo::Point::norm() const" in names


@pytest.mark.parametrize(
    ("mangled", "shown"),
    [
        ("_ZNK3geo5Point4normEv", "geo::Point::norm() const"),
        ("__ZNK3geo5Point4normEv", "geo::Point::norm() const"),
        ("$s4main3FooV3baryyF", "main.Foo.bar() -> ()"),
        ("_RNvCs1234_4test3foo", "test::foo"),
        ("leaf", "leaf"),
        ("R4main", "R4main"),  # a C name the demangler would read as Rust without `_`
        ("_Z\x00garbage", "_Z\x00garbage"),
        ("", ""),
    ],
)
def test_demangling_shows_what_cannot_be_demangled_as_it_is(mangled, shown):
    assert demangle(mangled) == shown


def test_a_report_of_c_names_never_loads_the_demangler():
    argv = ["symbolicate", "--image", str(CRASHY_EXEC_DWARF), "--load-address", "0"]
    argv.append(hex(return_addresses(FIXTURES / "crashy_exec", "arm64")[0] - TEXT_VMADDR))
    assert "pydemumble" not in modules_loaded_running(argv)


def test_a_slice_is_chosen_by_uuid_and_a_foreign_uuid_is_refused():
    for arch, uuid in CRASHY_UUIDS.items():
        assert symcaches.build(str(CRASHY_DWARF), uuid).arch == arch
    with pytest.raises(symcaches.UnusableDsym, match="holds no slice"):
        symcaches.build(str(CRASHY_DWARF), CRASHY_EXEC_UUID)
