"""The one door into the cache's entries (cache/place.py's Doors), and the folders the
downloader's first writes find missing in a new cache (its lock, its record)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dsymfind.cache import locks, place, records
from dsymfind.errors import DsymfindError
from dsymfind.paths import CachePaths

UUID = "67E9247C-814E-392B-A027-DBDE6748FCBF"
HEX = UUID.replace("-", "")


def _cache(cache_dir: Path) -> CachePaths:
    cache_dir.mkdir(parents=True, mode=0o700)
    (cache_dir / "tmp").mkdir(mode=0o700)
    return CachePaths(str(cache_dir))


def _built(cache_dir: Path, name: str = "built") -> Path:
    """A staged entry folder holding one file, as an admission builds it."""
    build = cache_dir / "tmp" / name
    build.mkdir()
    (build / "file").write_bytes(b"ours")
    return build


def test_an_entry_takes_its_name_whole(cache_dir: Path) -> None:
    cache = _cache(cache_dir)
    build = _built(cache_dir)
    assert place.Doors(cache).rename_into(str(build), cache.entry(HEX))
    assert (cache_dir / "dsyms" / HEX / "file").read_bytes() == b"ours"
    assert not build.exists()
    assert stat.S_IMODE((cache_dir / "dsyms").stat().st_mode) == 0o700


def test_another_runs_entry_stays_and_ours_is_dropped(cache_dir: Path) -> None:
    cache = _cache(cache_dir)
    theirs = cache_dir / "dsyms" / HEX
    theirs.mkdir(parents=True)
    (theirs / "file").write_bytes(b"theirs")
    build = _built(cache_dir)
    assert not place.Doors(cache).rename_into(str(build), cache.entry(HEX))
    assert (theirs / "file").read_bytes() == b"theirs"
    assert not build.exists()


def test_a_symlink_under_the_entry_name_is_refused_and_not_followed(
    cache_dir: Path, tmp_path: Path
) -> None:
    cache = _cache(cache_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache_dir / "dsyms").mkdir(mode=0o700)
    (cache_dir / "dsyms" / HEX).symlink_to(elsewhere)
    build = _built(cache_dir)
    with pytest.raises(DsymfindError, match="symlink"):
        place.Doors(cache).rename_into(str(build), cache.entry(HEX))
    assert os.readlink(cache_dir / "dsyms" / HEX) == str(elsewhere)
    assert list(elsewhere.iterdir()) == []
    assert (build / "file").exists()  # staging: the next run of the UUID clears it


def test_shared_doors_serve_a_batch_and_survive_their_folder_being_removed(
    cache_dir: Path,
) -> None:
    cache = _cache(cache_dir)
    doors = place.Doors(cache).shared()
    try:
        assert doors.rename_into(str(_built(cache_dir, "first")), cache.entry(HEX))
        # Removed by hand meanwhile: the kept descriptor names a folder no longer there.
        (cache_dir / "dsyms" / HEX / "file").unlink()
        (cache_dir / "dsyms" / HEX).rmdir()
        (cache_dir / "dsyms").rmdir()
        other = HEX[::-1]
        assert doors.rename_into(str(_built(cache_dir, "second")), cache.entry(other))
    finally:
        doors.close()
    assert (cache_dir / "dsyms" / other / "file").read_bytes() == b"ours"


def test_the_first_lock_and_record_of_a_new_cache_make_their_folders(cache_dir: Path) -> None:
    cache = _cache(cache_dir)
    with locks.download_lock(cache, UUID).acquire(timeout=0):
        assert (cache_dir / "locks" / f"{HEX}.lock").is_file()
        records.StatusWriter(cache, UUID)
    record = records.read(cache, UUID)
    assert record is not None and record["state"] == records.RUNNING
    for folder in ("locks", "downloads"):
        assert stat.S_IMODE((cache_dir / folder).stat().st_mode) == 0o700
