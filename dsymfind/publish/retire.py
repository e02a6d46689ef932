"""Retiring builds from a store we publish to: their records, then every object no remaining
build and no publish under way names, while CI may be publishing into the same store.

The order of the steps is what makes it safe; SECURITY.md#retiring-builds gives the case
analysis. In short: a tombstone under `_retiring/` says what this run may delete and for how
long (its lease); the chosen builds' records go first, so from then on no record names what
may go; only then are the intents (`_publishing/`) and the UUID references (`_uuids/`) listed,
in that order, and every object a remaining build or a publish under way names is kept. A
publish that began after the tombstone sees it, waits it out and puts back what went.
"""

from __future__ import annotations

import datetime
import getpass
import json
import os
import secrets
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from dsymfind.errors import DsymfindError
from dsymfind.stores.writers import Listed, Manager, PublishError

RECORDS, CLAIMS, REFS = "_builds/", "_build-ids/", "_uuids/"
INTENTS, TOMBSTONES, RETIRED = "_publishing/", "_retiring/", "_retired/"
# What publishers wait out at most for a retire that overlaps them; a retire stops before
# its lease runs out (LEASE_MARGIN), so a publisher that has waited it out may put back.
DEFAULT_LEASE = 600.0
# No batch starts with less of the lease left than this (a DeleteObjects of 1,000 keys takes
# well under a second; this leaves room for a stalled one and for clocks a little apart).
LEASE_MARGIN = 60.0
# An intent this old is a publish that was killed: it no longer protects anything.
STALE_INTENT = 24 * 3600.0
# Records are read at once, this many at a time: 1,000 GETs one by one would cost more than
# the deletes they lead to.
READERS = 16
# A record's body is small; anything larger is not one of ours.
RECORD_LIMIT = 4 * 1024 * 1024
BATCH = 1000  # keys per delete request: S3's DeleteObjects maximum, and a lease check each
# For tests only: "STEP:FIFO" stops the run after STEP (tombstone, records, listed, batch,
# refs, transaction): it writes STEP to the FIFO, then waits until the test writes back.
PAUSE_ENV = "DSYMFIND_TEST_PAUSE_AFTER"


class LeaseExpired(DsymfindError):
    """The run's lease ran out before it was done: it stopped; nothing named is missing."""


@dataclass(frozen=True)
class Build:
    """One build record as its key summarizes it (no read of the record)."""

    key: str
    id: str
    app: str
    version: str
    build: str
    commit: str
    published: float  # seconds since the epoch
    images: int
    bytes: int

    @property
    def label(self) -> str:
        return f"{self.version} ({self.build})" if self.build else self.version or self.id


@dataclass(frozen=True)
class Choice:
    """Which builds go: `names` (as `builds show` matches them) or those older than
    `older_than` seconds; less the newest `keep_last` of each app and the versions kept."""

    names: Sequence[str] = ()
    older_than: float | None = None
    keep_last: int = 0
    keep_versions: Sequence[str] = ()


@dataclass
class Plan:
    """What a run deletes: the builds, the keys their records name (with each key's UUID and
    size), and what was kept because another build or a publish names it."""

    builds: list[Build]
    keys: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (UUID hex, size)
    unread: list[tuple[Build, str]] = field(default_factory=list)
    kept: set[str] = field(default_factory=set)

    @property
    def deleted(self) -> list[str]:
        return sorted(set(self.keys) - self.kept)

    @property
    def bytes(self) -> int:
        return sum(self.keys[key][1] for key in self.deleted)

    @property
    def uuids(self) -> set[str]:
        return {uuid for uuid, _ in self.keys.values() if uuid}


@dataclass(frozen=True)
class Outcome:
    txid: str
    plan: Plan
    orphans: list[Listed]
    failures: list[tuple[str, str]]
    transaction: str  # its key; "" for a dry run


# -- reading the store --------------------------------------------------------------------


