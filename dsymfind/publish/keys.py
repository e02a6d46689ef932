"""Where each verified piece goes in a store: the same keys the fetch side asks for.

Mach-O pieces use stores/layouts.py, per layout; PE and PDB files use the symbol-store
convention `<name>/<ID>/<name>` (stores/symstore.py), as each layout files it (its record's
`store_key`: two-tier under `symstore_index2`, lowercased under `ssqp`). A DWARF file's
per-UUID plist travels as `<key>.plist`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dsymfind.errors import DsymfindError
from dsymfind.publish.inputs import DWARF, EXECUTABLE, Piece
from dsymfind.stores import layouts, meta

# The layouts `publish` writes, as their records say (stores/layouts.py).
PUBLISHABLE = layouts.PUBLISHABLE
PLIST_SUFFIX = ".plist"


@dataclass(frozen=True)
class Planned:
    """One object to write: `key` holds `data` (a plist) or the bytes of `path`."""

    key: str
    piece: Piece
    path: str | None
    data: bytes | None = None
    # Metadata, which the first publisher of a key decides: other bytes there (the unified
    # layout's one `meta` per folder, written for a dSYM and for its executable) are no
    # conflict.
    advisory: bool = False


def checked_layouts(names: list[str]) -> list[str]:
    for name in names:
        if name not in PUBLISHABLE:
            raise DsymfindError(
                f"--layout {name}: cannot publish in it (one of {', '.join(PUBLISHABLE)})"
            )
    return list(dict.fromkeys(names))


def plan(pieces: list[Piece], layout_names: list[str], casing: str) -> list[Planned]:
    """Every object of every piece under every layout. A key may come twice (symstore and
    ssqp agree on lowercase keys; two inputs may carry one UUID): the caller compares bytes."""
    planned = [
        item
        for piece in pieces
        for layout in layout_names
        for item in _objects(piece, layout, casing)
    ]
    return _one_metadata_per_key(planned)


def _one_metadata_per_key(planned: list[Planned]) -> list[Planned]:
    """Metadata keys several files share get one content, so that a run never finds its own
    metadata "other": the unified layout's one `meta` per folder serves a UUID's dSYM and its
    executable, and names the executable's file (what lldb calls the module, and what Xcode
    names the DWARF file in the dSYM) with the dSYM's bundle and build."""
    sharing: dict[str, list[Piece]] = {}
    for item in planned:
        if item.advisory:
            sharing.setdefault(item.key, []).append(item.piece)
    shared = {key: _shared(pieces) for key, pieces in sharing.items() if len(pieces) > 1}
    return [
        replace(item, data=shared[item.key]) if item.advisory and item.key in shared else item
        for item in planned
    ]


def _shared(pieces: list[Piece]) -> bytes:
    dwarf = next((p for p in pieces if p.kind == DWARF), pieces[0])
    binary = next((p for p in pieces if p.kind == EXECUTABLE), dwarf)
    described = metadata_of(replace(dwarf, name=binary.name))
    assert described is not None  # metadata keys are only planned for Mach-O pieces
    return described


def _objects(piece: Piece, layout: str, casing: str) -> list[Planned]:
    key = _key(piece, layout)
    if key is None:
        return []
    key = layouts.apply_casing(key, casing)
    objects = [Planned(key, piece, piece.path)]
    if piece.plist is not None:
        objects.append(Planned(key + PLIST_SUFFIX, piece, None, piece.plist))
    described = metadata_of(piece)
    meta_key = layouts.metadata_key(layout, key, casing)
    if described is not None and meta_key is not None:
        objects.append(Planned(meta_key, piece, None, described, advisory=True))
    return objects


def metadata_of(piece: Piece) -> bytes | None:
    """What a download needs to name a Mach-O piece as it was named (stores/meta.py): its
    file name, architecture and bundle; None for PE and PDB files, whose keys hold the name."""
    if piece.uuid is None or piece.arch is None:
        return None
    source = None if piece.source is None else piece.source.as_dict()
    return meta.encode(piece.name, piece.arch, piece.bundle, source)


def _key(piece: Piece, layout: str) -> str | None:
    if piece.uuid is not None:
        if piece.kind == DWARF:
            return layouts.debug_file_key(layout, piece.uuid)
        assert piece.kind == EXECUTABLE
        return layouts.executable_key(layout, piece.uuid, piece.name)
    assert piece.store_id is not None
    return windows_key(layout, piece.name, piece.store_id)


def windows_key(layout: str, name: str, store_id: str) -> str:
    """`<name>/<ID>/<name>` as the layout files it."""
    return layouts.BY_NAME[layout].store_key(f"{name}/{store_id}/{name}")
