"""`dsymfind id`: the identity of a Mach-O file (or of a `.dSYM` bundle's DWARF files), a PE
file or a PDB, and the keys symbol servers file it under."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from dsymfind.apple import bundle, macho
from dsymfind.stores import layouts
from dsymfind.windows import pdb, pe, portable_pdb

PDB_FORMAT = "PDB 7.0"
PORTABLE_PDB_FORMAT = "Portable PDB"
_UNREADABLE = (macho.MachOError, pe.PEError, pdb.PdbError)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="a file, or a .dSYM bundle")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    return ident(args.files, as_json=args.json)


def ident(files: Sequence[str], *, as_json: bool) -> int:
    """Exit 1 when any file is not a readable Mach-O, PE or PDB file, or a folder holds no
    DWARF file (one stderr line each)."""
    report: list[dict[str, object]] = []
    failed = False
    for path in files:
        try:
            targets = _targets(path)
        except macho.MachOError as exc:
            print(f"dsymfind: {exc}", file=sys.stderr)
            failed = True
            continue
        for target, bundle_dir in targets:
            try:
                report.append(_describe_file(target, bundle_dir))
            except _UNREADABLE as exc:
                print(f"dsymfind: {exc}", file=sys.stderr)
                failed = True
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _print_report(report)
    return 1 if failed else 0


def _targets(path: str) -> list[tuple[str, str | None]]:
    """The files to describe for `path`, each with the bundle holding it: a folder stands
    for the DWARF files of the `.dSYM` bundle it is (the identity is theirs)."""
    if not os.path.isdir(path):
        return [(path, None)]
    dwarf = bundle.dwarf_files(path)
    if not dwarf:
        raise macho.MachOError(
            f"{path}: a folder without DWARF files (a .dSYM bundle holds them in "
            f"{bundle.DWARF_SUBDIR})"
        )
    return [(file, path) for file in dwarf]


def _describe_file(path: str, bundle_dir: str | None) -> dict[str, object]:
    head = _head(path)
    if head.startswith(pe.DOS_SIGNATURE):
        return _describe_pe(path)
    if pdb.looks_like_pdb(head):
        return _describe_pdb(path)
    return _describe_macho(path, bundle_dir)


def _head(path: str) -> bytes:
    try:
        return bundle.read_small_file(path, pdb.SIGNATURE_BYTES)
    except OSError:
        return b""  # the Mach-O reader says what is wrong with it


def _describe_macho(path: str, bundle_dir: str | None) -> dict[str, object]:
    slices = macho.read_slices(path)
    described: dict[str, object] = {"file": path}
    if bundle_dir is not None:
        described["bundle"] = bundle_dir
    described["slices"] = [_describe(path, s) for s in slices]
    return described


def _describe_pdb(path: str) -> dict[str, object]:
    found = pdb.read_identity(path)
    name = os.path.basename(path)
    if isinstance(found, portable_pdb.PortablePdbIdentity):
        return {
            "file": path,
            "format": PORTABLE_PDB_FORMAT,
            "guid": str(found.guid).upper(),
            "stamp": f"{found.stamp:08X}",
            "keys": {"pdb": f"{name}/{found.key}/{name}"},
        }
    # The age the store key and a PE's RSDS record use (pdb.PdbIdentity.matching_age);
    # the info stream's is shown too when source indexing has made it differ.
    described: dict[str, object] = {
        "file": path,
        "format": PDB_FORMAT,
        "guid": str(found.guid).upper(),
        "age": found.matching_age,
    }
    if found.age != found.matching_age:
        described["info_age"] = found.age
    described["keys"] = {"pdb": f"{name}/{found.key}/{name}"}
    return described


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
        if cv.portable_stamp is not None:
            described["portable_pdb_stamp"] = f"{cv.portable_stamp:08X}"
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
        keyed = layouts.IDENTITY_KEYED
        return {layout: layouts.debug_file_key(layout, piece.uuid) for layout in keyed}
    keys = {}
    for layout in layouts.IDENTITY_KEYED:
        key = layouts.executable_key(layout, piece.uuid, name)
        if key is not None:
            keys[layout] = key
    return keys


def _print_report(report: list[dict[str, object]]) -> None:
    for entry in report:
        print(entry["file"])
        if entry.get("format") in (PDB_FORMAT, PORTABLE_PDB_FORMAT):
            _print_pdb(entry)
            continue
        if "slices" not in entry:
            _print_pe(entry)
            continue
        slices = entry["slices"]
        assert isinstance(slices, list)
        for piece in slices:
            print(f"  {piece['arch']:<8} {piece['uuid'] or '(no LC_UUID)'}  {piece['filetype']}")
            for layout, key in piece.get("keys", {}).items():
                print(f"    {layout + ':':<17}{key}")


def _print_pdb(entry: dict[str, object]) -> None:
    if "stamp" in entry:
        print(f"  {entry['format']}  GUID {entry['guid']}  stamp {entry['stamp']}")
        _print_keys(entry)
        return
    info_age = f"  (info stream age {entry['info_age']})" if "info_age" in entry else ""
    print(f"  {entry['format']}  GUID {entry['guid']}  age {entry['age']}{info_age}")
    _print_keys(entry)


def _print_pe(entry: dict[str, object]) -> None:
    print(
        f"  {entry['format']} {entry['machine']}  TimeDateStamp {entry['timestamp']}"
        f"  SizeOfImage 0x{entry['size_of_image']:X}"
    )
    if "guid" in entry:
        portable = (
            f"  portable, stamp {entry['portable_pdb_stamp']}"
            if "portable_pdb_stamp" in entry
            else ""
        )
        print(f"  GUID {entry['guid']}  age {entry['age']}  PDB {entry['pdb']}{portable}")
    else:
        no_pdb = entry["no_pdb"]
        assert isinstance(no_pdb, dict)
        print(f"  no PDB identity ({no_pdb['status']}): {no_pdb['detail']}")
    _print_keys(entry)


def _print_keys(entry: dict[str, object]) -> None:
    keys = entry["keys"]
    assert isinstance(keys, dict)
    for kind, key in keys.items():
        print(f"    {kind + ' key:':<17}{key}")
