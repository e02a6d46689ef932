"""A store's own records of builds: what each publish put there, who publishes and retires
now, and what retiring removed (docs/builds.md).

Every object here is small JSON, created once and never replaced (Manager.create_small).
The record's key holds its summary (time, id, app, version, build, commit, image count,
bytes), so `dsymfind builds` lists a store from its listing alone, without reading one
record. Everything read back is untrusted: a record that does not parse raises BadRecord
naming its key, and the listings name what they skipped instead of stopping.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import secrets
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, TypeVar

from dsymfind.errors import DsymfindError
from dsymfind.stores.writers import SMALL_LIMIT, Manager

BUILDS = "_builds/"
BUILD_IDS = "_build-ids/"
UUIDS = "_uuids/"
PUBLISHING = "_publishing/"
RETIRING = "_retiring/"
RETIRED = "_retired/"
# The store's own records: never symbols, never what a retire counts as an object.
BOOKKEEPING = (BUILDS, BUILD_IDS, UUIDS, PUBLISHING, RETIRING, RETIRED)

FORMAT = 2
KINDS = ("dsym", "executable", "pe", "pdb", "portable-pdb")
# What a record is of: an app's build (what publish writes from a build's outputs), or an
# OS build's own libraries, published from a Mac's DeviceSupport folders (`publish --system`).
APP, SYSTEM = "app", "system"
RECORD_KINDS = (APP, SYSTEM)
# A build id is a key part on every kind of store and a word on a command line.
_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
# A Mach-O UUID is 32 upper-case hex digits; a PE's or a PDB's store ID (timestamp and
# size, GUID and age) stands for its UUID, upper-cased, and is 9 to 40.
_HEX = re.compile(r"[0-9A-F]{8,64}")
_STAMP = "%Y%m%dT%H%M%SZ"
# A record key as publish spells it: its time, its id, four fields as quote(safe="")
# leaves them (and their escapes), two counts, and the record's kind unless it is an app's
# (so that an app's key reads as it always did).
_QUOTED = r"([A-Za-z0-9_.~%-]*)"
_RECORD_KEY = re.compile(
    rf"{BUILDS}([0-9]{{8}}T[0-9]{{6}}Z),([A-Za-z0-9._-]{{1,100}}),"
    + ",".join([_QUOTED] * 4)
    + r",([0-9]{1,15}),([0-9]{1,20})"
    + rf"(?:,({'|'.join(RECORD_KINDS[1:])}))?\.json",
    re.ASCII,
)
# Where a stamp's year, month, day, hours, minutes and seconds lie.
_STAMP_FIELDS = ((0, 4), (4, 6), (6, 8), (9, 11), (11, 13), (13, 15))
# Text fields are names and versions, never documents; a record key must stay under the
# 1,024 bytes S3 allows, quoting included.
MAX_TEXT = 200
# A path, a URL, a remote: longer than a name, still one line.
MAX_LINE = 4096
# Far more images than any app ships, far fewer than SMALL_LIMIT's bytes could spell out.
MAX_ITEMS = 100_000
# Refs written at once: as many as publish has parts of an upload in flight, about.
REF_WRITERS = 8
_T = TypeVar("_T")


class BadRecord(DsymfindError):
    """A store's record (or its key) that is not what dsymfind writes; the message names the
    key and says what is wrong."""


class Summary(NamedTuple):
    """What a record's key says about it: enough for `dsymfind builds` to list."""

    published_at: str  # UTC, YYYYMMDDTHHMMSSZ: keys sort by time
    id: str
    app: str
    version: str
    build: str
    commit: str
    images: int
    bytes: int
    kind: str = APP  # one of RECORD_KINDS

    @property
    def published(self) -> datetime.datetime:
        return from_stamp(self.published_at)

    @property
    def published_iso(self) -> str:
        """The time as records spell it (`iso`), without parsing it: listings say thousands."""
        t = self.published_at
        return f"{t[:4]}-{t[4:6]}-{t[6:8]}T{t[9:11]}:{t[11:13]}:{t[13:15]}Z"

    @property
    def key(self) -> str:
        parts = [self.published_at, self.id, self.app, self.version, self.build, self.commit]
        parts += [str(self.images), str(self.bytes)]
        parts += [] if self.kind == APP else [self.kind]
        return BUILDS + ",".join(urllib.parse.quote(part, safe="") for part in parts) + ".json"


class Image(NamedTuple):
    name: str
    uuid: str  # 32 upper-case hex digits; a PE's or PDB's store ID, upper-cased
    arch: str
    kind: str  # one of KINDS
    key: str
    size: int
    # Where a system image lies on the device (/System/Library/Frameworks/UIKit.framework/
    # UIKit); "" for an app's images, whose records leave it out.
    install_path: str = ""


