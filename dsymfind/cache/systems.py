"""What the cache knows of Apple's own images on this machine: one record per slice UUID.

`dsymfind index` reads DeviceSupport folders and simulator runtimes (apple/device_support.py)
and writes `systems/<HEX>` for each slice: where the file lies (in the user's folder,
never copied), its architecture, and the OS build it came from. The helper answers such a
UUID with the file as its `DBGSymbolRichExecutable`; symbolicate names a bare system frame
from the file's symbol table. A record is a marshalled tuple (the helper reads it without
importing json), written whole or not at all; one whose file has gone, or no longer
carries the UUID, is no answer (`find` checks the first, readers of the Mach-O the second).
"""

from __future__ import annotations

import marshal
from typing import NamedTuple

from dsymfind import _bare_os, atomic
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

_FORMAT = 1
_HEX_LENGTH = 32
_UPPER_HEX = frozenset("0123456789ABCDEF")


class SystemImage(NamedTuple):
    uuid: str  # uppercase, dashed
    arch: str
    path: str  # the Mach-O file, where the user keeps it
    os: str  # "iOS", "macOS", "iOS Simulator", …
    version: str
    build: str
    install_path: str  # where the image lies on the device


def record(cache: CachePaths, image: SystemImage) -> bool:
    """Remember one slice; False when the record could not be written."""
    _bare_os.makedirs(cache.systems, mode=0o700, exist_ok=True)
    return atomic.write_marshal(cache.system_record(uuid_hex(image.uuid)), _value(image))


def record_in(folder: str, image: SystemImage, *, staged: bool) -> bool:
    """`record` for writers of thousands (`dsymfind index`) into a folder that exists:
    `cache.systems`, each record renamed into place; or, `staged`, a private staging
    folder the writer renames into place whole (a first index), each record written
    there directly."""
    path = _bare_os.join(folder, uuid_hex(image.uuid))
    if not staged:
        return atomic.write_small_marshal(path, _value(image))
    flags = _bare_os.O_WRONLY | _bare_os.O_CREAT | _bare_os.O_EXCL | _bare_os.O_CLOEXEC
    data = marshal.dumps(_value(image))
    try:
        fd = _bare_os.open(path, flags, 0o644)
    except OSError:
        return False
    try:
        return _bare_os.write(fd, data) == len(data)
    except OSError:
        return False
    finally:
        _bare_os.close(fd)


def _value(image: SystemImage) -> tuple[int | str, ...]:
    return (_FORMAT, *image)


def find(cache: CachePaths, uuid: str) -> SystemImage | None:
    """The system image recorded for `uuid` whose file still exists, or None."""
    image = recorded(cache, uuid_hex(uuid))
    if image is None or image.uuid.upper() != uuid.upper() or not _bare_os.isfile(image.path):
        return None
    return image


def recorded(cache: CachePaths, hex_name: str) -> SystemImage | None:
    """The record `systems/<hex_name>` as written, its file not looked at; None when
    missing, damaged or of another format."""
    value = atomic.read_marshal(cache.system_record(hex_name))
    if (
        not isinstance(value, tuple)
        or len(value) != len(SystemImage._fields) + 1
        or value[0] != _FORMAT
        or not all(isinstance(field, str) for field in value[1:])
    ):
        return None
    image = SystemImage(*value[1:])
    return image if uuid_hex(image.uuid) == hex_name else None


def names(cache: CachePaths) -> list[str]:
    """The records' names (32 uppercase hex digits each); other names are not ours."""
    try:
        listed = _bare_os.listdir(cache.systems)
    except OSError:
        return []
    return sorted(name for name in listed if is_hex_name(name))


def is_hex_name(name: str) -> bool:
    return len(name) == _HEX_LENGTH and all(c in _UPPER_HEX for c in name)


def drop(cache: CachePaths, hex_name: str) -> None:
    """Forget one slice, and the helper's remembered answer built from it."""
    atomic.unlink_quietly(cache.system_record(hex_name))
    atomic.unlink_quietly(cache.answer_file(hex_name))


def gone(cache: CachePaths) -> list[str]:
    """The records (their names) whose file no longer exists, or that cannot be read."""
    found = []
    for name in names(cache):
        image = recorded(cache, name)
        if image is None or not _bare_os.isfile(image.path):
            found.append(name)
    return found
