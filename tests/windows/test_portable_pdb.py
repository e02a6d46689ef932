"""Portable (.NET) PDBs: keyed `<name>/<GUID>FFFFFFFF/<name>` as SSQP files them, and
verified by the PDB id (GUID and stamp) in their `#Pdb` stream, never by a GUID and age."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fixtures import PE_FIXTURES
from support.portable_pdb import portable_pdb_bytes, write_portable_pair
from support.processes import run_cli
from support.symbol_server import SymbolServer
from test_pdb_fetch import find

from dsymfind.windows import pdb, pe

GUID = uuid.UUID("6B1E2C5A-0D3F-4A7B-9C8E-1F2A3B4C5D6E")
STAMP = 0x8A7B6C5D
KEY = "6B1E2C5A0D3F4A7B9C8E1F2A3B4C5D6EFFFFFFFF"
SSQP_KEY = f"hello64.pdb/{KEY}/hello64.pdb"
READOBJ = shutil.which("llvm-readobj-14") or shutil.which("llvm-readobj")


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_portable_pair(tmp_path / "portable", GUID, STAMP)


@pytest.mark.skipif(READOBJ is None, reason="llvm-readobj is not installed")
def test_llvm_readobj_sees_the_portable_codeview_entry(pair: tuple[Path, Path]) -> None:
    assert READOBJ is not None
    shown = subprocess.run(
        [READOBJ, "--coff-debug-directory", str(pair[0])], capture_output=True, text=True
    ).stdout
    assert "MajorVersion: 0x100" in shown and "MinorVersion: 0x504D" in shown
    assert "TimeDateStamp: " in shown and f"(0x{STAMP:08X})" in shown
    assert "PDBGUID: (" + " ".join(f"{b:02X}" for b in GUID.bytes_le) + ")" in shown


def test_sentrys_symbolic_reads_both_files_as_the_same_portable_id(
    pair: tuple[Path, Path],
) -> None:
    symbolic = pytest.importorskip("symbolic", reason="Sentry's symbolic is the oracle here")
    debug_id = f"{GUID}-{STAMP:08x}"
    for path, file_format in zip(pair, ("pe", "portablepdb"), strict=True):
        (found,) = symbolic.debuginfo.Archive.open(str(path)).iter_objects()
        assert (found.file_format, found.debug_id) == (file_format, debug_id)


def test_id_gives_both_files_the_ssqp_key(pair: tuple[Path, Path]) -> None:
    done = run_cli("id", "--json", *map(str, pair))
    assert done.returncode == 0, done.stderr
    image, symbols = json.loads(done.stdout)
    assert image["keys"]["pdb"] == symbols["keys"]["pdb"] == SSQP_KEY
    assert image["portable_pdb_stamp"] == symbols["stamp"] == f"{STAMP:08X}"
    assert symbols["format"] == "Portable PDB" and symbols["guid"] == str(GUID).upper()
    assert run_cli("id", str(pair[1])).stdout.splitlines()[1:] == [
        f"  Portable PDB  GUID {str(GUID).upper()}  stamp {STAMP:08X}",
        f"    pdb key:         {SSQP_KEY}",
    ]


def test_the_match_is_by_guid_and_stamp(pair: tuple[Path, Path], tmp_path: Path) -> None:
    wanted = pe.read_identity(str(pair[0])).require_codeview()
    assert pdb.read_identity(str(pair[1])).mismatch(wanted) is None
    other = tmp_path / "other.pdb"
    other.write_bytes(portable_pdb_bytes(GUID, STAMP + 1))
    assert (
        pdb.read_identity(str(other)).mismatch(wanted) == f"stamp {STAMP + 1:08X}, not {STAMP:08X}"
    )
    windows_pdb = pdb.read_identity(str(PE_FIXTURES / "hello64.pdb"))
    assert windows_pdb.mismatch(wanted) == "a Windows PDB, but the image names a portable PDB"
    native = pe.read_identity(str(PE_FIXTURES / "hello64.exe")).require_codeview()
    assert "a portable PDB, but the image names a Windows PDB" in str(
        pdb.read_identity(str(pair[1])).mismatch(native)
    )


def test_pdb_fetches_it_by_its_ssqp_key_and_refuses_another_stamp(
    pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image, symbols = pair
    served = tmp_path / "server"
    (served / "hello64.pdb" / KEY).mkdir(parents=True)
    (served / SSQP_KEY).write_bytes(portable_pdb_bytes(GUID, STAMP + 1))
    alone = tmp_path / "bin"
    alone.mkdir()
    shutil.copy(image, alone)
    with SymbolServer(served) as server:
        status, _, err = find(
            capsys, [alone / "hello64.exe"], f"srv*{tmp_path / 'down1'}*{server.url}"
        )
        assert status == 1 and f"stamp {STAMP + 1:08X}, not {STAMP:08X}" in "\n".join(err)
        (served / SSQP_KEY).write_bytes(symbols.read_bytes())
        down = tmp_path / "down2"
        status, out, err = find(capsys, [alone / "hello64.exe"], f"srv*{down}*{server.url}")
    assert (status, out, err) == (0, [str(down / SSQP_KEY)], [])
    assert (down / SSQP_KEY).read_bytes() == symbols.read_bytes()


def test_publish_files_it_under_its_ssqp_key(pair: tuple[Path, Path], tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = run_cli("publish", "--to", str(store), str(pair[1]))
    assert done.returncode == 0, done.stderr
    assert (store / SSQP_KEY).read_bytes() == pair[1].read_bytes()


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        (lambda data: data[:40], "cut short"),
        (lambda data: data.replace(b"#Pdb", b"#Xdb"), "without a #Pdb stream"),
        (lambda data: data[:12] + b"\xff\xff\xff\xff" + data[16:], "version string"),
        (lambda data: data[:0x20] + b"\xff" * 4 + data[0x24:], "outside the file"),
    ],
)
def test_a_damaged_portable_pdb_is_a_pdb_error(
    damage: Callable[[bytes], bytes], fragment: str, tmp_path: Path
) -> None:
    damaged = tmp_path / "damaged.pdb"
    damaged.write_bytes(damage(portable_pdb_bytes(GUID, STAMP)))
    with pytest.raises(pdb.PdbError, match=fragment):
        pdb.read_identity(str(damaged))
