"""The cache's records of system images under the upkeep commands, as real processes: gc
drops those whose file is gone, check reports them (and --repair drops them), status
counts them, doctor says which DeviceSupport folders are indexed."""

from __future__ import annotations

import json
import marshal
import os
import shutil
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support, clone_with_uuid
from support.processes import run_cli, run_helper
from support.system_images import copied, recorded

from dsymfind.cache import systems
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("built"))


@pytest.fixture
def tree(built: DeviceSupportTree, isolated_home: Path, cache_dir: Path) -> DeviceSupportTree:
    """A copy where Xcode keeps it (doctor looks there), indexed."""
    found = copied(built, isolated_home / "Library" / "Developer" / "Xcode")
    done = run_cli("index", str(found.root))
    assert done.returncode == 0, done.stdout + done.stderr
    return found


def test_gc_drops_the_records_of_files_gone_and_nothing_else(
    tree: DeviceSupportTree, cache_dir: Path
) -> None:
    gone = tree.libraries[0]  # two slices
    gone_uuids = set(gone.uuids.values())
    for uuid in gone_uuids:
        run_helper(uuid)  # remembered
    gone.path.unlink()
    dry = run_cli("gc", "--dry-run")
    assert dry.returncode == 0 and "would remove system image record" in dry.stdout
    assert gone_uuids <= set(recorded(cache_dir))
    done = run_cli("gc")
    assert (done.returncode, done.stderr) == (0, "")
    for uuid in gone_uuids:
        record = systems.label(CachePaths(str(cache_dir)), uuid_hex(uuid))
        assert f"removed system image record {record}: its file is gone" in done.stdout
        assert not (cache_dir / "answers" / uuid_hex(uuid)).exists()
    assert "2 system image records" in done.stdout
    assert set(recorded(cache_dir)) == {u for lib in tree.libraries[1:] for u in lib.uuids.values()}
    assert tree.libraries[1].path.is_file()  # the user's files are never touched


def test_check_reports_records_gone_or_wrong_and_repair_drops_them(
    tree: DeviceSupportTree, cache_dir: Path
) -> None:
    gone, rebuilt, kept = tree.libraries
    gone.path.unlink()
    clone_with_uuid(rebuilt.path, rebuilt.path.with_name("new"), "rebuilt")
    os.replace(rebuilt.path.with_name("new"), rebuilt.path)  # no longer carries its UUID
    cache = CachePaths(str(cache_dir))
    (cache_dir / "systems" / "notes.txt").write_text("mine\n")
    done = run_cli("check")
    assert done.returncode == 1  # a record naming a file without its UUID is invalid
    for uuid in gone.uuids.values():
        record = systems.label(cache, uuid_hex(uuid))
        assert f"leftover: {record}: a system image record whose file {gone.path} is gone" in (
            done.stdout
        )
    (rebuilt_uuid,) = rebuilt.uuids.values()
    record = systems.label(cache, uuid_hex(rebuilt_uuid))
    assert f"invalid: {record}: names {rebuilt.path}, which does not carry" in done.stdout
    assert f"foreign: {cache_dir / 'systems' / 'notes.txt'}: not made by dsymfind" in done.stdout
    repaired = run_cli("check", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert set(recorded(cache_dir)) == set(kept.uuids.values())
    assert (cache_dir / "systems" / "notes.txt").exists()
    again = run_cli("check")
    assert again.returncode == 0 and "systems" not in again.stdout.replace(
        str(cache_dir / "systems" / "notes.txt"), ""
    )


def test_check_judges_a_remembered_system_answer(tree: DeviceSupportTree, cache_dir: Path) -> None:
    library = tree.libraries[1]
    (uuid,) = library.uuids.values()
    run_helper(uuid)
    assert run_cli("check").returncode == 0
    # The same bytes under the same stat, but another image: served as it stands, invalid.
    data = bytearray(library.path.read_bytes())
    stat = library.path.stat()
    clone_with_uuid(library.path, library.path, "swapped")
    assert len(library.path.read_bytes()) == len(data)
    os.utime(library.path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    done = run_cli("check")
    answer = cache_dir / "answers" / uuid_hex(uuid)
    assert f"invalid: {answer}: names {library.path}, which does not carry {uuid}" in done.stdout


def test_status_counts_system_images(tree: DeviceSupportTree, cache_dir: Path) -> None:
    done = run_cli("status")
    assert done.returncode == 0
    assert "system images: 3 files (4 slices) of 1 OS builds: iOS 17.5.1 (21F90)" in done.stdout
    report = json.loads(run_cli("status", "--json").stdout)
    assert (report["system_image_files"], report["system_image_slices"]) == (3, 4)
    assert report["system_os_builds"] == ["iOS 17.5.1 (21F90)"]


def test_doctor_names_device_support_folders_and_whether_they_are_indexed(
    tree: DeviceSupportTree, isolated_home: Path
) -> None:
    another = tree.root / "17.6 (21G80)"
    shutil.copytree(tree.build_dir, another)
    done = run_cli("doctor")
    line = next(line for line in done.stdout.splitlines() if "system images" in line)
    assert f"system images {tree.root}: 1 of 2 OS builds not indexed: iOS 17.6 (21G80)" in line
    assert line.startswith("warn")
    assert "`dsymfind index` records their images" in done.stdout
    assert run_cli("index").returncode == 0
    done = run_cli("doctor")
    assert f"ok    system images {tree.root}: 2 OS builds, all indexed" in done.stdout


def test_check_repair_moves_older_records_into_shards_and_removes_a_damaged_shard(
    tree: DeviceSupportTree, cache_dir: Path
) -> None:
    cache = CachePaths(str(cache_dir))
    before = recorded(cache_dir)
    older = min(before)
    # One record as a cache before the shards kept it.
    systems.drop(cache, {uuid_hex(older): before[older]})
    old_file = cache_dir / "systems" / uuid_hex(older)
    old_file.write_bytes(marshal.dumps((1, *before[older])))
    done = run_cli("check")
    assert f"leftover: {old_file}: a record of the older layout" in done.stdout
    assert run_cli("check", "--repair").returncode == 0
    assert not old_file.exists() and recorded(cache_dir) == before
    # A shard garbled: its records are lost until the next index makes them again.
    shard = Path(cache.system_record(uuid_hex(older)))
    shard.write_bytes(b"garbled")
    done = run_cli("check")
    assert f"leftover: {shard}: a damaged shard of system image records" in done.stdout
    assert run_cli("check", "--repair").returncode == 0
    assert not shard.exists()
    assert run_cli("index", str(tree.root)).returncode == 0
    assert recorded(cache_dir) == before
