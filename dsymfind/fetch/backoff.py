"""Backing off: from a UUID no server had (the negative cache) and from a server that keeps
failing (backoff).

Both are markers in the cache (markers.py): the negative cache (`negative/`, one marker
per UUID under the fingerprint of the store settings it was written with, or one per PDB
store key; cache/negative.py reads them) for `negative_cache_ttl`, and backoff
(`failing-servers/`, one marker per server location) for `server_backoff`. Who trusts them
is the caller's `Asking`: the helper trusts both, a command run on purpose only backoff,
and `--ignore-negative-cache` (the helper's `--ignoreNegativeCache`) neither. Every message
that comes from either says so, for how long, and names the flag of the command that
prints it.
"""

from __future__ import annotations

import math

from dsymfind import markers
from dsymfind.uuids import uuid_hex

# The helper's miss path reads the backoff markers, waiting helpers included
# (tests/fetch/test_miss_waiting.py): typing would cost each of them an import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.paths import CachePaths
    from dsymfind.settings import Settings

# What bypasses the negative cache and backoff, as the admin commands (and the detached
# downloader, whose messages they print) spell it, and as the helper does: each message
# names the one its printer accepts (the helper turns the first into the second).
BYPASS_FLAG = "--ignore-negative-cache"
HELPER_BYPASS_FLAG = "--ignoreNegativeCache"


class Asking:
    """How much of the negative cache and backoff a caller takes on trust. A slotted class,
    not a NamedTuple: waiting helpers load this module, and typing must not come with it."""

    __slots__ = ("honours_backoff", "trusts_absent")

    def __init__(self, *, trusts_absent: bool, honours_backoff: bool) -> None:
        # A fresh negative entry answers "no server has it" without asking.
        self.trusts_absent = trusts_absent
        # A server in backoff is skipped.
        self.honours_backoff = honours_backoff


def asking(*, on_purpose: bool, ignore: bool) -> Asking:
    """The helper (not `on_purpose`) trusts the negative cache: LLDB asks about hundreds of
    UUIDs nobody has. A command a person or a job runs on purpose (fetch, prefetch,
    symbolicate, pdb) asks again, since a crash report often arrives before its build's
    publish; a server that did not answer still waits out its backoff. `ignore`
    (the bypass flag) asks servers in backoff too: a user who fixed a server wants it asked.
    """
    return Asking(trusts_absent=not (on_purpose or ignore), honours_backoff=not ignore)


class NegativeCache:
    """The negative cache of the store settings in `settings`, as `how` trusts it."""

    def __init__(self, cache: CachePaths, settings: Settings, how: Asking) -> None:
        self.cache = cache
        self.ttl = settings["negative_cache_ttl"]
        self.fingerprint = settings["stores_fingerprint"]
        self.how = how

    def marker(self, uuid: str, *, executable: bool = False) -> str:
        """The negative entry of a UUID's dSYM (or executable) under these store settings."""
        return self.cache.negative_marker(self.fingerprint, uuid_hex(uuid), executable=executable)

    def absent_for(self, marker: str) -> float | None:
        """Seconds the negative cache still says "nobody has it"; None: ask."""
        if not self.how.trusts_absent:
            return None
        return markers.time_left(marker, self.ttl)

    def note_absent(self, marker: str, asked: list[str]) -> None:
        """Every server in `asked` (where each was asked, as logs show it) said not found."""
        from dsymfind.cache import negative  # the marker's content: off the helper's paths

        negative.record(marker, asked)

    def forget(self, marker: str) -> None:
        markers.clear(marker)


class Backoff:
    """The servers skipped for a while after a failure, as `how` honours them."""

    def __init__(self, cache: CachePaths, settings: Settings, how: Asking) -> None:
        self.cache = cache
        self.period = settings["server_backoff"]
        self.how = how

    def waiting(self, location: str) -> float | None:
        """Seconds the server at `location` is still skipped for; None: ask it."""
        if not self.how.honours_backoff:
            return None
        return markers.time_left(self.cache.failing_server_marker(location), self.period)

    def all_waiting(self, locations: list[str]) -> float | None:
        """While every server is skipped, the seconds until the first is asked again; None
        when one may be asked (or there is none)."""
        left = [self.waiting(location) for location in locations]
        return None if not left or None in left else min(t for t in left if t is not None)

    def note_failing(self, location: str) -> None:
        markers.mark(self.cache.failing_server_marker(location))

    def note_healthy(self, location: str) -> None:
        markers.clear(self.cache.failing_server_marker(location))


def absent_message(what: str, seconds: float) -> str:
    return (
        f"no server had {what} recently (negative cache, {_left(seconds)}; "
        f"{BYPASS_FLAG} asks anyway)"
    )


def backoff_message(name: str, location: str, seconds: float) -> str:
    from dsymfind.stores.base import redact  # not for the helper's miss path, which asks first

    return (
        f"{name}: {redact(location)} failed recently; skipped for {_left(seconds)} "
        f"({BYPASS_FLAG} asks anyway)"
    )


def all_failing_message(seconds: float) -> str:
    """The helper's own answer when it starts no downloader: in its own flag's words."""
    return (
        f"every symbol server failed recently; they are skipped for {_left(seconds)} "
        f"(see the log; {HELPER_BYPASS_FLAG} asks anyway)"
    )


def in_helper_words(message: str) -> str:
    """A downloader's message as the helper prints it, naming the flag the helper accepts."""
    return message.replace(BYPASS_FLAG, HELPER_BYPASS_FLAG)


def _left(seconds: float) -> str:
    return f"{duration(seconds)} more"


def duration(seconds: float) -> str:
    """Rounded up: "60 min" for a fresh hour-long marker, not 59 a second after."""
    whole = max(1, math.ceil(seconds))
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{-(-whole // 60)} min"
    return f"{-(-whole // 3600)} h"
