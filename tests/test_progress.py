"""progress.ByteMeter: a bar redrawn in place on a terminal; in a log, a line at each tenth of
a large task and whenever 10 s passed without one. Counted chunks and a fake clock."""

from __future__ import annotations

import io
import re

from dsymfind.progress import LOG_INTERVAL, LOG_STEPS_MIN_BYTES, ByteMeter, Progress

MIB = 1024 * 1024


class FakeClock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_line_at_each_tenth_of_a_large_task() -> None:
    log, clock = io.StringIO(), FakeClock()
    meter = ByteMeter(Progress(log, clock), "publish", 100 * MIB)
    meter.doing = "big.dSYM"
    for _ in range(100):
        meter.add(MIB)
        clock.now += 0.5  # a tenth takes 5 s: the tenths come first
    lines = log.getvalue().splitlines()
    assert lines == [
        f"publish: {10 * n}%, {10 * n}.0 MiB of 100.0 MiB (big.dSYM)" for n in range(1, 11)
    ]


def test_a_slow_task_gets_a_line_every_ten_seconds_between_its_tenths() -> None:
    log, clock = io.StringIO(), FakeClock()
    meter = ByteMeter(Progress(log, clock), "publish", 100 * MIB)
    for second in range(1, 61):  # a MiB every 3 s: 30 s a tenth
        clock.now += 3
        meter.add(MIB)
        if second == 20:
            assert log.getvalue().splitlines() == [
                "publish: 4%, 4.0 MiB of 100.0 MiB",  # at 12 s
                "publish: 8%, 8.0 MiB of 100.0 MiB",  # 24 s
                "publish: 10%, 10.0 MiB of 100.0 MiB",  # 30 s: the first tenth
                "publish: 14%, 14.0 MiB of 100.0 MiB",  # 42 s
                "publish: 18%, 18.0 MiB of 100.0 MiB",  # 54 s
                "publish: 20%, 20.0 MiB of 100.0 MiB",  # 60 s: the second
            ]
    # And so on: each further tenth (30 s) has two lines 10 s apart, then its own.
    assert len(log.getvalue().splitlines()) == 6 + 4 * 3


def test_a_small_quick_task_says_nothing_in_a_log_and_a_slow_one_every_ten_seconds() -> None:
    log, clock = io.StringIO(), FakeClock()
    total = LOG_STEPS_MIN_BYTES - 1
    meter = ByteMeter(Progress(log, clock), "publish", total)
    meter.reach(total // 2)
    meter.reach(total)
    assert log.getvalue() == ""
    meter = ByteMeter(Progress(log, clock), "publish", total)
    clock.now += LOG_INTERVAL
    meter.add(MIB)
    assert log.getvalue() == "publish: 2%, 1.0 MiB of 64.0 MiB\n"


def test_a_terminal_gets_a_bar_redrawn_in_place_and_cleared_at_the_end() -> None:
    screen, clock = Terminal(), FakeClock()
    progress = Progress(screen, clock)
    meter = ByteMeter(progress, "publish", 10 * MIB)
    meter.doing = "hello.dSYM 4C4C449A-5555-3144-A19A-E6E643E6625E arm64"
    for _ in range(10):
        clock.now += 1
        meter.add(MIB)
    drawn = screen.getvalue()
    bars = re.findall(r"publish \[([#.]+)\] +(\d+)%  ([\d.]+ MiB)/10\.0 MiB  hello\.dSYM", drawn)
    assert [percent for _, percent, _ in bars] == [str(10 * n) for n in range(1, 11)]
    assert bars[-1][0] == "#" * 24
    assert drawn.count("\x1b[1F\x1b[J") == 9  # each bar drawn over the one before
    # A result line goes above the bar, which is drawn again under it; close clears it.
    progress.emit("hello.dSYM 4C4C449A-5555-3144-A19A-E6E643E6625E arm64: published", screen)
    progress.close()
    tail = screen.getvalue()[len(drawn) :]
    assert tail.startswith("\x1b[1F\x1b[Jhello.dSYM 4C4C449A-5555-3144-A19A-E6E643E6625E arm64:")
    assert tail.endswith("\x1b[1F\x1b[J")
