"""Retiring builds from a store we publish to: their records, then every object no remaining
build and no publish under way names, while CI may be publishing into the same store.

The order of the steps is what makes it safe (the case analysis is in SECURITY.md, "Retiring
builds while CI publishes"). In short: a tombstone under `_retiring/` says what this run may
delete and for how long (its lease); the chosen builds' records go first, so from then on no
record names what may go; only then are the intents (`_publishing/`) and the UUID
references (`_uuids/`) listed, in that order, and every object a remaining build or a
publish under way names is kept. A publish that began after the tombstone sees it, waits it
out and puts back what went.
"""

from __future__ import annotations

import datetime
import getpass
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from dsymfind.errors import DsymfindError
from dsymfind.stores import builds as records
from dsymfind.stores.builds import BadRecord, Summary
from dsymfind.stores.writers import Listed, Manager, PublishError
from dsymfind.uuids import normalize_uuid, uuid_hex

# What publishers wait out at most for a retire that overlaps them; a retire stops before
# its lease runs out (LEASE_MARGIN), so a publisher that has waited it out may put back.
DEFAULT_LEASE = 600.0
# No batch starts with less of the lease left than this (a DeleteObjects of 1,000 keys takes
# well under a second; this leaves room for a stalled one and for clocks a little apart).
LEASE_MARGIN = 60.0
# An intent this old is a publish that was killed: it no longer protects anything.
STALE_INTENT = 24 * 3600.0
# Records are read at once, this many at a time (the S3 client's connection pool holds 10):
# 1,000 GETs one by one would cost more than the deletes they lead to.
READERS = 10
BATCH = 1000  # keys per delete request: S3's DeleteObjects maximum, and a lease check each
# Delete requests in flight at once: each waits on the engine removing 1,000 keys.
DELETERS = 4
# The references are listed in 16 listings at once, one per first hex digit of the UUID:
# one listing of 20,000 keys is 20 requests one after another.
_HEX_DIGITS = "0123456789ABCDEF"
# For tests only: "STEP:FIFO" stops the run after STEP (planned, tombstone, records, listed,
# batch, refs, transaction): it writes STEP to the FIFO, then waits until the test writes back.
PAUSE_ENV = "DSYMFIND_TEST_PAUSE_AFTER"


class LeaseExpired(DsymfindError):
    """The run's lease ran out before it was done: it stopped; nothing named is missing."""


@dataclass(frozen=True)
class Build:
    """One build record as its key summarizes it (no read of the record)."""

    summary: Summary
    published: float  # seconds since the epoch

    @classmethod
    def of(cls, summary: Summary) -> Build:
        moment = datetime.datetime.strptime(summary.published_at, "%Y%m%dT%H%M%SZ")
        return cls(summary, moment.replace(tzinfo=datetime.UTC).timestamp())

    @property
    def key(self) -> str:
        return self.summary.key

    @property
    def id(self) -> str:
        return self.summary.id

    @property
    def label(self) -> str:
        s = self.summary
        system = " system" if s.kind == records.SYSTEM else ""
        return f"{s.version} ({s.build}) {s.app}{system} ({s.id})"


@dataclass(frozen=True)
class Choice:
    """Which builds go: `names` (build ids: the command reads BUILD as `builds show` does)
    or those older than
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
    refs: set[tuple[str, str]] = field(default_factory=set)  # (UUID hex, build id)
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


def listed_builds(manager: Manager, say: Callable[[str], None]) -> list[Build]:
    """Every build record, oldest first; a key that does not parse is named and skipped."""
    summaries, skipped = records.list_summaries(manager)
    for key, why in skipped:
        say(f"skipped {key}: {why}")
    return sorted((Build.of(s) for s in summaries), key=lambda b: (b.published, b.key))


def named_keys(record: records.Record) -> dict[str, tuple[str, int]]:
    """The objects a record names, each with its UUID (32 hex digits, or a PE's or PDB's
    store ID; "" when the record gives none, and such a key is never deleted) and size: its
    images, and the objects it lists beside them. The store's own `_` folders are never a
    record's objects."""
    named: dict[str, tuple[str, int]] = {}
    for entry in record.objects:
        key, uuid, size = entry.get("key"), entry.get("uuid"), entry.get("size")
        if isinstance(key, str) and key and not key.startswith("_"):
            normal = normalize_uuid(uuid) if isinstance(uuid, str) else None
            hex32 = uuid_hex(normal) if normal else ""
            named[key] = (hex32, size if isinstance(size, int) and size >= 0 else 0)
    for image in record.images:
        if not image.key.startswith("_"):
            named[image.key] = (image.uuid, image.size)
    return named


# -- choosing -----------------------------------------------------------------------------


