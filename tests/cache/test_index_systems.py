"""`dsymfind index` of DeviceSupport folders and simulator runtimes made by clang/lld here:
one `systems/<HEX>` record per slice, incremental runs, files changed or gone, conflicts,
and bad input (junk, a truncated dylib, a symlink loop, 10,000 files)."""

from __future__ import annotations

import marshal
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support, clone_with_uuid
from support.fixtures import snapshot
from support.processes import BIN, run_cli
from support.system_images import copied, recorded

from dsymfind.apple import device_support
from dsymfind.cache import systems
from dsymfind.cache.systems import SystemImage
from dsymfind.main import main
from dsymfind.paths import CachePaths

# The built tree: UIKitCore (arm64 + arm64e), Foundation (arm64), libsystem_kernel (arm64e).
REPORTED = "3 system images (4 slices) of 1 OS builds"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("built"))


@pytest.fixture
def tree(built: DeviceSupportTree, tmp_path: Path) -> DeviceSupportTree:
    return copied(built, tmp_path / "Xcode")


def index(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["index", *args])
    out, err = capsys.readouterr()
    return status, out, err


def expected_records(tree: DeviceSupportTree) -> dict[str, SystemImage]:
    return {
        uuid: SystemImage(
            uuid,
            arch,
            str(lib.path),
            tree.os,
            tree.version,
            tree.build,
            lib.install_path,
        )
        for lib in tree.libraries
        for arch, uuid in lib.uuids.items()
    }


def test_every_slice_is_recorded_with_its_os_build_and_nothing_is_copied(
    tree: DeviceSupportTree, cache_dir: Path
) -> None:
    before = snapshot(tree.root)
    done = run_cli("index", str(tree.root))
    assert (done.returncode, done.stderr) == (0, "")
    assert f"{REPORTED}: 3 new or changed, 0 unchanged, 0 invalid" in done.stdout
    assert recorded(cache_dir) == expected_records(tree)
    assert snapshot(tree.root) == before  # nothing written into the user's folders
    assert not (cache_dir / "uuids").exists()  # no dSYM tree made for images


@pytest.mark.parametrize("where", ["build", "symbols"])
def test_one_os_build_given_as_path(tree: DeviceSupportTree, cache_dir: Path, where: str) -> None:
    path = tree.build_dir if where == "build" else tree.symbols
    done = run_cli("index", str(path))
    assert done.returncode == 0 and REPORTED in done.stdout
    assert recorded(cache_dir) == expected_records(tree)


