"""What came of each report of a `dsymfind symbolicate` run, the exit status that makes,
and the run's summary line (docs/symbolicate.md, "Exit status"): what a CI job acts on.
"""

from __future__ import annotations

from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# What became of a report.
COMPLETE = "complete"  # written, every frame outside Apple's images named
BARE = "bare"  # written, some frames left as they came
UNREADABLE = "unreadable"  # not a report that could be read: nothing written
UNWRITTEN = "unwritten"  # read, but its output could not be written

# The exit statuses.
ALL_COMPLETE = 0
# An input, the configuration (credentials a store refused included) or the output could
# not be used: something to fix before trying again.
UNUSABLE = 1
# Everything was written, but some frames were left bare (a dSYM not published yet, a
# library nobody has symbols for): worth another run later, not a broken job.
FRAMES_LEFT_BARE = 2


class Outcome(NamedTuple):
    state: str  # COMPLETE, BARE, UNREADABLE or UNWRITTEN
    refused: bool = False  # frames were left bare because a store refused our credentials


def exit_status(outcomes: Iterable[Outcome]) -> int:
    found = list(outcomes)
    if any(o.state in (UNREADABLE, UNWRITTEN) or o.refused for o in found):
        return UNUSABLE
    return FRAMES_LEFT_BARE if any(o.state == BARE for o in found) else ALL_COMPLETE


def summary(outcomes: Iterable[Outcome]) -> str:
    """`3 reports: 1 complete, 1 with frames left bare, 1 unreadable` (and how many could
    not be written, when some could not)."""
    states = [o.state for o in outcomes]
    line = (
        f"{len(states)} reports: {states.count(COMPLETE)} complete, "
        f"{states.count(BARE)} with frames left bare, {states.count(UNREADABLE)} unreadable"
    )
    unwritten = states.count(UNWRITTEN)
    return f"{line}, {unwritten} not written" if unwritten else line
