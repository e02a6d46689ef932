"""Which address of a frame is looked up: the pc as it is, a return address inside its call."""

from __future__ import annotations

from dsymfind.symbolicate.addresses import lookup_offset, return_address_step


def test_a_return_address_is_looked_up_inside_its_call() -> None:
    for arch in ("arm64", "ARM64E", "arm64_32", "armv7k"):
        assert return_address_step(arch) == 4, arch
    for arch in ("x86_64", "x86_64h", "i386", ""):
        assert return_address_step(arch) == 1, arch


def test_the_pc_is_looked_up_as_it_is_and_offset_zero_returns_to_nothing() -> None:
    step = return_address_step("arm64")
    assert lookup_offset(0x338, 0, step) == 0x338
    assert lookup_offset(0x380, 1, step) == 0x37C
    assert lookup_offset(0, 0, step) == 0
    assert lookup_offset(3, 2, step) is None
    assert lookup_offset(4, 2, step) == 0
