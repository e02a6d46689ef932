"""The helper's argv at the size macOS allows (1 MiB): answered in time, as a real process.

A path with spaces arrives as several words and an unknown flag may carry a value, so the
path is the longest tail of the words that names a file; trying every tail of 95,000
words is quadratic (20 s here, past the configured deadline and the wall-clock limit).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.fixtures import toml_list, write_config
from support.processes import HelperRun, assert_universal_answered, run_helper

WORDS = 95_000
# macOS's ARG_MAX, which Linux's 2 MiB exceeds: strings, their NULs and argv's pointers.
ARG_MAX = 1 << 20
POINTER_BYTES = 8
# A configured deadline of 2 s; start-up on a loaded 2-core machine is the rest. A
# quadratic parse of 95,000 words takes 20 s.
HELPER_TIMEOUT = 2
WALL_CLOCK_LIMIT = 10


def run_helper_in_time(*args: str) -> HelperRun:
    """The helper with a hard wall-clock limit; a miss is one line, not 95,000 words."""
    assert sum(len(a.encode()) + 1 + POINTER_BYTES for a in args) < ARG_MAX
    try:
        return run_helper(*args, timeout=WALL_CLOCK_LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {WALL_CLOCK_LIMIT} s (timeout = {HELPER_TIMEOUT})")


def junk(count: int) -> list[str]:
    """What may come before the key: unknown flags, their values, stray words."""
    pattern = ["-d", "a", "x", "My"]
    return [pattern[i % len(pattern)] for i in range(count)]


def test_a_spaced_path_after_95000_words_is_answered(
    spaced_products: Path, config_file: Path
) -> None:
    search = toml_list([spaced_products])
    write_config(config_file, f"timeout = {HELPER_TIMEOUT}\nsearch_paths = {search}\n")
    executable = spaced_products / "universal"

    run = run_helper_in_time(*junk(WORDS), *str(executable).split(" "))

    assert_universal_answered(run, executable)


def test_95000_words_naming_nothing_get_a_dbgerror(config_file: Path) -> None:
    write_config(config_file, f"timeout = {HELPER_TIMEOUT}\n")

    run = run_helper_in_time(*junk(WORDS), "no", "such", "file")

    assert list(run.plist) == ["file"]
    assert run.entry("file")["DBGError"] == ("dsymfind: not a UUID or an existing file: 'file'")


def test_the_longest_existing_tail_wins_over_a_shorter_one(
    config_file: Path, tmp_path: Path
) -> None:
    """Both "<tmp>/q" and "<tmp>/p <tmp>/q" exist: the longer tail is the path."""
    write_config(config_file, f"timeout = {HELPER_TIMEOUT}\n")
    shorter = tmp_path / "q"
    longer = Path(f"{tmp_path}/p {shorter}")
    for path in (shorter, longer):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not a Mach-O file")

    run = run_helper_in_time(*junk(WORDS), *str(longer).split(" "))

    assert list(run.plist) == [str(longer)]
    assert str(longer) in run.entry(str(longer))["DBGError"]
