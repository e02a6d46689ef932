"""Symbol-store conventions (DbgHelp's, and Microsoft's symbol servers'): where a PDB is
filed, its compressed and pointer forms, and two-tier stores.

A store files `crash.pdb` as `crash.pdb/<GUID><AGE>/crash.pdb`; a two-tier store (one
with `index2.txt` at its root) puts that under the name's first two characters. Instead
of the file a store may hold its CAB-compressed form (`crash.pd_`), or `file.ptr`, a
`PATH:` line naming where the file really is (or `MSG:`, a message instead).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from dsymfind.stores import layouts

INDEX2_FILE = "index2.txt"
POINTER_FILE = "file.ptr"
POINTER_PREFIX = "PATH:"
MESSAGE_PREFIX = "MSG:"
# file.ptr holds one path; index2.txt's content is irrelevant: neither needs more.
SMALL_FILE_BYTES = 64 * 1024


class Pointer(NamedTuple):
    """What a file.ptr says: a path to follow, or a message (`target` is then None)."""

    target: str | None
    message: str


def compressed_name(name: str) -> str:
    """The CAB form's name: the last character replaced by `_` (crash.pdb -> crash.pd_)."""
    return name[:-1] + "_"


def key_folder(name: str, key: str, *, two_tier: bool) -> str:
    """`<name>/<key>`, or `<prefix>/<name>/<key>` in a two-tier store."""
    one_tier = f"{name}/{key}"
    return f"{layouts.index2_prefix(one_tier)}/{one_tier}" if two_tier else one_tier


def local_folder(store: str, name: str, key: str) -> str:
    """The folder of a key in a local store, as that store is laid out."""
    return os.path.join(store, key_folder(name, key, two_tier=is_two_tier(store)))


def is_two_tier(store: str) -> bool:
    """Whether a local store is two-tier (servers are probed over their Reader instead)."""
    return os.path.isfile(os.path.join(store, INDEX2_FILE))


def read_pointer(text: str) -> Pointer:
    """A file.ptr's meaning; a file that is neither form says so in its message."""
    line = text.strip()
    if line.startswith(MESSAGE_PREFIX):
        return Pointer(None, f"says {line[len(MESSAGE_PREFIX) :].strip()!r}")
    if not line.startswith(POINTER_PREFIX):
        return Pointer(None, "is not a PATH: pointer")
    return Pointer(line[len(POINTER_PREFIX) :].strip(), "")
