"""`dsymfind id` on a `.dSYM` bundle, a `.pdb` and an executable: their identity, one line on damage."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixtures import (
    FIXTURES,
    PE_FIXTURES,
    UNIVERSAL_UUIDS,
    dwarf_of,
)
from support.processes import fail_line, run_cli

from dsymfind.uuids import uuid_hex

PDB_IDENTITIES = json.loads((PE_FIXTURES / "identities.json").read_text())


def test_id_of_a_dsym_bundle_shows_each_dwarf_file() -> None:
    bundle = FIXTURES / "universal.dSYM"
    dwarf = dwarf_of(bundle)

    done = run_cli("id", str(bundle))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[0] == str(dwarf)
    for arch, uuid in UNIVERSAL_UUIDS.items():
        assert f"  {arch:<8} {uuid}  MH_DSYM" in done.stdout
        assert f"mach-uuid-sym-{uuid_hex(uuid).lower()}" in done.stdout
    (entry,) = json.loads(run_cli("id", "--json", str(bundle)).stdout)
    assert entry["file"] == str(dwarf)
    assert entry["bundle"] == str(bundle)
    assert {s["uuid"]: s["filetype"] for s in entry["slices"]} == {
        uuid: "MH_DSYM" for uuid in UNIVERSAL_UUIDS.values()
    }


def test_id_of_a_folder_without_dwarf_files_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "Empty.dSYM"
    empty.mkdir()

    line = fail_line(run_cli("id", str(empty)))

    assert line.startswith(f"dsymfind: {empty}: ")
    assert "DWARF" in line


@pytest.mark.parametrize("name", ["hello64.pdb", "greet32.pdb", "age2/hello64.pdb"])
def test_id_of_a_pdb_shows_guid_age_and_store_key(name: str) -> None:
    expected = PDB_IDENTITIES[name]
    path = PE_FIXTURES / name
    base = path.name
    key = f"{expected['guid'].replace('-', '')}{expected['age']:X}"

    done = run_cli("id", str(path))

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert f"GUID {expected['guid']}  age {expected['age']}" in done.stdout
    assert f"{base}/{key}/{base}" in done.stdout
    (entry,) = json.loads(run_cli("id", "--json", str(path)).stdout)
    assert entry["file"] == str(path)
    assert entry["format"] == "PDB 7.0"
    assert entry["guid"] == expected["guid"]
    assert entry["age"] == expected["age"]
    assert entry["keys"] == {"pdb": f"{base}/{key}/{base}"}


PDBUTIL = shutil.which("llvm-pdbutil-14") or shutil.which("llvm-pdbutil")


@pytest.mark.skipif(PDBUTIL is None, reason="llvm-pdbutil is not installed")
def test_id_of_a_source_indexed_pdb_keys_it_by_its_dbi_age(tmp_path: Path) -> None:
    # pdbstr bumps only the info stream's age: the key is the DBI age's, as DbgHelp's.
    assert PDBUTIL is not None
    yaml = subprocess.run(
        [PDBUTIL, "pdb2yaml", "-pdb-stream", "-dbi-stream", str(PE_FIXTURES / "hello64.pdb")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    info_part, dbi_part = yaml.split("DbiStream:", 1)
    info_part = re.sub(r"^(\s+Age:\s+)\d+$", r"\g<1>3", info_part, flags=re.MULTILINE)
    (tmp_path / "ages.yaml").write_text(f"{info_part}DbiStream:{dbi_part}")
    indexed = tmp_path / "hello64.pdb"
    subprocess.run(
        [PDBUTIL, "yaml2pdb", "-pdb", str(indexed), str(tmp_path / "ages.yaml")],
        capture_output=True,
        check=True,
    )

    done = run_cli("id", str(indexed))

    guid = PDB_IDENTITIES["hello64.pdb"]["guid"]
    assert f"GUID {guid}  age 1  (info stream age 3)" in done.stdout
    (entry,) = json.loads(run_cli("id", "--json", str(indexed)).stdout)
    assert (entry["age"], entry["info_age"]) == (1, 3)
    key = f"{guid.replace('-', '')}1"
    assert entry["keys"] == {"pdb": f"hello64.pdb/{key}/hello64.pdb"}


def test_id_of_an_exe_and_its_pdb_give_the_same_pdb_key() -> None:
    done = run_cli(
        "id", "--json", str(PE_FIXTURES / "hello64.exe"), str(PE_FIXTURES / "hello64.pdb")
    )
    exe, pdb = json.loads(done.stdout)
    assert exe["keys"]["pdb"] == pdb["keys"]["pdb"]


def test_id_of_a_damaged_pdb_is_one_line(tmp_path: Path) -> None:
    damaged = tmp_path / "cut.pdb"
    damaged.write_bytes((PE_FIXTURES / "hello64.pdb").read_bytes()[:100])

    line = fail_line(run_cli("id", str(damaged)))

    assert line.startswith(f"dsymfind: {damaged}: ")


def test_id_loads_no_http_or_lock_code() -> None:
    probe = (
        "import sys\n"
        "from dsymfind.commands.id import ident\n"
        f"files = [{str(FIXTURES / 'hello.dSYM')!r}, {str(PE_FIXTURES / 'hello64.pdb')!r},\n"
        f"         {str(PE_FIXTURES / 'hello64.exe')!r}, {str(FIXTURES / 'universal')!r}]\n"
        "assert ident(files, as_json=True) == 0\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stderr.split())
    assert "dsymfind.commands.id" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("httpx", "filelock")}
