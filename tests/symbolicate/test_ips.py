"""How an `.ips` is written back (ips.py)."""

from __future__ import annotations

import json

from support.crash_reports import CRASH_REPORTS

from dsymfind.apple import crashreport
from dsymfind.symbolicate import formats, ips

MACOS_IPS = CRASH_REPORTS / "hello-macos.ips"


def test_the_threads_are_written_on_a_line_each_as_apple_writes_them() -> None:
    text = crashreport.read_text(str(MACOS_IPS))
    header, body = text.split("\n", 1)

    written_header, written_body = ips.write(formats.parse(text)).split("\n", 1)

    assert written_header == header
    assert json.loads(written_body) == json.loads(body)  # every key, every value kept
    lines = written_body.splitlines()
    (threads,) = [line for line in lines if line.startswith('  "threads": ')]
    assert (
        json.loads(threads.removeprefix('  "threads": ').rstrip(",")) == json.loads(body)["threads"]
    )
    assert '  "osVersion": {' in lines and '    "train": "macOS 14.4.1",' in lines


def test_the_other_keys_are_written_as_json_indents_them() -> None:
    body = {
        "usedImages": [
            {"base": 4096, "name": "a\u00e9\n", "size": 1.5, "apple": True, "path": None},
            {"nan": float("nan"), "inf": float("inf"), "big": 10**30, "": ""},
            {"nested": {"deeper": [1, {}]}},
            [],
            {},
            [1, [True, None]],
        ],
        "osVersion": {"train": "macOS 14", "build": ""},
        "empty": [],
        "faultingThread": 0,
    }

    assert ips._body_text(body) == json.dumps(body, indent=2)


def test_an_image_read_before_is_told_apart_from_one_whose_values_only_compare_equal() -> None:
    entry = {"uuid": "4C4C4419-5555-3144-A142-172DE736FD2E", "name": "app", "base": 1}
    as_bool = {**entry, "base": True}

    (first,) = ips._images({"usedImages": [entry]}, {})
    (second,) = ips._images({"usedImages": [as_bool]}, {})
    (again,) = ips._images({"usedImages": [dict(entry)]}, {})

    assert (first.base, second.base, again) == (1, None, first)