def choose(builds: Sequence[Build], choice: Choice, now: float) -> list[Build]:
    """The builds to retire, oldest first. A name that matches no build is an error."""
    if choice.names:
        chosen = {b.key: b for b in (_matching(builds, name) for name in choice.names)}
    else:
        limit = now - (choice.older_than or 0.0)
        chosen = {b.key: b for b in builds if b.published < limit}
    kept = _kept(builds, choice)
    return sorted((b for b in chosen.values() if b.key not in kept), key=lambda b: b.published)


def _matching(builds: Sequence[Build], build_id: str) -> Build:
    found = next((b for b in builds if b.id == build_id), None)
    if found is None:
        raise DsymfindError(f"{build_id}: no build of that id in the store")
    return found


def _kept(builds: Sequence[Build], choice: Choice) -> set[str]:
    """The keys of the records that stay whatever was chosen: pinned versions, and the newest
    `keep_last` builds of each app."""
    kept = {b.key for b in builds if b.summary.version in choice.keep_versions}
    # An OS's builds (publish --system) are kept apart from an app's of the same name.
    by_app: dict[tuple[str, str], list[Build]] = {}
    for b in builds:
        by_app.setdefault((b.summary.kind, b.summary.app), []).append(b)
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
        pause: str = "",
    ) -> None:
        self.manager = manager
        self.lease = lease
        self.say = say
        self.txid = secrets.token_hex(6)
        self.tombstones: list[str] = []
        self._began = 0.0
        self._pause = pause

    def sweep(self, now: float, *, dry_run: bool) -> None:
        """Tombstones whose lease ran out (a retire that did not finish) and intents older
        than a day (a publish that was killed) protect nothing any more: removed, and said."""
        tombstones, bad = records.read_tombstones(self.manager)
        intents, unread = records.read_intents(self.manager)
        for key, why in bad + unread:
            self.say(f"left {key}: {why}")
        stale = [
            (key, "tombstone of a retire that did not finish")
            for key, tombstone in tombstones
            if tombstone.expires < now
        ] + [
            (key, "intent of a publish that did not finish")
            for key, intent in intents
            if intent.started_at + STALE_INTENT < now
        ]
        for key, what in stale:
            self.say(f"{'would remove' if dry_run else 'removed'} {key}: the {what}")
        if stale and not dry_run:
            self._deleted([key for key, _ in stale])

    def plan(self, chosen: list[Build]) -> Plan:
        """The keys the chosen builds' records name. A record that cannot be read is named
        and its build left: what it names is unknown."""
        plan = Plan(builds=[])
        with ThreadPoolExecutor(READERS) as pool:
            read = list(pool.map(self._named_by, chosen))
        for build, answer in zip(chosen, read, strict=True):
            if not isinstance(answer, dict):
                why = answer or f"{build.key} is gone (another retire?)"
                plan.unread.append((build, why))
                self.say(f"left {build.label}: {why}")
                continue
            plan.builds.append(build)
            plan.keys.update(answer)
            plan.refs.update((uuid, build.id) for uuid, _ in answer.values() if uuid)
        return plan

    def _named_by(self, build: Build) -> dict[str, tuple[str, int]] | str | None:
        """What the build's record names; why not when it cannot be read; None when it is
        gone."""
        try:
            record = records.read_record(self.manager, build.key)
        except (BadRecord, PublishError) as exc:
            return str(exc)
        return None if record is None else named_keys(record)

    def protect(self, plan: Plan, now: float) -> None:
        """Keep what a publish under way or a remaining build names. Intents are listed before
        the references: a publish writes its intent before its references and removes it only
        after its record, so one whose intent is gone by now has its references listed."""
        retiring = {b.id for b in plan.builds}
        live_uuids, live_keys = self._live_intents(now)
        named = {
            uuid for uuid, ids in records.list_uuid_refs(self.manager).items() if ids - retiring
        }
        protected = named | live_uuids
        plan.kept = {
            key
            for key, (uuid, _) in plan.keys.items()
            if key in live_keys or not uuid or uuid in protected
        }

    def _uuid_refs(self) -> dict[str, set[str]]:
        """Every UUID a build names, with the ids of those builds (stores/builds.py's
        list_uuid_refs, in listings made at once)."""
        refs: dict[str, set[str]] = {}
        with ThreadPoolExecutor(len(_HEX_DIGITS)) as pool:
            listings = pool.map(
                lambda d: list(self.manager.listed(f"{records.UUIDS}{d}")), _HEX_DIGITS
            )
            for listing in listings:
                for item in listing:
                    uuid, _, build_id = item.key[len(records.UUIDS) :].partition("/")
                    if build_id and _is_identity(uuid):
                        refs.setdefault(uuid, set()).add(build_id)
        return refs

    def _live_intents(self, now: float) -> tuple[set[str], set[str]]:
        intents, _ = records.read_intents(self.manager)
        live = [intent for _, intent in intents if intent.started_at + STALE_INTENT >= now]
        uuids = {uuid for intent in live for uuid in intent.uuids}
        return uuids, {key for intent in live for key in intent.keys}

    def retire(self, plan: Plan, now: float) -> list[tuple[str, str]]:
        """The protocol proper: tombstone, records, what is still named, objects, references
        and claims. The failures to delete, each with why."""
        self._tombstone(self.txid, now, sorted(plan.uuids), sorted(plan.keys))
        self.paused("tombstone")
        failures = self._deleted([b.key for b in plan.builds])
        self.paused("records")
        self.protect(plan, time.time())
        self.paused("listed")
        failures += self._deleted(plan.deleted, step="batch")
        refs = [records.uuid_ref_key(uuid, build_id) for uuid, build_id in sorted(plan.refs)]
        failures += self._deleted(refs + [records.claim_key(b.id) for b in plan.builds])
        self.paused("refs")
        return failures

    def _tombstone(self, txid: str, now: float, uuids: list[str], keys: list[str]) -> None:
        """What this run may delete, and until when publishers that overlap it wait; the lease
        counts from just before it is written."""
        self._began = time.monotonic()
        tombstone = records.Tombstone(txid, now, self.lease, tuple(uuids), tuple(keys))
        self.tombstones.append(records.write_tombstone(self.manager, tombstone))

    def finish(self, plan: Plan, orphans: Sequence[Listed]) -> str:
        """The transaction record, then the tombstones go: the run is over."""
        transaction = records.Transaction(
            id=self.txid,
            who=f"{_user()}@{socket.gethostname()}",
            when=records.iso(records.utc_now()),
            builds=tuple(
                records.RetiredBuild(s.id, s.app, s.version, s.build)
                for s in (b.summary for b in plan.builds)
            ),
            objects=len(plan.deleted) + len(orphans),
            bytes=plan.bytes + sum(item.size for item in orphans),
        )
        key = records.write_transaction(self.manager, transaction)
        self.paused("transaction")
        self.manager.delete(self.tombstones)
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
        if not dry_run:
            self._tombstone(f"{self.txid}-orphans", now, [], sorted(candidates))
        _, live_keys = self._live_intents(time.time())
        named = self._named_by_records() | live_keys
        gone = [item for key, item in sorted(candidates.items()) if key not in named]
        if dry_run:
            return gone, []
        return gone, self._deleted([item.key for item in gone], step="batch")

    def _named_by_records(self) -> set[str]:
        """Every key a remaining record names; DsymfindError when a record cannot be read,
        since what it names is then unknown."""
        builds = listed_builds(self.manager, self.say)
        named: set[str] = set()
        with ThreadPoolExecutor(READERS) as pool:
            for answer in pool.map(self._named_by, builds):
                if isinstance(answer, str):
                    raise DsymfindError(
                        f"{answer}: orphans are not removed while what a record names is unknown"
                    )
                named.update(answer or {})
        return named

    def _deleted(self, keys: Sequence[str], step: str = "") -> list[tuple[str, str]]:
        """Delete in batches, a few at once, each begun only with LEASE_MARGIN of the lease
        left; every batch is done when this returns."""

        def batch(start: int) -> list[tuple[str, str]]:
            self._check_lease()
            failed = self.manager.delete(keys[start : start + BATCH])
            if step:
                self.paused(step)
            return failed

        with ThreadPoolExecutor(DELETERS) as pool:
            done = list(pool.map(batch, range(0, len(keys), BATCH)))
        return [failure for failed in done for failure in failed]

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

    def paused(self, step: str) -> None:
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
    run = Retirement(manager, lease=lease, say=say, pause=os.environ.get(PAUSE_ENV, ""))
    if not dry_run and (refusal := manager.may_delete()) is not None:
        raise DsymfindError(refusal)
    now = time.time()
    run.sweep(now, dry_run=dry_run)
    plan = run.plan(choose(listed_builds(manager, say), choice, now))
    failures: list[tuple[str, str]] = []
    if dry_run:
        run.protect(plan, now)
    elif plan.builds:
        run.paused("planned")
        failures = run.retire(plan, now)
    orphans: list[Listed] = []
    if orphans_older_than is not None:
        orphans, more = run.orphans(orphans_older_than, time.time(), dry_run=dry_run)
        failures += more
    transaction = ""
    if not dry_run and (plan.builds or orphans):
        transaction = run.finish(plan, orphans)
    return Outcome(run.txid, plan, orphans, failures, transaction)


def _is_identity(uuid: str) -> bool:
    """A UUID's 32 hex digits, or a PE's or PDB's store ID, as references spell them."""
    try:
        records.check_hex(uuid)
    except DsymfindError:
        return False
    return True


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
