"""Whether each store has a UUID's dSYM, and if not why it could not say: `dsymfind why`'s
evidence, store by store.

A store is asked as a fetch asks it (fetcher.open_server: the same readers, headers,
credentials, deadlines and redirect rules), but nothing is downloaded beyond what existence
needs: the byte limit is 0, so a store that has the key answers "too large" at its
announced length (a folder's size, an HTTP or S3 answer's Content-Length) and its body is
never read. Nothing is written to the negative cache or to backoff: a diagnosis changes
no later lookup. What they hold is said, as evidence.
"""

from __future__ import annotations

import datetime
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from dsymfind import stores
from dsymfind.errors import DsymfindError
from dsymfind.fetch import backoff, fetcher
from dsymfind.fetch.verdicts import ABSENT, FOUND, REFUSED, UNREACHABLE
from dsymfind.paths import CachePaths
from dsymfind.stores import base, layouts
from dsymfind.stores.base import Server
from dsymfind.stores.transfer import Session

if TYPE_CHECKING:
    from dsymfind.settings import Settings

# Existence only: any object larger than this is "too large" before its body is read.
EXISTENCE_BYTES = 0
# Questions asked at once: each is one small request (and its retries), so a report's
# images ask several stores together without opening a connection per image.
MAX_PARALLEL = 8


class Answer(NamedTuple):
    store: str  # the server's name
    verdict: str  # verdicts.py: FOUND, ABSENT, REFUSED or UNREACHABLE
    detail: str  # where it is, the keys tried, the refusal and its fix, the backoff


def ask_all(
    servers: Sequence[Server], uuids: Sequence[str], env: Mapping[str, str], current: Settings
) -> dict[str, list[Answer]]:
    """Each UUID's answers for its dSYM, one per server in the order given, over one
    session; servers in backoff are asked too (the answer says until when they are
    skipped)."""
    pairs = [(uuid, server) for uuid in uuids for server in servers]
    answers: dict[str, list[Answer]] = {uuid: [] for uuid in uuids}
    if not pairs:
        return answers
    limits = base.Limits(total_timeout=current["download_timeout"], max_bytes=EXISTENCE_BYTES)
    waits = backoff.Backoff(
        CachePaths(current["cache_dir"]), current, backoff.asking(on_purpose=True, ignore=False)
    )
    with Session(limits) as session, ThreadPoolExecutor(min(MAX_PARALLEL, len(pairs))) as pool:
        said = pool.map(lambda pair: _ask(pair[1], pair[0], env, session, limits, waits), pairs)
        for (uuid, _), answer in zip(pairs, said, strict=True):
            answers[uuid].append(answer)
    return answers


def _ask(
    server: Server,
    uuid: str,
    env: Mapping[str, str],
    session: Session,
    limits: base.Limits,
    waits: backoff.Backoff,
) -> Answer:
    keys = _keys(server, uuid)
    if not keys:
        return Answer(server["name"], ABSENT, f"its {server['layout']} layout has no dSYM key")
    try:
        reader = fetcher.open_server(server, env, session, fresh=True)
    except DsymfindError as exc:
        return Answer(server["name"], UNREACHABLE, str(exc))
    tried = []
    for key in keys:
        try:
            _exists(reader, key, limits)
        except base.NotFound:
            tried.append(reader.where(key))
            continue
        except base.AuthFailed as exc:
            fix = stores.kind_for(server["kind"]).CREDENTIALS_FIX
            return Answer(server["name"], REFUSED, f"{exc}; {fix}")
        except (DsymfindError, OSError) as exc:
            return Answer(server["name"], UNREACHABLE, _unanswered(exc, server, waits))
        return Answer(server["name"], FOUND, reader.where(key))
    return Answer(server["name"], ABSENT, "not at " + ", ".join(tried))


def _keys(server: Server, uuid: str) -> list[str]:
    """The keys the server's layout gives the dSYM; a store named without a layout
    (`--store DIR`) is asked under every layout publish writes."""
    if server["layout"]:
        key = layouts.server_key(server, uuid, layouts.DSYM)
        return [] if key is None else [key]
    keys = (layouts.debug_file_key(name, uuid) for name in layouts.PUBLISHABLE)
    return list(dict.fromkeys(keys))


def _exists(reader: base.Reader, key: str, limits: base.Limits) -> None:
    """Returns when the key exists; raises what the reader raises otherwise."""
    with tempfile.TemporaryDirectory(prefix="dsymfind-why-") as folder:
        try:
            reader.get(key, f"{folder}/answer", base.Terms(limits))
        except base.TooLarge:
            return


def _unanswered(exc: BaseException, server: Server, waits: backoff.Backoff) -> str:
    """Why the store gave no answer, and until when lookups skip it after a failure."""
    left = waits.waiting(server["url"])
    if left is None:
        return str(exc)
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=left)
    return f"{exc}; in backoff until {until:%Y-%m-%d %H:%M:%S} UTC"


def negative_note(uuid: str, current: Settings) -> str | None:
    """What the negative cache says of the UUID's dSYM, when it holds it: the stores are
    asked all the same."""
    cache = CachePaths(current["cache_dir"])
    negative = backoff.NegativeCache(cache, current, backoff.asking(on_purpose=False, ignore=False))
    left = negative.absent_for(negative.marker(uuid))
    if left is None:
        return None
    return f"the negative cache holds it ({backoff.duration(left)} more); asked anyway"