class CIRun(NamedTuple):
    system: str  # "github", "gitlab", "xcode-cloud", "jenkins", "buildkite", "circleci"
    run: str
    url: str | None


class Record(NamedTuple):
    """One publish run: what it was built from and every image it put in the store."""

    id: str
    app: str
    bundle_id: str
    version: str
    build: str
    published_at: str  # ISO 8601 UTC: 2026-12-02T13:26:13Z
    commit: str
    remote: str
    dirty: bool
    ci: CIRun | None
    host: str
    images: tuple[Image, ...]
    inputs: tuple[dict[str, object], ...] = ()
    objects: tuple[dict[str, object], ...] = ()
    sources: tuple[dict[str, object], ...] = ()
    kind: str = APP  # one of RECORD_KINDS

    @property
    def summary(self) -> Summary:
        return Summary(
            published_at=stamp(parse_time(self.published_at, "published_at")),
            id=self.id,
            app=self.app,
            version=self.version,
            build=self.build,
            commit=self.commit,
            images=len(self.images),
            bytes=sum(image.size for image in self.images),
            kind=self.kind,
        )

    @property
    def key(self) -> str:
        return self.summary.key


class Intent(NamedTuple):
    """A publish at work: what it is checking and writing, before its record exists."""

    id: str
    started_at: float  # seconds since the epoch
    uuids: tuple[str, ...]
    keys: tuple[str, ...]


class Tombstone(NamedTuple):
    """A retire at work: what it may delete, until `started_at + lease`."""

    id: str
    started_at: float  # seconds since the epoch
    lease: float  # seconds
    uuids: tuple[str, ...]
    keys: tuple[str, ...]

    @property
    def expires(self) -> float:
        return self.started_at + self.lease


class RetiredBuild(NamedTuple):
    id: str
    app: str
    version: str
    build: str


class Transaction(NamedTuple):
    """What one retire removed, kept in the store as its history."""

    id: str
    who: str  # user@host
    when: str  # ISO 8601 UTC
    builds: tuple[RetiredBuild, ...]
    objects: int
    bytes: int
    dry_run: bool = False

    @property
    def key(self) -> str:
        return f"{RETIRED}{stamp(parse_time(self.when, 'when'))}-{self.id}.json"


# Keys and ids.


def check_id(build_id: str) -> str:
    """The id unchanged; DsymfindError when it is no build id."""
    if not _ID.fullmatch(build_id):
        raise DsymfindError(
            f"build ID {build_id!r} is not 1 to 100 of the characters A-Z a-z 0-9 . _ -"
        )
    return build_id


def new_id(now: datetime.datetime | None = None) -> str:
    """A build id nobody gave: the time, then randomness that keeps one second's runs apart."""
    return f"{stamp(now or utc_now())}-{secrets.token_hex(4)}"


def claim_key(build_id: str) -> str:
    return BUILD_IDS + check_id(build_id)


def uuid_ref_key(uuid: str, build_id: str) -> str:
    return f"{UUIDS}{check_hex(uuid)}/{check_id(build_id)}"


def intent_key(build_id: str) -> str:
    return f"{PUBLISHING}{check_id(build_id)}.json"


def tombstone_key(txid: str) -> str:
    return f"{RETIRING}{check_id(txid)}.json"


def check_hex(uuid: str) -> str:
    if not _HEX.fullmatch(uuid):
        raise DsymfindError(f"{uuid[:70]!r} is not a UUID (or store ID) in upper-case hex")
    return uuid


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime(_STAMP)


def from_stamp(text: str) -> datetime.datetime:
    """The time a key's stamp spells; ValueError when it spells none."""
    return datetime.datetime.strptime(text, _STAMP).replace(tzinfo=datetime.UTC)