def summary(key: str) -> Build | None:
    """The build a record's key names; None for a key that does not parse."""
    name = key.removeprefix(RECORDS)
    if not name.endswith(".json") or "/" in name:
        return None
    fields = [urllib.parse.unquote(part) for part in name.removesuffix(".json").split(",")]
    if len(fields) != 8:
        return None
    when, build_id, app, version, build, commit, images, size = fields
    try:
        moment = datetime.datetime.strptime(when, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        return Build(
            key, build_id, app, version, build, commit, moment.timestamp(), int(images), int(size)
        )
    except ValueError:
        return None


def listed_builds(manager: Manager, say: Callable[[str], None]) -> list[Build]:
    """Every build record, oldest first; a key that does not parse is named and skipped."""
    builds = []
    for item in manager.listed(RECORDS):
        found = summary(item.key)
        if found is None:
            say(f"skipped {item.key}: not a build record's name")
        else:
            builds.append(found)
    return sorted(builds, key=lambda b: (b.published, b.key))


def record_keys(data: bytes) -> dict[str, tuple[str, int]]:
    """The keys a record's body names, each with its UUID (32 hex, "" when it has none) and
    size. Untrusted input: anything not shaped as a record raises ValueError."""
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    named: dict[str, tuple[str, int]] = {}
    for entry in _entries(document, "images") + _entries(document, "objects"):
        key, uuid, size = entry.get("key"), entry.get("uuid"), entry.get("size")
        if not isinstance(key, str) or not key or key.startswith("_"):
            continue
        hex32 = _hex(uuid)
        known = named.get(key)
        named[key] = (
            hex32 or (known[0] if known else ""),
            size if isinstance(size, int) and size >= 0 else (known[1] if known else 0),
        )
    return named


def _entries(document: dict[str, object], name: str) -> list[dict[str, object]]:
    value = document.get(name) or []
    if not isinstance(value, list):
        raise ValueError(f"{name} is not a list")
    return [entry for entry in value if isinstance(entry, dict)]


def _hex(uuid: object) -> str:
    if not isinstance(uuid, str):
        return ""
    digits = uuid.replace("-", "").upper()
    return digits if len(digits) == 32 and all(c in "0123456789ABCDEF" for c in digits) else ""


# -- choosing -----------------------------------------------------------------------------


def choose(builds: Sequence[Build], choice: Choice, now: float) -> list[Build]:
    """The builds to retire, oldest first. A name that matches no build is an error."""
    if choice.names:
        chosen = {b.key: b for name in choice.names for b in [_matching(builds, name)]}
    else:
        limit = now - (choice.older_than or 0.0)
        chosen = {b.key: b for b in builds if b.published < limit}
    kept = _kept(builds, choice)
    return sorted((b for b in chosen.values() if b.key not in kept), key=lambda b: b.published)


def _matching(builds: Sequence[Build], name: str) -> Build:
    """As `builds show` reads BUILD: an id, `VERSION (BUILD)`, `VERSION` (the newest of that
    version), or a commit prefix (the newest build of that commit)."""
    newest_first = sorted(builds, key=lambda b: b.published, reverse=True)
    for test in (
        lambda b: b.id == name,
        lambda b: f"{b.version} ({b.build})" == name,
        lambda b: b.version == name,
        lambda b: len(name) >= 4 and b.commit.startswith(name.lower()),
    ):
        found = next((b for b in newest_first if test(b)), None)
        if found is not None:
            return found
    raise DsymfindError(f"{name}: no build of that id, version or commit in the store")


def _kept(builds: Sequence[Build], choice: Choice) -> set[str]:
    """The keys of the records that stay whatever was chosen: pinned versions, and the newest
    `keep_last` builds of each app."""
    kept = {b.key for b in builds if b.version in choice.keep_versions}
    by_app: dict[str, list[Build]] = {}
    for b in builds:
        by_app.setdefault(b.app, []).append(b)
    for same_app in by_app.values():
        newest_first = sorted(same_app, key=lambda b: b.published, reverse=True)
        kept.update(b.key for b in newest_first[: choice.keep_last])
    return kept


# -- the run ------------------------------------------------------------------------------


class Retirement:
    """One retire run on `manager`; `say` prints a line for the person."""

    def __init__(
        self,
        manager: Manager,
        *,
        lease: float = DEFAULT_LEASE,
        say: Callable[[str], None] = print,
        env: dict[str, str] | None = None,
    ) -> None:
        self.manager = manager
        self.lease = lease
        self.say = say
        self.txid = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(4)}"
        self._began = 0.0
        self._pause = (env if env is not None else dict(os.environ)).get(PAUSE_ENV, "")

    def refusal(self) -> str | None:
        """Why these credentials may not delete here, asked before anything goes."""
        return self.manager.may_delete()

    def sweep(self, now: float, *, dry_run: bool) -> None:
        """Tombstones whose lease ran out (a retire that did not finish) and intents older
        than a day (a publish that was killed) protect nothing any more: removed, and said."""
        stale = [
            item.key
            for item in self.manager.listed(TOMBSTONES)
            if self._expired(item.key, now, "started_at", "lease")
        ] + [
            item.key
            for item in self.manager.listed(INTENTS)
            if self._expired(item.key, now, "started_at", None, item.modified)
        ]
        for key in stale:
            what = (
                "tombstone of a retire that did not finish"
                if key.startswith(TOMBSTONES)
                else ("intent of a publish that did not finish")
            )
            self.say(f"{'would remove' if dry_run else 'removed'} {key}: the {what}")
        if stale and not dry_run:
            self._deleted(stale)

    def _expired(
        self, key: str, now: float, when: str, lease: str | None, modified: float = 0.0
    ) -> bool:
        document = _document(self.manager, key)
        started = _seconds(document.get(when)) or modified
        length = _seconds(document.get(lease)) if lease else STALE_INTENT
        if not started or length is None:
            return False  # unreadable: its age is unknown, so it is left
        return started + length < now

    def plan(self, chosen: list[Build]) -> Plan:
        """The keys the chosen builds' records name. A record that cannot be read is named
        and its build left: what it names is unknown."""
        plan = Plan(builds=[])
        with ThreadPoolExecutor(READERS) as pool:
            read = list(pool.map(self._read_record, chosen))
        for build, answer in zip(chosen, read, strict=True):
            if isinstance(answer, str):
                plan.unread.append((build, answer))
                self.say(f"left {build.label} ({build.id}): its record {answer}")
                continue
            plan.builds.append(build)
            plan.keys.update(answer)
        return plan

    def _read_record(self, build: Build) -> dict[str, tuple[str, int]] | str:
        try:
            data = self.manager.read_small(build.key, RECORD_LIMIT)
        except PublishError as exc:
            return f"cannot be read ({exc})"
        if data is None:
            return "is gone (another retire?)"
        try:
            return record_keys(data)
        except (ValueError, UnicodeDecodeError) as exc:
            return f"is not a build record ({exc})"

    def protect(self, plan: Plan, now: float) -> None:
        """Keep what a publish under way or a remaining build names. Intents are listed before
        the references: a publish writes its intent before its references and removes it only
        after its record, so one whose intent is gone by now has its references listed."""
        retiring = {b.id for b in plan.builds}
        live_uuids, live_keys = self._live_intents(now)
        named = {
            hex32
            for item in self.manager.listed(REFS)
            if (ref := _ref(item.key)) is not None and ref[1] not in retiring
            for hex32 in [ref[0]]
        }
        protected = named | live_uuids
        plan.kept = {
            key
            for key, (uuid, _) in plan.keys.items()
            if key in live_keys or not uuid or uuid in protected
        }

    def _live_intents(self, now: float) -> tuple[set[str], set[str]]:
        uuids: set[str] = set()
        keys: set[str] = set()
        for item in self.manager.listed(INTENTS):
            document = _document(self.manager, item.key)
            started = _seconds(document.get("started_at")) or item.modified
            if started + STALE_INTENT < now:
                continue
            uuids.update(filter(None, map(_hex, _strings(document.get("uuids")))))
            keys.update(_strings(document.get("keys")))
        return uuids, keys

    def retire(self, plan: Plan, now: float) -> list[tuple[str, str]]:
        """The protocol proper: tombstone, records, what is still named, objects, references
        and claims, transaction, tombstone gone. The failures to delete, each with why."""
        self._tombstone(
            f"{TOMBSTONES}{self.txid}.json",
            now,
            sorted(plan.uuids),
            sorted(plan.keys),
            builds=[b.id for b in plan.builds],
        )
        self._paused("tombstone")
        failures = self._deleted([b.key for b in plan.builds])
        self._paused("records")
        self.protect(plan, time.time())
        self._paused("listed")
        failures += self._deleted(plan.deleted, step="batch")
        refs = [
            item.key
            for item in self.manager.listed(REFS)
            if (ref := _ref(item.key)) is not None and ref[1] in {b.id for b in plan.builds}
        ]
        failures += self._deleted(refs + [f"{CLAIMS}{b.id}" for b in plan.builds])
        self._paused("refs")
        return failures

    def _tombstone(
        self, key: str, now: float, uuids: list[str], keys: list[str], builds: Sequence[str] = ()
    ) -> None:
        """What this run may delete, and until when publishers that overlap it wait; the lease
        counts from just before it is written."""
        body = {
            "id": self.txid,
            "started_at": now,
            "lease": self.lease,
            "builds": list(builds),
            "uuids": uuids,
            "keys": keys,
        }
        self._began = time.monotonic()
        if not self.manager.create_small(key, _json(body)):
            raise DsymfindError(f"{self.manager.where(key)}: taken; run retire again")

    def finish(self, plan: Plan, orphans: Sequence[Listed], failures: int) -> str:
        """The transaction record, then the tombstone goes: the run is over."""
        key = f"{RETIRED}{self.txid}.json"
        document = {
            "id": self.txid,
            "who": f"{_user()}@{socket.gethostname()}",
            "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "builds": [
                {"id": b.id, "app": b.app, "version": b.version, "build": b.build}
                for b in plan.builds
            ],
            "objects": len(plan.deleted) + len(orphans),
            "bytes": plan.bytes + sum(item.size for item in orphans),
            "orphans": len(orphans),
            "failures": failures,
            "dry_run": False,
        }
        self.manager.create_small(key, _json(document))
        self._paused("transaction")
        self.manager.delete([f"{TOMBSTONES}{self.txid}.json"])
        return key

    def orphans(
        self, older_than: float, now: float, *, dry_run: bool
    ) -> tuple[list[Listed], list[tuple[str, str]]]:
        """Objects outside the store's own `_` folders that no record names (published before
        records existed, or left by a run that was killed), older than `older_than`, and the
        failures to delete them. Deleted under a tombstone of their own, in a retire's order:
        tombstone, then intents, then records."""
        limit = now - older_than
        candidates = {
            item.key: item
            for item in self.manager.listed("")
            if not item.key.startswith("_") and item.modified < limit
        }
        if not candidates:
            return [], []
        tombstone = f"{TOMBSTONES}{self.txid}-orphans.json"
        if not dry_run:
            self._tombstone(tombstone, now, [], sorted(candidates))
        _, live_keys = self._live_intents(time.time())
        named = self._named_by_records() | live_keys
        gone = [item for key, item in sorted(candidates.items()) if key not in named]
        if dry_run:
            return gone, []
        failures = self._deleted([item.key for item in gone], step="batch")
        self.manager.delete([tombstone])
        return gone, failures

    def _named_by_records(self) -> set[str]:
        builds = listed_builds(self.manager, self.say)
        named: set[str] = set()
        with ThreadPoolExecutor(READERS) as pool:
            for answer in pool.map(self._read_record, builds):
                if isinstance(answer, str):
                    raise DsymfindError(
                        f"a build record {answer}: orphans are not removed while what a "
                        "record names is unknown"
                    )
                named.update(answer)
        return named

    def _deleted(self, keys: Sequence[str], step: str = "") -> list[tuple[str, str]]:
        """Delete in batches, each begun only with LEASE_MARGIN of the lease left."""
        failures = []
        for start in range(0, len(keys), BATCH):
            self._check_lease()
            failures += self.manager.delete(keys[start : start + BATCH])
            if step:
                self._paused(step)
        return failures

    def _check_lease(self) -> None:
        if not self._began:
            return  # before the tombstone: stale intents and tombstones
        left = self.lease - (time.monotonic() - self._began)
        if left < min(LEASE_MARGIN, self.lease / 2):
            raise LeaseExpired(
                f"retire stopped: its lease of {self.lease:g} s is nearly over, and publishers "
                "waiting on it may go on; no record names anything deleted. Run retire again "
                "(with a longer --lease) to finish"
            )

    def _paused(self, step: str) -> None:
        name, _, fifo = self._pause.partition(":")
        if name == step and fifo:
            with open(fifo, "w") as out:
                out.write(step + "\n")
            with open(fifo) as answer:
                answer.read()


