"""publish/opened.py: one open file, hashed once, every later pass held to that hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support.fixtures import dwarf_of

from dsymfind.publish import opened
from dsymfind.publish.opened import Changed, OpenedFile

_SHA256 = hashlib.sha256


class _CountingSha256:
    """hashlib.sha256 that counts the bytes it was given, across every digest made."""

    hashed = 0

    def __init__(self) -> None:
        self._digest = _SHA256()

    def update(self, data: bytes) -> None:
        _CountingSha256.hashed += len(data)
        self._digest.update(data)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[_CountingSha256]:
    _CountingSha256.hashed = 0
    monkeypatch.setattr(opened.hashlib, "sha256", _CountingSha256)
    return _CountingSha256


def test_opening_hashes_the_file_once(products: Path, counting: type[_CountingSha256]) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")

    with OpenedFile(str(dwarf)) as body:
        assert body.sha256 == _SHA256(dwarf.read_bytes()).hexdigest()
        assert counting.hashed == dwarf.stat().st_size


def test_a_later_pass_yields_the_hashed_bytes(products: Path) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")

    with OpenedFile(str(dwarf)) as body:
        assert b"".join(body.chunks(4096)) == dwarf.read_bytes()


def test_bytes_changed_in_place_after_the_hash_end_a_later_pass(products: Path) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")
    with OpenedFile(str(dwarf)) as body:
        with dwarf.open("r+b") as rewrite:
            rewrite.seek(100)
            rewrite.write(b"\xff" * 8)
        with pytest.raises(Changed):
            b"".join(body.chunks())
