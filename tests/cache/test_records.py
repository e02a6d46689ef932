"""A download's status record, as waiting helpers read it (dsymfind.cache.records, miss)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dsymfind.cache import _json_reader, records
from dsymfind.fetch import miss
from dsymfind.paths import CachePaths

UUID = "67E9247C-814E-392B-A027-DBDE6748FCBF"


def test_progress_is_throttled_but_the_last_bytes_are_written_at_once(cache_dir: Path) -> None:
    cache = CachePaths(str(cache_dir))
    (cache_dir / "downloads").mkdir(parents=True)
    writer = records.StatusWriter(cache, UUID)
    writer.progress("http://store/key", 10, 100)  # within the interval of the first write
    record = records.read(cache, UUID)
    assert record is not None and records.bytes_done(record) == (0, None)
    writer.progress("http://store/key", 100, 100)
    record = records.read(cache, UUID)
    assert record is not None and records.bytes_done(record) == (100, 100)


def test_helpers_look_more_often_once_every_byte_has_arrived() -> None:
    def record(done: int, total: int | None) -> dict[str, object]:
        return {"transfers": {"http://store/key": [done, total]}}

    assert miss._poll_interval(None) == miss.POLL_INTERVAL
    assert miss._poll_interval(record(10, 100)) == miss.POLL_INTERVAL
    assert miss._poll_interval(record(10, None)) == miss.POLL_INTERVAL
    assert miss._poll_interval(record(100, 100)) == miss.FINISHING_POLL_INTERVAL
    assert miss.FINISHING_POLL_INTERVAL < miss.POLL_INTERVAL


# Records as the downloader writes them, and what else may lie in their place.
RECORD_TEXTS = [
    b'{"uuid": "x", "state": "running", "transfers": {"http://s/k": [10, null]}}',
    b'  {"message": "\\u00e9t\\u00e9 \\ud83d\\ude00", "finished": 1.5e9, "pid": -3}\n',
    '{"message": "ünïcode"}'.encode(),
    b'{"n": NaN, "i": Infinity, "m": -Infinity, "ok": true, "no": false}',
    b'{"a": {"b": [[], {}, [1, 2.0, "3"]]}}',
    b"[1, 2]",
    b'"just a string"',
    b"",
    b"{",
    b'{"a": 1} {"b": 2}',
    b'{"a": 1}x',
    b"\xef\xbb\xbf{}",
    b'{"a": "\x01"}',
    b"\xff\xfe{}",
    b'{"lone": "\\ud800"}',
    b'{"a": 01}',
    b"nul",
]


def test_a_record_reads_as_json_loads_reads_it(cache_dir: Path) -> None:
    cache = CachePaths(str(cache_dir))
    path = Path(cache.record_file(UUID.replace("-", "")))
    path.parent.mkdir(parents=True)
    for text in RECORD_TEXTS:
        path.write_bytes(text)
        try:
            expected = json.loads(text.decode("utf-8-sig", "surrogatepass"))
        except ValueError:  # not UTF-8 (the writer's encoding), or not JSON
            expected = None
        # NaN is not equal to itself: compare the spellings.
        assert repr(records.read(cache, UUID)) == repr(
            expected if isinstance(expected, dict) else None
        ), text


def test_a_record_nested_past_the_interpreters_limit_reads_as_none(cache_dir: Path) -> None:
    cache = CachePaths(str(cache_dir))
    path = Path(cache.record_file(UUID.replace("-", "")))
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"state": ' + b"[" * 100_000)

    assert records.read(cache, UUID) is None


def test_a_malformed_record_reads_as_none_where_json_was_never_imported(cache_dir: Path) -> None:
    # A waiting helper has not imported json; Python 3.11's scanner then failed otherwise.
    cache = CachePaths(str(cache_dir))
    path = Path(cache.record_file(UUID.replace("-", "")))
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"state": "running",')
    probe = (
        "from dsymfind.paths import CachePaths\n"
        "from dsymfind.cache import records\n"
        f"print(records.read(CachePaths({str(cache_dir)!r}), {UUID!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "None\n", "")


# The reader behind records.read (cache/_json_reader.py) against json.loads itself.
JSON_TEXTS = [
    "{}",
    ' \n{"a": [1, 2.5, -0, 1e5, 1E-5, "x"], "b": {"c": null}} \t',
    '"\\u00e9\\ud83d\\ude00\\ud800"',
    "NaN",
    "[Infinity, -Infinity, NaN]",
    "12345678901234567890123456789",
    '{"a": 1, "a": 2}',
    json.dumps([None, True, -(10**300), 5e-324, math.nan, -math.inf, "ünïcödé 😀 \u2028 \ud800"]),
    json.dumps([{"é": "ü", "": {"": ""}}, [1, [2, [3, {"deep": [None]}]]]]),
]
MALFORMED_JSON = [
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
    for text in JSON_TEXTS:
        assert repr(_json_reader.loads(text.encode())) == repr(json.loads(text)), text


def test_a_malformed_text_fails_where_and_why_json_says() -> None:
    for text in MALFORMED_JSON:
        with pytest.raises(json.JSONDecodeError) as expected:
            json.loads(text)
        with pytest.raises(json.JSONDecodeError) as got:
            _json_reader.loads(text.encode())
        error = got.value
        assert (error.msg, error.pos, error.lineno) == (
            expected.value.msg,
            expected.value.pos,
            expected.value.lineno,
        ), text


def test_nesting_past_the_recursion_limit_fails_as_with_json() -> None:
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(RecursionError):
        _json_reader.loads(text.encode())


def test_a_number_past_the_digit_limit_fails_as_with_json() -> None:
    text = '{"n": ' + "7" * 5_000 + "}"
    assert sys.get_int_max_str_digits() < 5_000
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        _json_reader.loads(text.encode())
    assert not isinstance(got.value, json.JSONDecodeError)
    assert str(got.value) == str(expected.value)
