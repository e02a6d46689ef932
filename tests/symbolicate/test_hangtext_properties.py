"""The `sample` and spindump readers under property-based fuzzing: CrashReportError, or a
report whose frames point into its images and that is written back byte for byte.

Inputs: byte-level mutations of a sample and a spindump (LF and CRLF), any bytes, and
lines of either grammar in any order. Every call goes through
fuzzing.targets.check_hang_text: only CrashReportError escapes, within 100 ms and 4 MiB.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets
from fuzzing.properties import mutated, property_settings

FORMS = ("sample", "spindump")
LINES = {
    name: [line + "\n" for line in targets.hang_seeds(name)[0].decode().splitlines()]
    for name in FORMS
}


@pytest.mark.parametrize("name", FORMS)
@property_settings(150)
@given(data=st.data())
def test_mutated_reports(name: str, data: st.DataObject) -> None:
    targets.check_hang_text(name, data.draw(mutated(targets.hang_seeds(name))))


@pytest.mark.parametrize("name", FORMS)
@property_settings(100)
@given(data=st.binary(max_size=2048))
def test_any_bytes(name: str, data: bytes) -> None:
    targets.check_hang_text(name, data)


@pytest.mark.parametrize("name", FORMS)
@property_settings(150)
@given(data=st.data())
def test_lines_in_any_order(name: str, data: st.DataObject) -> None:
    lines = data.draw(st.lists(st.sampled_from(LINES[name]), max_size=60))
    targets.check_hang_text(name, "".join(lines).encode())
