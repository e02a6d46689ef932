"""How an `.ips` is written back (ips.py)."""

from __future__ import annotations

import json

from support.crash_reports import CRASH_REPORTS

from dsymfind.apple import crashreport
from dsymfind.symbolicate import formats, ips
from dsymfind.symbolicate.engine import Located

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

    assert ips._body_text(body, {}) == json.dumps(body, indent=2)


def test_an_image_read_before_is_told_apart_from_one_whose_values_only_compare_equal() -> None:
    entry = {"uuid": "4C4C4419-5555-3144-A142-172DE736FD2E", "name": "app", "base": 1}
    as_bool = {**entry, "base": True}

    (first,) = ips._images({"usedImages": [entry]}, {})
    (second,) = ips._images({"usedImages": [as_bool]}, {})
    (again,) = ips._images({"usedImages": [dict(entry)]}, {})

    assert (first.base, second.base, again) == (1, None, first)


def _named_report(frames: list[object]) -> str:
    """A report of those frames in one thread and as its last exception backtrace, each
    frame with an image offset named by the same three Located (two inlined callees)."""
    body = {
        "threads": [{"id": 7, "frames": frames, "queue": "main"}, {"frames": "none"}],
        "lastExceptionBacktrace": frames,
        "usedImages": [{"uuid": "4C4C4419-5555-3144-A142-172DE736FD2E", "name": "app"}] * 2,
    }
    report = formats.parse('{"bug_type": "309"}\n' + json.dumps(body))
    for frame in report.frames():
        if frame.offset is not None and not frame.named:
            frame.symbols = NAMED
    return ips.write(report)


NAMED = [
    Located("inner()", None, "/src/inner.h", 3, True),
    Located("middle()", None, None, None, True),
    Located("outer()", 16, "/src/outer.c", 40, False),
]


def test_frames_written_again_are_written_as_json_writes_their_keys() -> None:
    frames = [
        {"imageOffset": 20, "imageIndex": 0},
        {"imageIndex": 0, "imageOffset": 20},  # the other order
        {"imageOffset": 20, "imageIndex": True},  # a boolean, which json writes as one
        {"imageOffset": 24, "imageIndex": 1, "region": "x"},
        {"imageOffset": 20, "imageIndex": 0, "symbol": "given", "symbolLocation": 2},
        {"imageOffset": -1, "imageIndex": 0},
        "not a frame",
    ]

    first = _named_report(frames)
    again = _named_report(frames)  # each frame's text made before

    assert again == first
    text = first.split("\n", 1)[1]
    body = json.loads(text)
    lines = text.splitlines()
    for key in ("threads", "lastExceptionBacktrace"):
        (line,) = [line for line in lines if line.startswith(f'  "{key}": ')]
        value = json.dumps(body[key], separators=(",", ":"))
        assert line.removeprefix(f'  "{key}": ').rstrip(",") == value
    written = body["lastExceptionBacktrace"]
    assert written[:3] == [
        {
            "imageOffset": 20,
            "imageIndex": 0,
            "symbol": "inner()",
            "sourceFile": "inner.h",
            "sourceLine": 3,
            "inline": True,
        },
        {"imageOffset": 20, "imageIndex": 0, "symbol": "middle()", "inline": True},
        {
            "imageOffset": 20,
            "imageIndex": 0,
            "symbol": "outer()",
            "symbolLocation": 4,
            "sourceFile": "outer.c",
            "sourceLine": 40,
        },
    ]
    assert [entry.get("symbol") for entry in written[3:-1]] == [
        "inner()",
        "middle()",
        "outer()",
        "inner()",
        "middle()",
        "outer()",
        "inner()",
        "middle()",
        "outer()",
        "given",
        None,
    ]
    assert list(written[5]) == [
        "imageIndex",
        "imageOffset",
        "symbol",
        "symbolLocation",
        "sourceFile",
        "sourceLine",
    ]
    assert written[-1] == "not a frame"
    assert written[8]["imageIndex"] is True and written[11]["region"] == "x"
    assert body["threads"][0]["frames"] == written and body["threads"][1] == {"frames": "none"}
