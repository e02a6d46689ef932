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
