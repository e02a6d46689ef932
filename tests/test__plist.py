"""The helper's hand-written plist writer against plistlib, the reference parser."""

from __future__ import annotations

import plistlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsymfind import _plist

XML_TEXT = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="".join(map(chr, range(32))) + "\ufffe\uffff",
    )
    | st.sampled_from(["\t", "\n", "\r", "&", "<", ">", "]", '"', "'"])
)


@given(st.dictionaries(XML_TEXT, st.dictionaries(XML_TEXT, XML_TEXT, max_size=5), max_size=5))
@settings(max_examples=300, deadline=None)
def test_output_parses_back_to_the_same_values(document: dict[str, dict[str, str]]) -> None:
    rendered = _plist.render(document)
    assert rendered.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    assert plistlib.loads(rendered) == document


@pytest.mark.parametrize("bad", ["a\x00b", "\x1b[31m", "tab\x0bvt", "\ud800", "\ufffe"])
def test_unrepresentable_text_is_refused(bad: str) -> None:
    assert not _plist.representable(bad)
    with pytest.raises(_plist.UnrepresentableError):
        _plist.render({"K": {"DBGDSYMPath": bad}})


def test_empty_answer_is_an_empty_dict() -> None:
    assert plistlib.loads(_plist.render({})) == {}
    assert b"<dict/>" in _plist.render({})
