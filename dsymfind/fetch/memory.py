"""What recent fetches taught: keys no source had, and sources that keep failing.

Both are markers in the cache (markers.py): the negative cache (`negative/`, one marker
per UUID, or per PDB store key) for `negative_cache_ttl`, and backoff (`failing-servers/`,
one marker per source location) for `server_backoff`. `--ignore-negative-cache` (and the
helper's `--ignoreNegativeCache`) bypasses both, since a user who asks again after fixing
a server wants it asked. Every message that comes from either says so, and for how long.
"""

from __future__ import annotations

import math

from dsymfind import markers

# The helper's miss path reads the backoff markers: typing would cost it an import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.cache_layout import CacheLayout
    from dsymfind.settings import Settings

BYPASS_HINT = "--ignore-negative-cache asks anyway"


class Memory:
    def __init__(self, layout: CacheLayout, settings: Settings, *, ignore: bool = False) -> None:
        self.layout = layout
        self.negative_ttl = settings["negative_cache_ttl"]
        self.backoff = settings["server_backoff"]
        self.ignore = ignore

    def absent_for(self, marker: str) -> float | None:
        """Seconds the negative cache still says "nobody has it"; None: ask."""
        return None if self.ignore else markers.time_left(marker, self.negative_ttl)

    def note_absent(self, marker: str) -> None:
        markers.mark(marker)

    def forget_absent(self, marker: str) -> None:
        markers.clear(marker)

    def backing_off(self, location: str) -> float | None:
        """Seconds the source at `location` is still skipped for; None: ask it."""
        if self.ignore:
            return None
        return markers.time_left(self.layout.failing_server_marker(location), self.backoff)

    def all_backing_off(self, locations: list[str]) -> float | None:
        """While every source is skipped, the seconds until the first is asked again; None
        when one may be asked (or there is none)."""
        left = [self.backing_off(location) for location in locations]
        return None if not left or None in left else min(t for t in left if t is not None)

    def note_failing(self, location: str) -> None:
        markers.mark(self.layout.failing_server_marker(location))

    def note_healthy(self, location: str) -> None:
        markers.clear(self.layout.failing_server_marker(location))


def absent_message(what: str, seconds: float) -> str:
    return f"no server had {what} recently (negative cache, {_left(seconds)}; {BYPASS_HINT})"


def backoff_message(name: str, location: str, seconds: float) -> str:
    from dsymfind.stores.base import redact  # not for the helper's miss path, which asks first

    return (
        f"{name}: {redact(location)} failed recently; skipped for {_left(seconds)} ({BYPASS_HINT})"
    )


def all_failing_message(seconds: float) -> str:
    return (
        f"every symbol server failed recently; they are skipped for {_left(seconds)} "
        f"(see the log; {BYPASS_HINT})"
    )


def _left(seconds: float) -> str:
    """Rounded up: "60 min more" for a fresh hour-long marker, not 59 a second after."""
    whole = max(1, math.ceil(seconds))
    if whole < 120:
        return f"{whole} s more"
    if whole < 7200:
        return f"{-(-whole // 60)} min more"
    return f"{-(-whole // 3600)} h more"