def iso(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, field: str) -> datetime.datetime:
    """An ISO 8601 time with its zone; BadRecord naming `field` otherwise."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadRecord(f"{field} {text[:40]!r} is no ISO 8601 time") from None
    if moment.tzinfo is None:
        raise BadRecord(f"{field} {text[:40]!r} names no time zone")
    return moment


def parse_summary(key: str) -> Summary:
    """The summary a record key spells; BadRecord naming the key when it spells none. One
    pattern for the whole key, and unquoting only where there is something to unquote:
    `dsymfind builds` parses ten thousand keys a run."""
    spelled = _RECORD_KEY.fullmatch(key)
    if spelled is None:
        raise BadRecord(f"{key}: not a build record's key")
    stamp_text, build_id, *quoted, images, size, kind = spelled.groups()
    try:
        year, month, day, hour, minute, second = (int(stamp_text[a:b]) for a, b in _STAMP_FIELDS)
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise BadRecord(f"{key}: not a build record's key (its time)") from None
    app, version, build, commit = (_unquoted(key, part) for part in quoted)
    return Summary(
        stamp_text, build_id, app, version, build, commit, int(images), int(size), kind or APP
    )


def _unquoted(key: str, part: str) -> str:
    """A field of a record key, unquoted; BadRecord unless publish would spell it so."""
    text = part
    if "%" in part:
        try:
            text = urllib.parse.unquote(part, errors="strict")
        except UnicodeDecodeError:
            raise BadRecord(f"{key}: not a build record's key (not UTF-8)") from None
        if urllib.parse.quote(text, safe="") != part:
            raise BadRecord(f"{key}: not a build record's key (not spelled as publish spells it)")
    if len(text) > MAX_TEXT:
        raise BadRecord(f"{key}: a field of its key is longer than {MAX_TEXT} characters")
    return text


# Encoding: json, as every reader knows it.


def _dumps(document: Mapping[str, object]) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()


def encode_record(record: Record) -> bytes:
    """The record's bytes; DsymfindError for a record its own reader would refuse."""
    document = {
        "format": FORMAT,
        "kind": record.kind,
        "id": record.id,
        "app": record.app,
        "bundle_id": record.bundle_id,
        "version": record.version,
        "build": record.build,
        "published_at": record.published_at,
        "commit": record.commit,
        "remote": record.remote,
        "dirty": record.dirty,
        "ci": record.ci._asdict() if record.ci else None,
        "host": record.host,
        "inputs": list(record.inputs),
        "images": [_image_document(image) for image in record.images],
        "objects": list(record.objects),
        "sources": list(record.sources),
    }
    data = _dumps(document)
    try:
        decode_record(data, record.key)
    except BadRecord as exc:
        raise DsymfindError(f"build record not written: {exc}") from None
    return data


def decode_record(data: bytes, key: str) -> Record:
    """The record in `data`, read from `key`; BadRecord naming the key for anything else."""
    with _naming(key):
        document = _document(data)
        if document.get("format") != FORMAT:
            raise BadRecord(f"format {str(document.get('format'))[:20]!r} is not {FORMAT}")
        record = Record(
            id=check_id(_text(document, "id")),
            app=_text(document, "app"),
            bundle_id=_text(document, "bundle_id"),
            version=_text(document, "version"),
            build=_text(document, "build"),
            published_at=_text(document, "published_at"),
            commit=_text(document, "commit"),
            remote=_text(document, "remote", MAX_LINE),
            dirty=_bool(document, "dirty"),
            ci=_ci(document.get("ci")),
            host=_text(document, "host", MAX_LINE),
            images=tuple(_image(item) for item in _list(document, "images")),
            inputs=_mappings(document, "inputs"),
            objects=_mappings(document, "objects"),
            sources=_mappings(document, "sources"),
            kind=_record_kind(document),
        )
        parse_time(record.published_at, "published_at")
        return record


def _image_document(image: Image) -> dict[str, object]:
    """An image as a record holds it: an app's without the install path it has none of."""
    document: dict[str, object] = image._asdict()
    if not image.install_path:
        del document["install_path"]
    return document


def _record_kind(document: Mapping[str, object]) -> str:
    """The record's kind: an app's when it says none (records written before system ones)."""
    if "kind" not in document:
        return APP
    kind = _text(document, "kind")
    if kind not in RECORD_KINDS:
        raise BadRecord(f"kind {kind[:20]!r} is not one of {', '.join(RECORD_KINDS)}")
    return kind


def encode_intent(intent: Intent) -> bytes:
    return _dumps(intent._asdict() | {"uuids": list(intent.uuids), "keys": list(intent.keys)})


def decode_intent(data: bytes, key: str) -> Intent:
    with _naming(key):
        document = _document(data)
        return Intent(
            id=check_id(_text(document, "id")),
            started_at=_number(document, "started_at"),
            uuids=_uuids(document),
            keys=_texts(document, "keys"),
        )


def encode_tombstone(tombstone: Tombstone) -> bytes:
    fields = tombstone._asdict()
    return _dumps(fields | {"uuids": list(tombstone.uuids), "keys": list(tombstone.keys)})


def decode_tombstone(data: bytes, key: str) -> Tombstone:
    with _naming(key):
        document = _document(data)
        return Tombstone(
            id=check_id(_text(document, "id")),
            started_at=_number(document, "started_at"),
            lease=_number(document, "lease"),
            uuids=_uuids(document),
            keys=_texts(document, "keys"),
        )


