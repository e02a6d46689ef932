"""`dsymfind id`: a Mach-O or PE file's identity and the keys symbol servers file it under."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from dsymfind.apple import bundle, macho
from dsymfind.fetch import layouts
from dsymfind.windows import pe

_SERVER_LAYOUTS = (
    layouts.NATIVE,
    layouts.SYMSTORE,
    layouts.SYMSTORE_INDEX2,
    layouts.SSQP,
    layouts.UNIFIED,
)


def ident(files: Sequence[str], *, as_json: bool) -> int:
    """Exit 1 when any file is not a readable Mach-O or PE file (one stderr line each)."""
    report: list[dict[str, object]] = []
    failed = False
    for path in files:
        try:
            report.append(_describe_pe(path) if _is_pe(path) else _describe_macho(path))
        except (macho.MachOError, pe.PEError) as exc:
            print(f"dsymfind: {exc}", file=sys.stderr)
            failed = True
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _print_report(report)
    return 1 if failed else 0


def _is_pe(path: str) -> bool:
    try:
        return bundle.read_small_file(path, len(pe.DOS_SIGNATURE)) == pe.DOS_SIGNATURE
    except OSError:
        return False  # the Mach-O reader says what is wrong with it


def _describe_macho(path: str) -> dict[str, object]:
    slices = macho.read_slices(path)
    return {"file": path, "slices": [_describe(path, s) for s in slices]}


def _describe_pe(path: str) -> dict[str, object]:
    image = pe.read_identity(path)
    name = os.path.basename(path)
    described: dict[str, object] = {
        "file": path,
        "format": image.format_name,
        "machine": image.machine_name,
        "timestamp": f"{image.timestamp:08X}",
        "size_of_image": image.size_of_image,
    }
    keys = {"pe": f"{name}/{image.pe_key}/{name}"}
    if image.codeview is None:
        assert image.debug_status is not None
        described["no_pdb"] = {"status": image.debug_status.value, "detail": image.debug_detail}
    else:
        cv = image.codeview
        described.update(guid=str(cv.guid).upper(), age=cv.age, pdb=cv.pdb_path)
        keys = {"pdb": f"{cv.pdb_name}/{cv.key}/{cv.pdb_name}", **keys}
    described["keys"] = keys
    return described


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
        if "slices" not in entry:
            _print_pe(entry)
            continue
        slices = entry["slices"]
        assert isinstance(slices, list)
        for piece in slices:
            print(f"  {piece['arch']:<8} {piece['uuid'] or '(no LC_UUID)'}  {piece['filetype']}")
            for layout, key in piece.get("keys", {}).items():
                print(f"    {layout + ':':<17}{key}")


def _print_pe(entry: dict[str, object]) -> None:
    print(
        f"  {entry['format']} {entry['machine']}  TimeDateStamp {entry['timestamp']}"
        f"  SizeOfImage 0x{entry['size_of_image']:X}"
    )
    if "guid" in entry:
        print(f"  GUID {entry['guid']}  age {entry['age']}  PDB {entry['pdb']}")
    else:
        no_pdb = entry["no_pdb"]
        assert isinstance(no_pdb, dict)
        print(f"  no PDB identity ({no_pdb['status']}): {no_pdb['detail']}")
    keys = entry["keys"]
    assert isinstance(keys, dict)
    for kind, key in keys.items():
        print(f"    {kind + ' key:':<17}{key}")
