"""A verified file in the cache's staging area, before place.admit moves it into an entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsymfind.apple import macho


# eq=False: one download is itself, whatever another holds.
@dataclass(slots=True, eq=False)
class Staged:
    """A verified download in the staging area: the DWARF file and the bundle holding it."""

    dwarf_path: str
    slices: list[macho.Slice]
    bundle_dir: str | None
    # Per-UUID plist values that came beside a bare DWARF file (a store's <key>.plist).
    plist_values: dict[str, object] = field(default_factory=dict)
    # A bare file's own name and its bundle's, from the store's metadata (stores/meta.py),
    # checked to be plain file names; None: named by the UUID.
    name: str | None = None
    bundle_name: str | None = None
    # A file already on this machine (a chained helper's answer): linked where it is,
    # as `dsymfind index` links a user's bundle, never moved.
    in_place: bool = False

    def file_name(self, uuid: str) -> str:
        """What a bare file is called in the cache: its own name, else its UUID."""
        return self.name or uuid
