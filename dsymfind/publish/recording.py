"""A publish run's side of the store's bookkeeping (docs/builds.md, SECURITY.md): the build
id claimed before anything is written, an intent that tells a retire at work which keys
this run may re-use, the retires it must wait out and whose deletions it puts back, then
the UUID refs and the build record, last.

The order is what makes a concurrent `retire` safe: a retire lists intents after writing
its tombstone, so a run that saw no tombstone is seen by it (its keys are kept); a run that
saw one waits until that retire has ended (or its lease ran out) and puts back what it
deleted before writing a record that names it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from dsymfind.errors import DsymfindError
from dsymfind.stores import builds
from dsymfind.stores.writers import Manager

# How often a run waiting out a retire looks whether its tombstone is gone.
TOMBSTONE_POLL = 0.5


class Recording:
    """One run's bookkeeping in `manager`, the store `store` names."""

    def __init__(self, manager: Manager, store: str, build_id: str) -> None:
        self.manager = manager
        self.store = store
        self.build_id = build_id
        self.noted: list[builds.Tombstone] = []
        self._intent: str | None = None
        self._claim: str | None = None

    def claim(self) -> None:
        """The build id, taken before anything else is written; DsymfindError when a run
        took it before."""
        if not builds.claim(self.manager, self.build_id):
            raise DsymfindError(f"build ID {self.build_id} exists in {self.store}")
        self._claim = builds.claim_key(self.build_id)

    def begin(self, uuids: Iterable[str], keys: Iterable[str]) -> None:
        """The intent written, then the retires at work whose deletions overlap it noted."""
        intent = builds.Intent(
            self.build_id, time.time(), tuple(sorted(set(uuids))), tuple(dict.fromkeys(keys))
        )
        self._intent = builds.write_intent(self.manager, intent)
        tombstones, _ = builds.read_tombstones(self.manager)
        wanted_uuids, wanted_keys = set(intent.uuids), set(intent.keys)
        self.noted = [
            tombstone
            for _, tombstone in tombstones
            if wanted_uuids & set(tombstone.uuids) or wanted_keys & set(tombstone.keys)
        ]

    def settle(self, keys: Sequence[tuple[str, str]], put_back: Callable[[str], None]) -> None:
        """For each retire noted: wait until it ended or its lease ran out, then
        `put_back` every key of ours (each with its UUID) it may have deleted: the caller
        checks that it is there and writes it again when not."""
        for tombstone in self.noted:
            key = builds.tombstone_key(tombstone.id)
            while time.time() < tombstone.expires and self.manager.read_small(key) is not None:
                time.sleep(TOMBSTONE_POLL)
            for mine, uuid in keys:
                if mine in tombstone.keys or uuid in tombstone.uuids:
                    put_back(mine)

    def finish(self, record: builds.Record) -> str:
        """The UUID refs, then the record (last); the intent removed. The record's key."""
        builds.write_uuid_refs(self.manager, self.build_id, (i.uuid for i in record.images))
        key = builds.write_record(self.manager, record)
        self._claim = None  # the id is the record's for good
        self.close()
        return key

    def close(self) -> None:
        """The intent removed, whatever became of the run (a run that wrote no record names
        nothing a retire must keep), and the id given back when no record took it, so that
        CI may run the same build again. Credentials that may not delete leave both: a
        retire removes intents a day old."""
        left = [key for key in (self._intent, self._claim) if key is not None]
        if left:
            self.manager.delete(left)
        self._intent = self._claim = None