def test_a_simulator_runtime_is_recorded_under_its_simulated_os(
    tree: DeviceSupportTree, tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = tmp_path / "Runtimes" / "iOS 17.5.simruntime"
    root = runtime / "Contents" / "Resources" / "RuntimeRoot"
    shutil.copytree(tree.symbols, root)
    version = root / "System" / "Library" / "CoreServices" / "SystemVersion.plist"
    version.parent.mkdir()
    version.write_bytes(
        plistlib.dumps(
            {"ProductName": "iPhone OS", "ProductVersion": "17.5", "ProductBuildVersion": "21F79"}
        )
    )
    status, out, _ = index(str(runtime), capsys=capsys)
    assert status == 0 and "3 system images (4 slices) of 1 OS builds" in out
    found = recorded(cache_dir)
    assert {(i.os, i.version, i.build) for i in found.values()} == {
        ("iOS Simulator", "17.5", "21F79")
    }
    assert {i.path for i in found.values()} == {
        str(root / lib.install_path.lstrip("/")) for lib in tree.libraries
    }


def test_an_unchanged_file_costs_one_stat_and_is_not_read_again(
    tree: DeviceSupportTree,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    junk = tree.symbols / "System" / "Library" / "Caches" / "com.apple.dyld.plist"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(plistlib.dumps({"kept": True}))
    assert index(str(tree.root), capsys=capsys)[0] == 0
    record = CachePaths(str(cache_dir)).system_record(
        next(iter(tree.libraries[0].uuids.values())).replace("-", "")
    )
    written = os.stat(record).st_mtime_ns

    read: list[str] = []
    real_read = device_support.read_system_file

    def reading(os_build: device_support.OSBuild, path: str) -> device_support.ReadFile:
        read.append(path)
        return real_read(os_build, path)

    monkeypatch.setattr(device_support, "read_system_file", reading)
    status, out, _ = index(str(tree.root), capsys=capsys)
    assert status == 0
    assert f"{REPORTED}: 0 new or changed, 3 unchanged, 0 invalid" in out
    assert read == []  # neither the images nor the plist beside them were opened
    assert os.stat(record).st_mtime_ns == written  # and no record written again


def test_a_changed_file_is_read_again_and_its_old_uuids_dropped(
    tree: DeviceSupportTree, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert index(str(tree.root), capsys=capsys)[0] == 0
    rebuilt = tree.libraries[0]
    renamed = clone_with_uuid(rebuilt.path, rebuilt.path.with_name("new"), "rebuilt")
    os.replace(rebuilt.path.with_name("new"), rebuilt.path)  # a new file at the same path
    status, out, _ = index(str(tree.root), capsys=capsys)
    assert status == 0
    assert f"{REPORTED}: 1 new or changed, 2 unchanged, 0 invalid; 2 records" in out
    found = recorded(cache_dir)
    for old, new in renamed.items():
        assert old not in found
        assert found[new].path == str(rebuilt.path)
    assert len(found) == 4


def test_a_file_gone_has_its_records_dropped(
    tree: DeviceSupportTree, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert index(str(tree.root), capsys=capsys)[0] == 0
    gone = tree.libraries[0]
    gone.path.unlink()
    status, out, _ = index(str(tree.root), capsys=capsys)
    assert status == 0
    assert "2 system images (2 slices) of 1 OS builds: 0 new or changed, 2 unchanged" in out
    assert "2 records of files gone or changed dropped" in out
    assert set(recorded(cache_dir)) == {u for lib in tree.libraries[1:] for u in lib.uuids.values()}
    # A whole OS build deleted: its records go with it.
    shutil.rmtree(tree.build_dir)
    (tree.root / "17.4 (21E219)" / "Symbols").mkdir(parents=True)
    status, _, err = index(str(tree.root), capsys=capsys)
    assert (status, "nothing to index" in err) == (1, True)  # as a folder that never held any
    assert recorded(cache_dir) == {}


def test_the_same_uuid_in_another_file_is_a_conflict_reported_and_kept(
    tree: DeviceSupportTree, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tree.libraries[1]  # Foundation, thin
    assert index(str(tree.root), capsys=capsys)[0] == 0
    other = tree.root / "17.5.1 (21F91)" / "Symbols" / "Foundation"
    other.parent.mkdir(parents=True)
    shutil.copyfile(first.path, other)
    (uuid,) = first.uuids.values()
    for _ in range(2):  # reported again by the next run, not forgotten
        status, out, _ = index(str(tree.root), capsys=capsys)
        assert status == 0
        assert (
            f"conflict: {uuid} (arm64) in {other}: already recorded for {first.path}; kept" in out
        )
        assert recorded(cache_dir)[uuid].path == str(first.path)
    # Once the first file is gone, the other one is recorded.
    first.path.unlink()
    status, out, _ = index(str(tree.root), capsys=capsys)
    assert "conflict" not in out
    assert recorded(cache_dir)[uuid].path == str(other)
    assert recorded(cache_dir)[uuid].build == "21F91"


def test_a_device_support_folder_of_junk_is_nothing_to_index(
    tmp_path: Path, cache_dir: Path
) -> None:
    symbols = tmp_path / "iOS DeviceSupport" / "17.5.1 (21F90)" / "Symbols"
    (symbols / "usr" / "lib").mkdir(parents=True)
    (symbols / "usr" / "lib" / "libjunk.dylib").write_bytes(b"not a Mach-O at all\n" * 100)
    (symbols / "Info.plist").write_bytes(plistlib.dumps({"a": 1}))
    (symbols / "empty").write_bytes(b"")
    done = run_cli("index", str(tmp_path / "iOS DeviceSupport"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"dsymfind: error: nothing to index under {tmp_path / 'iOS DeviceSupport'}: no .dSYM "
        "bundle, no zip of dSYMs, and no Mach-O image in an OS build\n"
    )
    assert recorded(cache_dir) == {}


def test_a_truncated_dylib_is_reported_and_the_rest_indexed(
    tree: DeviceSupportTree, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tree.libraries[0]
    data = broken.path.read_bytes()
    broken.path.write_bytes(data[: len(data) // 2])
    for _ in range(2):  # reported on every run while it stays broken
        status, out, _ = index(str(tree.root), capsys=capsys)
        assert status == 1
        assert "2 system images (2 slices) of 1 OS builds" in out
        assert f"invalid: {broken.path}: " in out
    assert set(recorded(cache_dir)) == {u for lib in tree.libraries[1:] for u in lib.uuids.values()}


def test_a_symlink_loop_does_not_hang_the_walk(tree: DeviceSupportTree, cache_dir: Path) -> None:
    frameworks = tree.symbols / "System" / "Library" / "Frameworks"
    (frameworks / "Loop.framework").symlink_to(frameworks)
    (frameworks / "Itself").symlink_to("Itself")
    done = run_cli("index", str(tree.root), timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert REPORTED in done.stdout
    assert recorded(cache_dir) == expected_records(tree)


def test_the_default_roots_are_read_with_no_path(
    tree: DeviceSupportTree,
    isolated_home: Path,
    cache_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    xcode = isolated_home / "Library" / "Developer" / "Xcode"
    xcode.mkdir(parents=True)
    tree.root.rename(xcode / "iOS DeviceSupport")
    status, out, _ = index(capsys=capsys)
    assert status == 0
    assert f"Indexed {xcode / 'iOS DeviceSupport'}" in out
    assert REPORTED in out
    assert {i.path.replace(str(xcode), "") for i in recorded(cache_dir).values()} == {
        str(lib.path).replace(str(tree.root.parent), "") for lib in tree.libraries
    }


def test_ten_thousand_files_in_bounded_memory(
    tree: DeviceSupportTree, tmp_path: Path, cache_dir: Path
) -> None:
    count = 10_000
    thin = tree.libraries[1].path  # one slice
    universal = tree.libraries[0].path  # two
    big = tmp_path / "iOS DeviceSupport" / "18.0 (22A3354)" / "Symbols" / "usr" / "lib"
    for number in range(count):
        source = universal if number % 10 == 0 else thin
        clone_with_uuid(source, big / f"d{number // 500}" / f"lib{number}.dylib", f"many{number}")
    slices = count + count // 10
    # The index's own peak memory, from its wait4: a wrapper starts it and prints it last.
    measuring = (
        "import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:]); "
        "_, status, usage = os.wait4(child.pid, 0); "
        "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            measuring,
            str(BIN / "dsymfind"),
            "index",
            str(tmp_path / "iOS DeviceSupport"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    *report, last = done.stdout.splitlines()
    status, maxrss = map(int, last.split())
    assert status == 0
    assert f"{count} system images ({slices} slices) of 1 OS builds" in "\n".join(report)
    assert len(recorded(cache_dir)) == slices
    # What it holds per file is a state line and a UUID: nothing of the files' bytes.
    peak = maxrss * (1 if sys.platform == "darwin" else 1024)
    assert peak < 150 * 1024 * 1024, peak


def test_two_indexes_at_once_into_one_cache_keep_every_record(
    built: DeviceSupportTree, tmp_path: Path, cache_dir: Path
) -> None:
    """Two `dsymfind index` processes over different DeviceSupport folders write the same
    shards: each writer reads a shard again under the lock, so neither loses the other's."""
    expected: dict[str, str] = {}
    roots = []
    for os_name in ("iOS", "watchOS"):
        root = tmp_path / f"{os_name} DeviceSupport"
        folder = root / "17.5.1 (21F90)" / "Symbols" / "usr" / "lib"
        for number in range(300):  # about a thousand slices each: every shard written
            source = built.libraries[number % len(built.libraries)].path
            target = folder / f"lib{number}.dylib"
            carried = clone_with_uuid(source, target, f"{os_name}-{number}")
            expected.update(dict.fromkeys(carried.values(), str(target)))
        roots.append(root)
    runs = [
        subprocess.Popen(
            [str(BIN / "dsymfind"), "index", str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for root in roots
    ]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert (run.returncode, err) == (0, ""), out
    assert {uuid: image.path for uuid, image in recorded(cache_dir).items()} == expected


def test_records_of_the_older_layout_are_moved_into_their_shards(
    tree: DeviceSupportTree, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache written when each slice had its file `systems/<HEX>`: the next index moves
    those records into their shards (and reads the files again, their records not found
    in any shard)."""
    assert index(str(tree.root), capsys=capsys)[0] == 0
    cache = CachePaths(str(cache_dir))
    for shard in systems.shard_names(cache):
        (cache_dir / "systems" / shard).unlink()
    for uuid, image in expected_records(tree).items():
        (cache_dir / "systems" / uuid.replace("-", "")).write_bytes(marshal.dumps((1, *image)))
    assert recorded(cache_dir) == {}  # the helper no longer reads them
    status, out, _ = index(str(tree.root), capsys=capsys)
    assert status == 0 and f"{REPORTED}: 3 new or changed, 0 unchanged" in out
    assert recorded(cache_dir) == expected_records(tree)
    assert sorted(os.listdir(cache_dir / "systems")) == systems.shard_names(cache)
