"""The PE reader against LLVM's reader on real PE files, and on the crafted broken corpus."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.fixtures import PE_FIXTURES

from dsymfind.windows import pe
from dsymfind.windows.bounded_read import fits

IDENTITIES = json.loads((PE_FIXTURES / "identities.json").read_text())
BROKEN = PE_FIXTURES / "broken"
BROKEN_STATUSES = json.loads((BROKEN / "statuses.json").read_text())
IMAGES = [name for name in IDENTITIES if name.endswith((".exe", ".dll"))]


@pytest.mark.parametrize("name", IMAGES)
def test_identity_agrees_with_llvm_readobj(name: str) -> None:
    expected = IDENTITIES[name]
    image = pe.read_identity(str(PE_FIXTURES / name))
    assert image.machine == expected["machine"]
    assert image.timestamp == expected["timestamp"]
    assert image.size_of_image == expected["size_of_image"]
    assert image.pe32_plus == expected["pe32_plus"]
    assert image.pe_key == f"{expected['timestamp']:08X}{expected['size_of_image']:X}"
    if "guid_bytes" not in expected:
        assert image.codeview is None and image.debug_status is pe.Status.NO_CODEVIEW
        return
    cv = image.require_codeview()
    assert cv.guid.bytes_le.hex() == expected["guid_bytes"]
    assert cv.age == expected["age"]
    assert cv.pdb_path == expected["pdb_path"]


def test_fixtures_cover_pe32_and_pe32_plus_exe_and_dll() -> None:
    kinds = {
        (IDENTITIES[name]["pe32_plus"], name.endswith(".dll"))
        for name in IMAGES
        if "guid_bytes" in IDENTITIES[name]
    }
    assert kinds == {(False, False), (False, True), (True, False), (True, True)}


def test_a_windows_pdb_path_gives_its_file_name() -> None:
    cv = pe.read_identity(str(PE_FIXTURES / "greet32.dll")).require_codeview()
    assert cv.pdb_path == r"C:\build\out\greet32.pdb"
    assert cv.pdb_name == "greet32.pdb"


@pytest.mark.parametrize("name", sorted(BROKEN_STATUSES))
def test_each_broken_file_has_its_own_status(name: str) -> None:
    expected = pe.Status(BROKEN_STATUSES[name])
    path = str(BROKEN / name)
    try:
        image = pe.read_identity(path)
    except pe.PEError as exc:
        assert exc.status is expected, exc
        assert str(exc).startswith(path)
        return
    assert image.debug_status is expected, image.debug_detail
    with pytest.raises(pe.PEError) as raised:
        image.require_codeview()
    assert raised.value.status is expected


def test_the_corpus_covers_every_failure_of_a_file_that_can_be_read() -> None:
    covered = {pe.Status(status) for status in BROKEN_STATUSES.values()}
    assert covered == set(pe.Status) - {pe.Status.UNREADABLE}


def test_nb10_is_reported_with_its_signature_and_age() -> None:
    image = pe.read_identity(str(BROKEN / "codeview_nb10.exe"))
    assert image.debug_status is pe.Status.NB10
    assert "signature 12345678 age 3" in image.debug_detail


def test_not_a_regular_file_is_unreadable_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.exe"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path, tmp_path / "missing.exe"):
        with pytest.raises(pe.PEError) as raised:
            pe.read_identity(str(path))
        assert raised.value.status is pe.Status.UNREADABLE


def _codeview_entry(data: bytes) -> int:
    """File offset of the debug entry whose data is the RSDS record (Type 2: CodeView)."""
    record = data.index(b"RSDS")
    for at in range(0, len(data) - 28, 4):
        kind, _, _, pointer = struct.unpack_from("<IIII", data, at + 12)
        if kind == 2 and pointer == record:
            return at
    raise AssertionError("no CodeView entry")


def test_a_pdb_name_without_nul_ends_with_its_entry(tmp_path: Path) -> None:
    data = bytearray((PE_FIXTURES / "hello64.exe").read_bytes())
    entry = _codeview_entry(bytes(data))
    struct.pack_into("<I", data, entry + 16, 24 + len("hello"))  # SizeOfData: no room for NUL
    path = tmp_path / "short.exe"
    path.write_bytes(bytes(data))
    assert pe.read_identity(str(path)).require_codeview().pdb_path == "hello"


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every os.pread from now on (the readers' only way to read)."""
    read: list[int] = []
    real_pread = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        read.append(length)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", counting)
    return read


def test_only_headers_and_debug_data_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.exe"
    big.write_bytes((PE_FIXTURES / "hello64.exe").read_bytes())
    with open(big, "r+b") as f:
        f.truncate(64 * 1024 * 1024)  # a 64 MiB image (sparse): its sections are never read
    read = counted_reads(monkeypatch)
    assert pe.read_identity(str(big)).require_codeview().pdb_name == "hello64.pdb"
    assert sum(read) < 2048


@pytest.mark.parametrize("name", ["hello64.exe", "greet32.dll"])
def test_damaged_files_give_an_identity_or_pe_error_only(name: str, tmp_path: Path) -> None:
    original = (PE_FIXTURES / name).read_bytes()
    rng = random.Random(name)
    path = tmp_path / name
    statuses = set()
    for _ in range(400):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(0x700)
            data[at : at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\0\0\0\0", rng.randbytes(4)])
        if rng.random() < 0.2:
            del data[rng.randrange(len(data)) :]
        path.write_bytes(bytes(data))
        try:
            image = pe.read_identity(str(path))
        except pe.PEError as exc:
            statuses.add(exc.status)
            continue
        statuses.add(image.debug_status)
    assert len(statuses) >= 4  # the mutations reach past the first checks


def test_store_keys_follow_the_spec_example() -> None:
    cv = pe.CodeView(uuid.UUID("3249d99d-0c40-4931-8610-f4e4fb0b6936"), 1, r"C:\x\crash.pdb")
    image = pe.PEIdentity("crash.exe", 0x8664, 0x5AB38077, 0x9000, True, cv, None, "")
    assert cv.key == "3249D99D0C4049318610F4E4FB0B69361"
    assert image.pe_key == "5AB380779000"
    assert pe.CodeView(cv.guid, 10, "crash.pdb").key.endswith("36A")  # ages are hex


def test_fits_never_adds() -> None:
    huge = 2**64 - 1
    assert fits(0, 10, 10) and fits(10, 0, 10)
    assert not fits(1, 10, 10)
    assert not fits(huge, huge, 100)
    assert not fits(5, huge, 100)
    assert not fits(-1, 1, 100)


def test_the_fixtures_rebuild_byte_identical(tmp_path: Path) -> None:
    if shutil.which("clang-14") is None or shutil.which("lld-link-14") is None:
        pytest.skip("clang-14 and lld-link-14 are needed (apt-get install -y clang-14 lld-14)")
    script = PE_FIXTURES.parent / "make_pe.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, capture_output=True)
    committed = sorted(p.relative_to(PE_FIXTURES) for p in PE_FIXTURES.rglob("*") if p.is_file())
    rebuilt = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert rebuilt == [p for p in committed if p.parts[0] != "src" and p.name != "README.md"]
    for relative in rebuilt:
        assert (tmp_path / relative).read_bytes() == (PE_FIXTURES / relative).read_bytes(), relative
