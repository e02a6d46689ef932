"""jsoncodec reads and writes as json does: the same values, texts, errors and limits."""

from __future__ import annotations

import json
import math
import sys

import pytest

from dsymfind import jsoncodec

VALUES: list[object] = [
    None,
    True,
    False,
    0,
    -1,
    10**40,
    -(10**300),
    1.5,
    -0.0,
    1e300,
    5e-324,
    math.pi,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "plain",
    'quote " backslash \\ slash / controls \x00\x01\x1f\t\n\r\b\f \x7f',
    "ünïcödé ∑ 😀 \u2028\u2029",
    "lone surrogates \ud800 \udfff \udbff\udc00",
    [],
    {},
    [[]],
    {"a": {}},
    (1, "two", (3.0,)),
    [1, [2, [3, [4, {"deep": [None, True]}]]]],
    {"threads": [{"frames": [{"imageOffset": 4096, "imageIndex": 0, "symbol": "main"}]}]},
    {"é": "ü", "😀": ["\ud800"], "": {"": ""}},
    {3: "int key", 2.5: "float key", True: "bool key", None: "null key", math.inf: "inf key"},
    {False: 0, -7: [], 10**30: {}},
]
SETTINGS: list[dict[str, object]] = [
    {},
    {"ensure_ascii": False},
    {"separators": (",", ":")},
    {"separators": (",", ":"), "ensure_ascii": False},
    {"indent": 2},
    {"indent": 2, "ensure_ascii": False},
    {"indent": 0},
    {"indent": 4, "separators": (";", "= ")},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=repr)
def test_values_are_written_as_json_dumps_writes_them(settings: dict[str, object]) -> None:
    for value in VALUES:
        expected = json.dumps(value, check_circular=False, **settings)  # type: ignore[arg-type]
        assert jsoncodec.dumps(value, **settings) == expected, value  # type: ignore[arg-type]
    assert jsoncodec.dumps(VALUES, **settings) == json.dumps(VALUES, **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("indent", [None, 2])
def test_what_json_cannot_write_fails_as_with_json(indent: int | None) -> None:
    for value in ({1, 2}, {"a": [object()]}, {(1, 2): "tuple key"}, b"bytes"):
        with pytest.raises(TypeError) as expected:
            json.dumps(value, indent=indent)
        with pytest.raises(TypeError) as got:
            jsoncodec.dumps(value, indent=indent)
        assert str(got.value) == str(expected.value)


def test_what_it_writes_reads_back_as_json_reads_it() -> None:
    text = jsoncodec.dumps(VALUES[:-2])
    assert repr(jsoncodec.loads(text.encode())) == repr(json.loads(text))


TEXTS = [
    "{}",
    ' \n{"a": [1, 2.5, -0, 1e5, 1E-5, "x"], "b": {"c": null}} \t',
    '"\\u00e9\\ud83d\\ude00\\ud800"',
    "NaN",
    "[Infinity, -Infinity, NaN]",
    "12345678901234567890123456789",
    '{"a": 1, "a": 2}',
]
MALFORMED = [
    "",
    "   ",
    "{",
    '{"a": 1,',
    '{"a" 1}',
    '{"a": 1}}',
    "[1, 2",
    "[1,, 2]",
    '"unterminated',
    '"bad escape \\x"',
    '"control \x01 inside"',
    "tru",
    "{'single': 1}",
    "[1]\n\n  x",
    "01",
    "-",
    '{"a": 1} {"b": 2}',
]


def test_json_texts_read_as_json_loads_reads_them() -> None:
    for text in TEXTS:
        assert repr(jsoncodec.loads(text.encode())) == repr(json.loads(text)), text


def test_a_malformed_text_fails_where_and_why_json_says() -> None:
    for text in MALFORMED:
        with pytest.raises(json.JSONDecodeError) as expected:
            json.loads(text)
        with pytest.raises(jsoncodec.JSONSyntaxError) as got:
            jsoncodec.loads(text.encode())
        error = got.value
        assert (error.msg, error.pos, error.lineno) == (
            expected.value.msg,
            expected.value.pos,
            expected.value.lineno,
        ), text


def test_a_value_is_read_where_it_starts_as_raw_decode_reads_it() -> None:
    text = '{"meta": 1}\n{"body": [true]}\ntrailing'
    decoder = json.JSONDecoder()
    first = decoder.raw_decode(text, 0)
    assert jsoncodec.decode_at(text, 0) == first
    assert jsoncodec.decode_at(text, first[1] + 1) == decoder.raw_decode(text, first[1] + 1)


def test_nesting_past_the_recursion_limit_fails_as_with_json() -> None:
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(RecursionError):
        jsoncodec.loads(text.encode())


def test_a_number_past_the_digit_limit_fails_as_with_json() -> None:
    text = '{"n": ' + "7" * 5_000 + "}"
    assert sys.get_int_max_str_digits() < 5_000
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        jsoncodec.loads(text.encode())
    assert not isinstance(got.value, jsoncodec.JSONSyntaxError)
    assert str(got.value) == str(expected.value)