def encode_transaction(transaction: Transaction) -> bytes:
    builds = [build._asdict() for build in transaction.builds]
    return _dumps(transaction._asdict() | {"builds": builds})


def decode_transaction(data: bytes, key: str) -> Transaction:
    with _naming(key):
        document = _document(data)
        transaction = Transaction(
            id=check_id(_text(document, "id")),
            who=_text(document, "who", MAX_LINE),
            when=_text(document, "when"),
            builds=tuple(_retired_build(item) for item in _list(document, "builds")),
            objects=_count(document, "objects"),
            bytes=_count(document, "bytes"),
            dry_run=_bool(document, "dry_run"),
        )
        parse_time(transaction.when, "when")
        return transaction


# Validation of untrusted JSON.


@contextlib.contextmanager
def _naming(key: str) -> Iterator[None]:
    """Puts the key in front of what is wrong, a bad id or UUID included."""
    try:
        yield
    except DsymfindError as exc:
        raise BadRecord(f"{key}: {exc}") from None


def _document(data: bytes) -> Mapping[str, object]:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise BadRecord(f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(document, dict):
        raise BadRecord("not a JSON object")
    return document


def _text(document: Mapping[str, object], field: str, limit: int = MAX_TEXT) -> str:
    value = document.get(field)
    if not isinstance(value, str):
        raise BadRecord(f"{field} is not text")
    if len(value) > limit:
        raise BadRecord(f"{field} is longer than {limit} characters")
    return value


def _bool(document: Mapping[str, object], field: str) -> bool:
    value = document.get(field)
    if not isinstance(value, bool):
        raise BadRecord(f"{field} is not true or false")
    return value


def _number(document: Mapping[str, object], field: str) -> float:
    value = document.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise BadRecord(f"{field} is not a number")
    return float(value)


def _count(document: Mapping[str, object], field: str) -> int:
    value = document.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRecord(f"{field} is not a count")
    return value


def _list(document: Mapping[str, object], field: str) -> list[object]:
    value = document.get(field)
    if not isinstance(value, list):
        raise BadRecord(f"{field} is not a list")
    if len(value) > MAX_ITEMS:
        raise BadRecord(f"{field} holds more than {MAX_ITEMS} items")
    return value


def _object(item: object, field: str) -> Mapping[str, object]:
    if not isinstance(item, dict):
        raise BadRecord(f"an item of {field} is not a JSON object")
    return item


def _mappings(document: Mapping[str, object], field: str) -> tuple[dict[str, object], ...]:
    return tuple(dict(_object(item, field)) for item in _list(document, field))


def _texts(document: Mapping[str, object], field: str) -> tuple[str, ...]:
    items = _list(document, field)
    if not all(isinstance(item, str) and len(item) <= MAX_LINE for item in items):
        raise BadRecord(f"an item of {field} is not a line of text")
    return tuple(str(item) for item in items)


def _uuids(document: Mapping[str, object]) -> tuple[str, ...]:
    return tuple(check_hex(uuid) for uuid in _texts(document, "uuids"))


def _image(item: object) -> Image:
    fields = _object(item, "images")
    kind = _text(fields, "kind")
    if kind not in KINDS:
        raise BadRecord(f"image kind {kind[:20]!r} is not one of {', '.join(KINDS)}")
    return Image(
        name=_text(fields, "name", MAX_LINE),
        uuid=check_hex(_text(fields, "uuid")),
        arch=_text(fields, "arch"),
        kind=kind,
        key=_text(fields, "key", MAX_LINE),
        size=_count(fields, "size"),
        install_path=_text(fields, "install_path", MAX_LINE) if "install_path" in fields else "",
    )


def _ci(value: object) -> CIRun | None:
    if value is None:
        return None
    fields = _object(value, "ci")
    url = fields.get("url")
    if url is not None and not (isinstance(url, str) and len(url) <= MAX_LINE):
        raise BadRecord("ci.url is not text")
    return CIRun(_text(fields, "system"), _text(fields, "run", MAX_LINE), url)


def _retired_build(item: object) -> RetiredBuild:
    fields = _object(item, "builds")
    return RetiredBuild(
        check_id(_text(fields, "id")),
        _text(fields, "app"),
        _text(fields, "version"),
        _text(fields, "build"),
    )


# Over a store.


def list_summaries(manager: Manager) -> tuple[list[Summary], list[tuple[str, str]]]:
    """Every build record's summary, newest first, from the listing alone; and the keys
    skipped, each with why."""
    summaries: list[Summary] = []
    skipped: list[tuple[str, str]] = []
    for listed in manager.listed(BUILDS):
        try:
            summaries.append(parse_summary(listed.key))
        except BadRecord as exc:
            skipped.append((listed.key, str(exc)))
    summaries.reverse()
    return summaries, skipped


def read_record(manager: Manager, key: str) -> Record | None:
    """The record at `key`; None when it is gone; BadRecord when it is not one."""
    data = manager.read_small(key, SMALL_LIMIT)
    if data is None:
        return None
    record = decode_record(data, key)
    summary = parse_summary(key)
    if record.id != summary.id:
        raise BadRecord(f"{key}: holds the record of build {record.id}")
    if record.kind != summary.kind:
        raise BadRecord(f"{key}: holds a record of kind {record.kind}")
    return record


def write_record(manager: Manager, record: Record) -> str:
    """Create the record (create-only); its key. DsymfindError when the key is taken."""
    key = record.key
    if not manager.create_small(key, encode_record(record)):
        raise DsymfindError(f"{manager.where(key)} exists already")
    return key


def claim(manager: Manager, build_id: str) -> bool:
    """Take the build id in this store; False when a run took it before."""
    return manager.create_small(claim_key(build_id), b"")


def builds_naming(manager: Manager, uuid: str) -> list[str]:
    """The ids of the builds whose records name an image of `uuid`."""
    prefix = f"{UUIDS}{check_hex(uuid)}/"
    named = (listed.key[len(prefix) :] for listed in manager.listed(prefix))
    return [build_id for build_id in named if _ID.fullmatch(build_id)]


def list_uuid_refs(manager: Manager) -> dict[str, set[str]]:
    """Every UUID a build names, with the ids of those builds; keys that are not refs are
    ignored."""
    refs: dict[str, set[str]] = {}
    for listed in manager.listed(UUIDS):
        uuid, _, build_id = listed.key[len(UUIDS) :].partition("/")
        if _HEX.fullmatch(uuid) and _ID.fullmatch(build_id):
            refs.setdefault(uuid, set()).add(build_id)
    return refs


def write_uuid_refs(manager: Manager, build_id: str, uuids: Iterable[str]) -> None:
    """A ref per UUID, several at once: each is a request of its own, and an app with
    its frameworks names hundreds."""
    keys = [uuid_ref_key(uuid, build_id) for uuid in sorted(set(uuids))]
    with ThreadPoolExecutor(REF_WRITERS) as pool:
        list(pool.map(lambda key: manager.create_small(key, b""), keys))


def write_intent(manager: Manager, intent: Intent) -> str:
    key = intent_key(intent.id)
    if not manager.create_small(key, encode_intent(intent)):
        raise DsymfindError(f"{manager.where(key)} exists already")
    return key


def write_tombstone(manager: Manager, tombstone: Tombstone) -> str:
    key = tombstone_key(tombstone.id)
    if not manager.create_small(key, encode_tombstone(tombstone)):
        raise DsymfindError(f"{manager.where(key)} exists already")
    return key


def read_intents(manager: Manager) -> tuple[list[tuple[str, Intent]], list[tuple[str, str]]]:
    """Every publish at work, each with its key; and the keys skipped, each with why."""
    return _read_all(manager, PUBLISHING, decode_intent)


def read_tombstones(
    manager: Manager,
) -> tuple[list[tuple[str, Tombstone]], list[tuple[str, str]]]:
    """Every retire at work, each with its key; and the keys skipped, each with why."""
    return _read_all(manager, RETIRING, decode_tombstone)


def write_transaction(manager: Manager, transaction: Transaction) -> str:
    key = transaction.key
    if not manager.create_small(key, encode_transaction(transaction)):
        raise DsymfindError(f"{manager.where(key)} exists already")
    return key


def list_transactions(
    manager: Manager,
) -> tuple[list[Transaction], list[tuple[str, str]]]:
    """Every retire's transaction, newest first; and the keys skipped, each with why."""
    found, skipped = _read_all(manager, RETIRED, decode_transaction)
    return [transaction for _, transaction in reversed(found)], skipped


def _read_all(
    manager: Manager, prefix: str, decode: Callable[[bytes, str], _T]
) -> tuple[list[tuple[str, _T]], list[tuple[str, str]]]:
    found: list[tuple[str, _T]] = []
    skipped: list[tuple[str, str]] = []
    for listed in manager.listed(prefix):
        try:
            data = manager.read_small(listed.key, SMALL_LIMIT)
            if data is not None:
                found.append((listed.key, decode(data, listed.key)))
        except DsymfindError as exc:
            skipped.append((listed.key, str(exc)))
    return found, skipped
