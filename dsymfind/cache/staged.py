"""A verified file in the cache's staging area, before place.admit moves it into an entry."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsymfind.apple import macho


class Staged:
    """A verified download in the staging area: the DWARF file and the bundle holding it.

    Slotted by hand, not a dataclass: a helper's first hit from the cache's tree admits
    through cache/place.py, and dataclasses (with inspect) would cost it about 9 ms."""

    __slots__ = (
        "bundle_dir",
        "bundle_name",
        "dwarf_path",
        "in_place",
        "name",
        "plist_values",
        "slices",
    )

    def __init__(self, dwarf_path: str, slices: list[macho.Slice], bundle_dir: str | None) -> None:
        self.dwarf_path, self.slices, self.bundle_dir = dwarf_path, slices, bundle_dir
        # Per-UUID plist values that came beside a bare DWARF file (a store's <key>.plist).
        self.plist_values: dict[str, object] = {}
        # A bare file's own name and its bundle's, from the store's metadata (stores/meta.py),
        # checked to be plain file names; None: named by the UUID.
        self.name: str | None = None
        self.bundle_name: str | None = None
        # A file already on this machine (a chained helper's answer): linked where it is,
        # as `dsymfind index` links a user's bundle, never moved.
        self.in_place = False

    def file_name(self, uuid: str) -> str:
        """What a bare file is called in the cache: its own name, else its UUID."""
        return self.name or uuid
