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

from typing import NamedTuple

from dsymfind import _bare_os, atomic
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

_FORMAT = 1


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
    return atomic.write_marshal(cache.system_record(uuid_hex(image.uuid)), (_FORMAT, *image))


def find(cache: CachePaths, uuid: str) -> SystemImage | None:
    """The system image recorded for `uuid` whose file still exists, or None."""
    value = atomic.read_marshal(cache.system_record(uuid_hex(uuid)))
    if (
        not isinstance(value, tuple)
        or len(value) != len(SystemImage._fields) + 1
        or value[0] != _FORMAT
        or not all(isinstance(field, str) for field in value[1:])
    ):
        return None
    image = SystemImage(*value[1:])
    if image.uuid.upper() != uuid.upper() or not _bare_os.isfile(image.path):
        return None
    return image
