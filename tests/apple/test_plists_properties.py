"""The plist reader under property-based fuzzing: UnreadablePlist or a value every writer
takes, quickly and lightly.

Inputs: byte-level mutations of real plists (Apple's, and one value of every type in
plistlib's XML and binary forms), any bytes, any plist value written in either form, and
XML element soup (plist tags in any order and nesting, with text that is nearly right).
Every call goes through fuzzing.targets.check_plist_reader: only UnreadablePlist escapes,
within 100 ms and 4 MiB, and what is read plistlib writes back in both forms.
"""

from __future__ import annotations

import datetime
import plistlib
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets
from fuzzing.properties import mutated, property_settings

SEEDS = targets.plist_reader_seeds()
# What XML 1.0 carries: no surrogates, control characters or U+FFFE/U+FFFF.
xml_text = st.text(
    st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters="\ufffe\uffff"),
    max_size=20,
)
scalars = (
    xml_text
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats()
    | st.booleans()
    | st.binary(max_size=20)
    | st.datetimes(datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31))
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(xml_text, inner, max_size=4),
    max_leaves=20,
)


@property_settings(300)
@given(data=mutated(SEEDS, focus=1024))
def test_mutated_plists(data: bytes) -> None:
    targets.check_plist_reader(data)


@property_settings(200)
@given(data=st.binary(max_size=300))
def test_any_bytes(data: bytes) -> None:
    targets.check_plist_reader(data)


@property_settings(200)
@given(data=st.binary(max_size=200).map(lambda tail: b"bplist00" + tail))
def test_any_binary_plist_body(data: bytes) -> None:
    targets.check_plist_reader(data)


@property_settings(200)
@given(value=values, binary=st.booleans())
def test_any_value_written_by_plistlib_reads_back(value: object, binary: bool) -> None:
    form = plistlib.FMT_BINARY if binary else plistlib.FMT_XML
    written = plistlib.dumps(value, fmt=form)
    assert targets.check_plist_reader(written) is not None


@property_settings(300)
@given(data=st.binary(max_size=40).map(targets.plist_from_words))
def test_element_soup(data: bytes) -> None:
    targets.check_plist_reader(data)
