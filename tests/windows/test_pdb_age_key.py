"""A PDB's age is written in hex in its symbol-store key, as Microsoft's symbol servers file
it: an image whose RSDS age is 26 finds its PDB under `<GUID>1A`, never `<GUID>26`.

Ages past 9 are common (every incremental link bumps it), and hex and decimal agree below
10, so only such an age tells them apart. The server's folder is spelt here by hand, from
the convention, so a key function that changed its spelling everywhere at once would
still fail to find it."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fixtures import PE_FIXTURES
from support.processes import run_cli
from support.symbol_server import SymbolServer
from test_pdb import needs_pdbutil, with_ages

from dsymfind.windows import pe

AGE = 26
AGE_IN_HEX = "1A"


@pytest.fixture(autouse=True)
def no_ambient_symbol_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_NT_SYMBOL_PATH", raising=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SymbolServer]:
    root = tmp_path / "server"
    root.mkdir()
    with SymbolServer(root) as running:
        yield running


def image_of_age(folder: Path, age: int) -> Path:
    """hello64.exe whose RSDS record names its PDB at `age` (GUID and name unchanged)."""
    data = bytearray((PE_FIXTURES / "hello64.exe").read_bytes())
    rsds = data.index(b"RSDS")
    assert data.count(b"RSDS") == 1 and struct.unpack_from("<I", data, rsds + 20) == (1,)
    struct.pack_into("<I", data, rsds + 20, age)
    folder.mkdir(parents=True)
    image = folder / "hello64.exe"
    image.write_bytes(bytes(data))
    return image


@needs_pdbutil
def test_a_pdb_of_age_26_is_fetched_from_its_hex_key(server: SymbolServer, tmp_path: Path) -> None:
    image = image_of_age(tmp_path / "bin", AGE)
    guid = pe.read_identity(str(image)).require_codeview().guid
    key = f"{guid.hex.upper()}{AGE_IN_HEX}"
    pdb = with_ages(tmp_path / "built", info=AGE, dbi=AGE)
    served = Path(str(server.root)) / "hello64.pdb" / key / "hello64.pdb"
    served.parent.mkdir(parents=True)
    served.write_bytes(pdb.read_bytes())
    down = tmp_path / "down"

    done = run_cli("pdb", "--symbol-path", f"srv*{down}*{server.url}", str(image))

    placed = down / "hello64.pdb" / key / "hello64.pdb"
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{placed}\n", "")
    assert placed.read_bytes() == pdb.read_bytes()
    assert server.count(f"/hello64.pdb/{key}/hello64.pdb") == 1
