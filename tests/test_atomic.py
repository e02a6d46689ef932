"""Reading small files whole (dsymfind.atomic): the bytes, the limit, the buffer."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from dsymfind import atomic

LARGE_LIMIT = 64 << 20


@pytest.mark.parametrize(
    ("size", "limit"), [(0, 10), (100, 10), (100, 100), (100, 101), (100, 1000)]
)
def test_a_small_file_reads_whole_up_to_its_limit(tmp_path: Path, size: int, limit: int) -> None:
    path = tmp_path / "file"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(range(size % 256)))
    assert atomic.read_small_file(str(path), limit) == path.read_bytes()[:limit]


def test_a_small_file_is_read_into_a_buffer_its_size_not_the_limits(tmp_path: Path) -> None:
    # A waiting helper reads a download's 200-byte record every 50 ms, limit 1 MiB.
    path = tmp_path / "record"
    path.write_bytes(b"{}" * 100)
    tracemalloc.start()
    try:
        assert atomic.read_small_file(str(path), LARGE_LIMIT) == b"{}" * 100
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10


def test_a_marshal_file_reads_back(tmp_path: Path) -> None:
    path = str(tmp_path / "value")
    value = {"format": 1, "records": {"a": [1, 2.5, b"x" * 5000]}}
    assert atomic.write_marshal(path, value)
    assert atomic.read_marshal(path) == value


def test_a_bare_file_name_is_written_in_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `symbolicate -o out.ips` said "cannot write out.ips: No such file or directory".
    monkeypatch.chdir(tmp_path)
    atomic.write_bytes("out.ips", b"named")
    assert (tmp_path / "out.ips").read_bytes() == b"named"
