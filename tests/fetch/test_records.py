"""A download's status record, as waiting helpers read it (dsymfind.fetch.records, miss)."""

from __future__ import annotations

from pathlib import Path

from dsymfind.cache_layout import CacheLayout
from dsymfind.fetch import miss, records

UUID = "67E9247C-814E-392B-A027-DBDE6748FCBF"


def test_progress_is_throttled_but_the_last_bytes_are_written_at_once(cache_dir: Path) -> None:
    layout = CacheLayout(str(cache_dir))
    (cache_dir / "downloads").mkdir(parents=True)
    writer = records.StatusWriter(layout, UUID)
    writer.progress("http://store/key", 10, 100)  # within the interval of the first write
    record = records.read(layout, UUID)
    assert record is not None and records.bytes_done(record) == (0, None)
    writer.progress("http://store/key", 100, 100)
    record = records.read(layout, UUID)
    assert record is not None and records.bytes_done(record) == (100, 100)


def test_helpers_look_more_often_once_every_byte_has_arrived() -> None:
    def record(done: int, total: int | None) -> dict[str, object]:
        return {"transfers": {"http://store/key": [done, total]}}

    assert miss._poll_interval(None) == miss.POLL_INTERVAL
    assert miss._poll_interval(record(10, 100)) == miss.POLL_INTERVAL
    assert miss._poll_interval(record(10, None)) == miss.POLL_INTERVAL
    assert miss._poll_interval(record(100, 100)) == miss.FINISHING_POLL_INTERVAL
    assert miss.FINISHING_POLL_INTERVAL < miss.POLL_INTERVAL