def retire(
    manager: Manager,
    choice: Choice,
    *,
    dry_run: bool = False,
    orphans_older_than: float | None = None,
    lease: float = DEFAULT_LEASE,
    say: Callable[[str], None] = print,
) -> Outcome:
    """Retire the chosen builds (and the orphans, when asked) from the store, or in a dry
    run say what would go. DsymfindError before anything is deleted when these credentials
    may not delete."""
    run = Retirement(manager, lease=lease, say=say)
    if not dry_run and (refusal := run.refusal()) is not None:
        raise DsymfindError(refusal)
    now = time.time()
    run.sweep(now, dry_run=dry_run)
    plan = run.plan(choose(listed_builds(manager, say), choice, now))
    failures: list[tuple[str, str]] = []
    if dry_run:
        run.protect(plan, now)
    elif plan.builds:
        failures = run.retire(plan, now)
    orphans: list[Listed] = []
    if orphans_older_than is not None:
        orphans, more = run.orphans(orphans_older_than, time.time(), dry_run=dry_run)
        failures += more
    transaction = ""
    if not dry_run and (plan.builds or orphans):
        transaction = run.finish(plan, orphans, len(failures))
    return Outcome(run.txid, plan, orphans, failures, transaction)


def _ref(key: str) -> tuple[str, str] | None:
    """`_uuids/<HEX>/<id>` as (HEX, id)."""
    parts = key.removeprefix(REFS).split("/")
    return (parts[0].upper(), parts[1]) if len(parts) == 2 and _hex(parts[0]) else None


def _document(manager: Manager, key: str) -> dict[str, object]:
    """A small JSON object of the store's own (an intent, a tombstone); {} when it is gone
    or not one."""
    try:
        data = manager.read_small(key, RECORD_LIMIT)
        document = json.loads(data) if data is not None else {}
    except (PublishError, ValueError, UnicodeDecodeError):
        return {}
    return document if isinstance(document, dict) else {}


def _seconds(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, str))


def _json(document: object) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def transactions(manager: Manager) -> Iterable[dict[str, object]]:
    """The retire transactions, newest first, each as its record says (untrusted: a value
    of the wrong type is shown as absent)."""
    for item in sorted(manager.listed(RETIRED), key=lambda i: i.key, reverse=True):
        document = _document(manager, item.key)
        yield {"key": item.key, **document}
