"""What the cache knows of Apple's own images on this machine: one record per slice UUID,
kept in 256 shard files.

`dsymfind index` reads DeviceSupport folders and simulator runtimes (apple/device_support.py)
and records each slice: where the file lies (in the user's folder, never copied), its
architecture, and the OS build it came from. The helper answers such a UUID with the file
as its `DBGSymbolRichExecutable`; symbolicate names a bare system frame from the file's
symbol table. A record is a marshalled tuple (the helper reads it without importing json);
one whose file has gone, or no longer carries the UUID, is no answer (`usable` checks the
first, readers of the Mach-O the second).

The records live in `systems/<XX>`, the shard of the UUIDs whose hex name starts with the
two digits XX: a marshalled dict of hex name to record. A DeviceSupport folder of
thousands of slices is 256 files written, not a file made per slice (what made an index
cost several times its floor). Writers (`dsymfind index`, gc, check --repair) change
shards in a `Shards`, under the flock `locks/systems.lock`: each shard is read again under
the lock and a new one renamed over it, so two writers never lose each other's records.
Readers (the helper) take no lock and read one shard whole, in one open and one read: a
rename shows them the old shard or the new one, never part of one.

A cache written before the shards kept a file `systems/<HEX>` per slice; the next writer
moves those records into their shards and removes the files (`Shards.__enter__`).
"""

from __future__ import annotations

import fcntl
import os
from typing import NamedTuple

from dsymfind import _bare_os, atomic
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

_FORMAT = 1
_HEX_LENGTH = 32
_SHARD_LENGTH = 2
_UPPER_HEX = frozenset("0123456789ABCDEF")
_LOCK_NAME = "systems.lock"

Shard = dict[str, object]  # hex name -> record value, as marshalled


class SystemImage(NamedTuple):
    uuid: str  # uppercase, dashed
    arch: str
    path: str  # the Mach-O file, where the user keeps it
    os: str  # "iOS", "macOS", "iOS Simulator", …
    version: str
    build: str
    install_path: str  # where the image lies on the device


# A record's value: the format, then the image's fields.
_RECORD_LENGTH = 1 + len(SystemImage._fields)
_PATH_INDEX = 1 + SystemImage._fields.index("path")


def _value(image: SystemImage) -> tuple[int | str, ...]:
    return (_FORMAT, *image)


def image_of(hex_name: str, value: object) -> SystemImage | None:
    """The record `value` stored under `hex_name`; None when damaged or of another format."""
    if (
        not isinstance(value, tuple)
        or len(value) != _RECORD_LENGTH
        or value[0] != _FORMAT
        or not all(isinstance(field, str) for field in value[1:])
    ):
        return None
    image = SystemImage(*value[1:])
    return image if uuid_hex(image.uuid) == hex_name else None


def usable(value: object, uuid: str) -> SystemImage | None:
    """The record `value` of `uuid` (from its shard) when its file still exists, or None."""
    image = image_of(uuid_hex(uuid), value)
    if image is None or image.uuid.upper() != uuid.upper() or not _bare_os.isfile(image.path):
        return None
    return image


def read_shard(path: str) -> Shard:
    """A shard's records; {} when missing or damaged (check tells the two apart)."""
    value = atomic.read_marshal(path)
    return value if isinstance(value, dict) else {}


def recorded(cache: CachePaths, hex_name: str) -> SystemImage | None:
    """The record of `hex_name` as written, its file not looked at; None when missing,
    damaged or of another format."""
    return image_of(hex_name, read_shard(cache.system_record(hex_name)).get(hex_name))


def shard_names(cache: CachePaths) -> list[str]:
    """The shards' names in systems/ (two uppercase hex digits each)."""
    try:
        listed = _bare_os.listdir(cache.systems)
    except OSError:
        return []
    return sorted(name for name in listed if is_shard_name(name))


def every_record(cache: CachePaths) -> dict[str, SystemImage | None]:
    """Every record, by hex name, each shard read once; None for a damaged one."""
    found: dict[str, SystemImage | None] = {}
    for shard in shard_names(cache):
        for name, value in read_shard(_bare_os.join(cache.systems, shard)).items():
            if isinstance(name, str) and in_shard(name, shard):
                found[name] = image_of(name, value)
    return found


def recorded_paths(cache: CachePaths) -> dict[str, object]:
    """The file each record names, by hex name, each shard read once: what `index` checks
    an unchanged file against. Lighter than `every_record` (no record is checked whole:
    one damaged past its path is check's to find)."""
    found: dict[str, object] = {}
    for shard in shard_names(cache):
        for name, value in read_shard(_bare_os.join(cache.systems, shard)).items():
            if isinstance(value, tuple) and len(value) == _RECORD_LENGTH:
                found[name] = value[_PATH_INDEX]
    return found


def names(cache: CachePaths) -> list[str]:
    """The records' names (32 uppercase hex digits each)."""
    return sorted(every_record(cache))


def is_hex_name(name: str) -> bool:
    return len(name) == _HEX_LENGTH and all(c in _UPPER_HEX for c in name)


def is_shard_name(name: str) -> bool:
    return len(name) == _SHARD_LENGTH and all(c in _UPPER_HEX for c in name)


