"""`dsymfind gc` on real cache entries (zips of the real fixtures, indexed), with access
times set so LRU order is known, and a real process holding a download lock."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from support.fixtures import (
    GREET_UUID,
    HELLO_UUID,
    UNIVERSAL_UUIDS,
    dwarf_of,
    link_of,
    snapshot,
    zip_bundles,
)
from support.processes import lock_held_elsewhere, run_cli, run_helper

from dsymfind.cache.removal import Removal
from dsymfind.main import main
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

UNIVERSAL_UUID = UNIVERSAL_UUIDS["x86_64"]
DAY = 86400.0


def entry(cache_dir: Path, uuid: str) -> Path:
    return cache_dir / "dsyms" / uuid_hex(uuid)


@pytest.fixture
def cached(products: Path, tmp_path: Path, cache_dir: Path) -> Path:
    """Three cache-owned entries, from a zip: hello, libgreet, universal (both slices)."""
    bundles = [products / n for n in ("hello.dSYM", "libgreet.dylib.dSYM", "universal.dSYM")]
    assert main(["index", str(zip_bundles(tmp_path / "dSYMs.zip", bundles))]) == 0
    for uuid in (HELLO_UUID, GREET_UUID, UNIVERSAL_UUID):
        assert entry(cache_dir, uuid).is_dir()
    return cache_dir


def last_used(folder: Path, days_ago: float) -> None:
    """Every file's atime and mtime, and the entry's own mtime, `days_ago` days back."""
    when = time.time() - days_ago * DAY
    for path in [*sorted(folder.rglob("*"), reverse=True), folder]:
        os.utime(path, (when, when), follow_symlinks=False)


def gc(*args: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["gc", *args]) == 0
    return capsys.readouterr().out


def test_max_age_evicts_what_was_unused_longer_with_its_links_and_answers(
    cached: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hello_path = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"]
    assert hello_path.startswith(str(entry(cached, HELLO_UUID)))
    answer = cached / "answers" / uuid_hex(HELLO_UUID)
    assert answer.exists()
    last_used(entry(cached, HELLO_UUID), 100)
    last_used(entry(cached, GREET_UUID), 50)
    last_used(entry(cached, UNIVERSAL_UUID), 1)
    os.utime(answer, (time.time() - 100 * DAY,) * 2)

    out = gc("--max-age", "30d", capsys=capsys)
    assert f"removed {entry(cached, HELLO_UUID)} (" in out
    assert f"removed {entry(cached, GREET_UUID)} (" in out
    assert "Removed 2 entries" in out
    assert not entry(cached, HELLO_UUID).exists() and not entry(cached, GREET_UUID).exists()
    assert not os.path.lexists(link_of(cached, HELLO_UUID))
    assert not answer.exists()
    assert entry(cached, UNIVERSAL_UUID).is_dir()
    for uuid in UNIVERSAL_UUIDS.values():
        assert link_of(cached, uuid).exists()
    assert not list((cached / "tmp").glob("removed-*"))
    assert run_helper(HELLO_UUID).plist == {}  # never names the evicted path


def test_a_recent_answer_counts_as_use(cached: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_helper(GREET_UUID)
    for uuid in (HELLO_UUID, GREET_UUID, UNIVERSAL_UUID):
        last_used(entry(cached, uuid), 100)
    os.utime(cached / "answers" / uuid_hex(GREET_UUID), (time.time(),) * 2)
    out = gc("--max-age", "30d", capsys=capsys)
    assert "Removed 2 entries" in out
    assert entry(cached, GREET_UUID).is_dir()


def test_max_size_evicts_least_recently_used_until_under(
    cached: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sizes = {
        u: sum(p.stat().st_size for p in entry(cached, u).rglob("*") if p.is_file())
        for u in (HELLO_UUID, GREET_UUID, UNIVERSAL_UUID)
    }
    last_used(entry(cached, UNIVERSAL_UUID), 3)  # the oldest
    last_used(entry(cached, HELLO_UUID), 2)
    last_used(entry(cached, GREET_UUID), 1)
    limit = sizes[GREET_UUID] + sizes[HELLO_UUID]  # just the universal one must go
    out = gc("--max-size", str(limit), "--max-age", "1000d", capsys=capsys)
    assert "Removed 1 entries" in out
    assert not entry(cached, UNIVERSAL_UUID).exists()
    assert entry(cached, HELLO_UUID).is_dir() and entry(cached, GREET_UUID).is_dir()


def test_dry_run_lists_and_removes_nothing(
    cached: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(cached)
    out = gc("--max-age", "0", "--dry-run", capsys=capsys)
    assert "Would remove 3 entries" in out
    assert f"would remove {entry(cached, HELLO_UUID)} (" in out
    after = snapshot(cached)
    # Lock files (index takes the UUID lock to admit) stay anyway.
    assert {p: v for p, v in after.items() if "/locks" not in p} == {
        p: v for p, v in before.items() if "/locks" not in p
    }


def test_an_entry_whose_lock_a_process_holds_is_skipped(cached: Path) -> None:
    lock_file = cached / "locks" / f"{uuid_hex(HELLO_UUID)}.lock"
    lock_file.parent.mkdir(exist_ok=True)
    with lock_held_elsewhere(lock_file):
        done = run_cli("gc", "--max-age", "0")
    assert done.returncode == 0, done.stderr
    assert f"kept {entry(cached, HELLO_UUID)}: in use or being downloaded" in done.stdout
    assert "Removed 2 entries" in done.stdout
    assert dwarf_of(next(entry(cached, HELLO_UUID).iterdir())).is_file()
    assert link_of(cached, HELLO_UUID).exists()


def test_user_bundles_are_never_deleted_only_their_dangling_links(
    products: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", str(products)]) == 0
    assert main(["index", str(products / "hello_arm64e.dSYM"), "--source-map", "/b=/l"]) == 0
    capsys.readouterr()
    for folder in (products, cache_dir):
        last_used(folder, 1000)
    before = snapshot(products)
    out = gc("--max-age", "0", capsys=capsys)
    assert "Removed 0 entries" in out  # the shadow of a bundle that exists is kept too
    assert snapshot(products) == before

    greet_link = link_of(cache_dir, GREET_UUID)
    arm64e_uuid = next(iter(os.listdir(cache_dir / "dsyms")))
    for name in ("libgreet.dylib.dSYM", "hello_arm64e.dSYM"):
        for path in sorted((products / name).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (products / name).rmdir()
    out = gc(capsys=capsys)
    assert f"removed dangling link {greet_link}" in out
    assert f"removed {cache_dir / 'dsyms' / arm64e_uuid} (" in out  # its shadow, now useless
    assert not os.path.lexists(greet_link)
    assert link_of(cache_dir, HELLO_UUID).exists()
    assert (products / "hello.dSYM").is_dir()


def test_stale_records_go_and_foreign_files_stay(
    cached: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = cached / "downloads"
    records.mkdir()
    stale, fresh = records / f"{'A' * 32}.json", records / f"{'B' * 32}.json"
    for record in (stale, fresh):
        record.write_text("{}")
    os.utime(stale, (time.time() - 2 * DAY,) * 2)
    foreign = [cached / "dsyms" / "notes.txt", cached / "dsyms" / "not-a-uuid"]
    foreign[0].write_text("mine")
    foreign[1].mkdir()
    out = gc("--max-age", "0", capsys=capsys)
    assert f"removed stale download record {stale}" in out
    assert not stale.exists() and fresh.exists()
    assert all(p.exists() for p in foreign)
    assert sorted(os.listdir(cached / "dsyms")) == ["not-a-uuid", "notes.txt"]


def test_an_evicted_zip_is_published_again_by_the_next_index(
    cached: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gc("--max-age", "0", capsys=capsys)
    assert main(["index", str(tmp_path / "dSYMs.zip")]) == 0
    assert "1 new or changed" in capsys.readouterr().out
    assert link_of(cached, HELLO_UUID).exists()


def test_bad_size_is_a_one_line_error() -> None:
    done = run_cli("gc", "--max-size", "lots")
    assert done.returncode == 1
    assert done.stderr == (
        "dsymfind: error: --max-size: expected a size such as 2GiB or 500MiB, got 'lots'\n"
    )


def test_dry_run_creates_no_cache(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = gc("--dry-run", capsys=capsys)
    assert "Would remove 0 entries" in out
    assert not cache_dir.exists()


def test_an_entry_gone_before_its_removal_finishes_is_no_error(cached: Path) -> None:
    cache = CachePaths(str(cached))
    doomed = entry(cached, HELLO_UUID)
    with Removal(cache) as removal:
        assert removal.claim(uuid_hex(HELLO_UUID))
        removal.take(str(doomed))
        assert not os.path.lexists(link_of(cached, HELLO_UUID))
        assert doomed.is_dir()  # still there for an answer given a moment ago
        shutil.rmtree(doomed)  # someone else was faster
    assert not list((cached / "tmp").glob("removed-*"))
    assert entry(cached, GREET_UUID).is_dir()
