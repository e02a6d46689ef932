"""`dsymfind id`: a Mach-O file's slices and the keys symbol servers file them under."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from dsymfind import layouts, macho

_SERVER_LAYOUTS = (
    layouts.NATIVE,
    layouts.SYMSTORE,
    layouts.SYMSTORE_INDEX2,
    layouts.SSQP,
    layouts.UNIFIED,
)


def ident(files: Sequence[str], *, as_json: bool) -> int:
    """Exit 1 when any file is not a readable Mach-O (one stderr line each)."""
    report: list[dict[str, object]] = []
    failed = False
    for path in files:
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            print(f"dsymfind: {exc}", file=sys.stderr)
            failed = True
            continue
        report.append({"file": path, "slices": [_describe(path, s) for s in slices]})
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _print_report(report)
    return 1 if failed else 0


def _describe(path: str, piece: macho.Slice) -> dict[str, object]:
    described: dict[str, object] = {
        "arch": piece.arch,
        "uuid": piece.uuid,
        "filetype": piece.filetype_name,
    }
    if piece.uuid is not None:
        described["keys"] = _server_keys(os.path.basename(path), piece)
    return described


def _server_keys(name: str, piece: macho.Slice) -> dict[str, str]:
    assert piece.uuid is not None
    if piece.filetype_name == "MH_DSYM":
        return {layout: layouts.debug_file_key(layout, piece.uuid) for layout in _SERVER_LAYOUTS}
    keys = {}
    for layout in _SERVER_LAYOUTS:
        key = layouts.executable_key(layout, piece.uuid, name)
        if key is not None:
            keys[layout] = key
    return keys


def _print_report(report: list[dict[str, object]]) -> None:
    for entry in report:
        print(entry["file"])
        slices = entry["slices"]
        assert isinstance(slices, list)
        for piece in slices:
            print(f"  {piece['arch']:<8} {piece['uuid'] or '(no LC_UUID)'}  {piece['filetype']}")
            for layout, key in piece.get("keys", {}).items():
                print(f"    {layout + ':':<17}{key}")
