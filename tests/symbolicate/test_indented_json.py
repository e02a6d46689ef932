"""symbolicate's indented JSON writer (ips.indented) against json.dumps(indent=2), which it
stands in for: the same text for any JSON value, and for what a report's JSON holds."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dsymfind.symbolicate.ips import indented

PLAIN = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
KEYS = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
VALUES = st.recursive(
    PLAIN,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_any_value_is_written_as_json_writes_it_indented(value: object) -> None:
    assert indented(value) == json.dumps(value, indent=2)


def test_a_report_shaped_document_is_written_as_json_writes_it() -> None:
    row = {
        "image": "UIKitCore",
        "uuid": "4C4C44AE-5555-3144-A109-7B69DF888F4D",
        "address": 6459244588,
        "symbol": '-[UIApplication _run] \u2014 caf\u00e9 "quoted", \\ slash',
        "offset": 8,
        "file": None,
        "line": None,
        "inline": False,
        "symbol_table": True,
        "context": {"first": 3, "lines": ['a, "b"', "", "\t\n"]},
    }
    document = {
        "images": [{"uuid": None, "name": "x", "status": "system", "verdict": "absent"}],
        "diagnostics": [{"kind": None, "diagnosticMetaData": {}, "timeStampBegin": 1.5}],
        "threads": [{"index": 0, "frames": [row, {}, []]}, {"frames": []}],
        "empty": {},
        "numbers": [0, -1, 2**70, 0.1, math.inf, -math.inf],
    }
    assert indented(document) == json.dumps(document, indent=2)


# Text that looks like the border between two objects as the C encoder first writes it.
BORDERS = st.sampled_from(["}", "},", "},\n", "},\n    {", "{", "[", "]"]) | st.text()
FLAT_OBJECTS = st.lists(
    st.dictionaries(st.text() | BORDERS, PLAIN | BORDERS, min_size=1, max_size=4),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(FLAT_OBJECTS, st.integers(min_value=0, max_value=3))
def test_a_list_of_flat_objects_is_written_as_json_writes_it(
    objects: list[dict[str, object]], depth: int
) -> None:
    value: object = objects
    for _ in range(depth):  # as deep as `usedImages` stands in a report, and deeper
        value = {"usedImages": value}
    assert indented(value) == json.dumps(value, indent=2)
