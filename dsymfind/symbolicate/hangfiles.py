"""A sample or spindump too large for a crash report's bound (32 MiB), read from its file
a line at a time (hangtext.py) whatever its size, up to MAX_HANG_BYTES."""

from __future__ import annotations

import os

from dsymfind.symbolicate import sample, spindump
from dsymfind.symbolicate.hangtext import Source
from dsymfind.symbolicate.model import Report

MAX_HANG_BYTES = 4 << 30
# How much of a file is looked at to tell its form.
HEAD_CHARS = 64 << 10


def read_path(path: str) -> Report | None:
    """The sample or spindump at `path`; None when it is neither (or no regular file, or
    larger than MAX_HANG_BYTES: the other readers say why)."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_HANG_BYTES:
            return None
        head = _head_of(path)
    except OSError:
        return None
    for module in (sample, spindump):
        if module.looks_like(head):
            report: Report = module.read_source(Source(path, None))
            return report
    return None


def _head_of(path: str) -> str:
    """The first HEAD_CHARS of a file, to tell its form."""
    with open(path, encoding="utf-8", errors="replace", newline="") as stream:
        return stream.read(HEAD_CHARS)