def shard_of(hex_name: str) -> str:
    """The name of the shard holding the record `hex_name`."""
    return hex_name[:_SHARD_LENGTH]


def in_shard(hex_name: str, shard: str) -> bool:
    return is_hex_name(hex_name) and hex_name.startswith(shard)


def label(cache: CachePaths, hex_name: str) -> str:
    """How messages name one record: its shard's path and its name."""
    return f"{cache.system_record(hex_name)}:{hex_name}"


def gone(cache: CachePaths) -> dict[str, SystemImage | None]:
    """The records whose file no longer exists, or that cannot be read (None), by name."""
    return {
        name: image
        for name, image in sorted(every_record(cache).items())
        if image is None or not _bare_os.isfile(image.path)
    }


def drop(cache: CachePaths, judged: dict[str, SystemImage | None]) -> list[str]:
    """Forget the records named, each only if it is still as it was judged (None: a
    damaged one), and the helper's answers built from them; the names dropped."""
    with Shards(cache) as shards:
        dropped = [
            name
            for name, image in judged.items()
            if shards.get(name) == image and shards.remove(name)
        ]
        failed = shards.save()
    forget_answers(cache, dropped)
    return [name for name in dropped if shard_of(name) not in failed]


def migrate(cache: CachePaths) -> None:
    """Move the records of the older layout into their shards now (any writer does)."""
    with Shards(cache) as shards:
        shards.save()


def discard_damaged(cache: CachePaths, shard: str) -> bool:
    """Remove the shard `shard` if it cannot be read (its records are lost: the next index
    of their folders makes them again); True when no damaged shard is left."""
    path = _bare_os.join(cache.systems, shard)
    with Shards(cache):
        if not isinstance(atomic.read_marshal(path), dict):
            atomic.unlink_quietly(path)
    return not _bare_os.lexists(path) or isinstance(atomic.read_marshal(path), dict)


def forget_answers(cache: CachePaths, hex_names: list[str]) -> None:
    """The helper's remembered answers built from dropped records go with them."""
    for name in hex_names:
        atomic.unlink_quietly(cache.answer_file(name))


class Shards:
    """The shards as one writer changes them, inside `with` (under the writers' lock):
    each read on first use, the changed ones written back by `save`."""

    def __init__(self, cache: CachePaths) -> None:
        self.cache = cache
        self._lock: int | None = None
        self._listed: set[str] = set()  # shards on disk when the lock was taken
        self._loaded: dict[str, Shard] = {}
        self._changed: set[str] = set()
        self._old_files: list[str] = []  # per-slice records of the older layout

    def __enter__(self) -> Shards:
        _bare_os.makedirs(self.cache.locks, mode=0o700, exist_ok=True)
        lock_path = _bare_os.join(self.cache.locks, _LOCK_NAME)
        self._lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # released by close, or by the holder's death
        try:
            listed = _bare_os.listdir(self.cache.systems)
        except OSError:
            listed = []
        self._listed = {name for name in listed if is_shard_name(name)}
        self._migrate(sorted(name for name in listed if is_hex_name(name)))
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._lock is not None:
            _bare_os.close(self._lock)
            self._lock = None

    def _migrate(self, old_names: list[str]) -> None:
        """Records of the older layout go into their shards (unless the shard has one of
        that name already, written since); their files go once the shards are saved."""
        for name in old_names:
            path = _bare_os.join(self.cache.systems, name)
            image = image_of(name, atomic.read_marshal(path))
            if image is not None and self.get(name) is None:
                self.put(image)
            self._old_files.append(path)

    def _shard(self, hex_name: str) -> Shard:
        key = shard_of(hex_name)
        shard = self._loaded.get(key)
        if shard is None:
            path = _bare_os.join(self.cache.systems, key)
            shard = self._loaded[key] = read_shard(path) if key in self._listed else {}
        return shard

    def get(self, hex_name: str) -> SystemImage | None:
        return image_of(hex_name, self._shard(hex_name).get(hex_name))

    def put(self, image: SystemImage) -> None:
        name = uuid_hex(image.uuid)
        value = _value(image)
        shard = self._shard(name)
        if shard.get(name) != value:
            shard[name] = value
            self._changed.add(shard_of(name))

    def remove(self, hex_name: str) -> bool:
        """Forget one record; False when there was none."""
        shard = self._shard(hex_name)
        if shard.pop(hex_name, None) is None:
            return False
        self._changed.add(shard_of(hex_name))
        return True

    def save(self) -> list[str]:
        """Write the changed shards, each renamed over its name; the names (`shard_of`) of
        those that could not be written (their records as they were before)."""
        failed = []
        if self._changed:
            _bare_os.makedirs(self.cache.systems, mode=0o700, exist_ok=True)
        for key in sorted(self._changed):
            path = _bare_os.join(self.cache.systems, key)
            if not atomic.write_small_marshal(path, self._loaded[key]):
                failed.append(key)
        self._changed.clear()
        if not failed:
            for path in self._old_files:
                atomic.unlink_quietly(path)
            self._old_files.clear()
        return failed
