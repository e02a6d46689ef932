"""apple/device_support.py on DeviceSupport trees and simulator runtimes made by clang/lld
here: OS builds named as Xcode names their folders, every image's slices with their
UUIDs (llvm's view of the same files), and bad input that must not sink the walk."""

from __future__ import annotations

import os
import plistlib
import shutil
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support
from support.system_images import copied

from dsymfind.apple import device_support
from dsymfind.apple.device_support import DeviceSupportError, OSBuild


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("built"))


@pytest.fixture
def tree(built: DeviceSupportTree, tmp_path: Path) -> DeviceSupportTree:
    return copied(built, tmp_path)


def walked(os_build: OSBuild) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    """install path -> {arch: UUID} of every image, and what went to on_invalid."""
    invalid: list[tuple[str, str]] = []
    images = {
        found.install_path: {str(s.arch): str(s.uuid) for s in found.slices}
        for found in device_support.system_files(os_build, lambda p, r: invalid.append((p, r)))
    }
    return images, invalid


def expected(tree: DeviceSupportTree) -> dict[str, dict[str, str]]:
    return {lib.install_path: lib.uuids for lib in tree.libraries}


def test_every_image_of_a_build_with_the_uuids_of_its_slices(tree: DeviceSupportTree) -> None:
    (os_build,) = device_support.os_builds(str(tree.root))
    assert os_build == OSBuild("iOS", "17.5.1", "21F90", str(tree.symbols), None)
    assert os_build.label == "iOS 17.5.1 (21F90)"
    images, invalid = walked(os_build)
    assert images == expected(tree)  # thin and universal alike, as llvm read them
    assert invalid == []
    # The same build found from its folder, and from its Symbols folder.
    assert device_support.os_builds(str(tree.build_dir)) == [os_build]
    assert device_support.os_builds(str(tree.symbols)) == [os_build]


@pytest.mark.parametrize(
    ("name", "version", "build", "model"),
    [
        ("iPhone15,2 17.5.1 (21F90)", "17.5.1", "21F90", "iPhone15,2"),
        ("16.0 (20A362) arm64e", "16.0", "20A362", None),
        ("Watch6,1 10.4 (21T216) arm64_32", "10.4", "21T216", "Watch6,1"),
    ],
)
def test_build_folders_named_with_a_model_or_an_architecture(
    tree: DeviceSupportTree, name: str, version: str, build: str, model: str | None
) -> None:
    renamed = tree.root / name
    tree.build_dir.rename(renamed)
    (os_build,) = device_support.os_builds(str(tree.root))
    assert (os_build.os, os_build.version, os_build.build, os_build.model) == (
        "iOS",
        version,
        build,
        model,
    )
    assert walked(os_build)[0] == expected(tree)


def test_several_platforms_and_builds_under_one_folder(
    tmp_path: Path, tree: DeviceSupportTree
) -> None:
    xcode = tmp_path / "Xcode"
    xcode.mkdir()
    tree.root.rename(xcode / "iOS DeviceSupport")
    watch = xcode / "watchOS DeviceSupport" / "10.5 (21T575)"
    shutil.copytree(xcode / "iOS DeviceSupport" / tree.build_dir.name, watch, symlinks=True)
    found = device_support.os_builds(str(xcode / "watchOS DeviceSupport"))
    assert [(b.os, b.version, b.build) for b in found] == [("watchOS", "10.5", "21T575")]
    with pytest.raises(DeviceSupportError, match="no OS build here"):
        device_support.os_builds(str(xcode))  # the folder above: not one of them


def simruntime(
    parent: Path, tree: DeviceSupportTree, product: str, version: str, build: str
) -> Path:
    runtime = parent / f"{product} {version}.simruntime"
    root = runtime / "Contents" / "Resources" / "RuntimeRoot"
    shutil.copytree(tree.symbols, root, symlinks=True)
    plist = root / "System" / "Library" / "CoreServices" / "SystemVersion.plist"
    plist.parent.mkdir(parents=True, exist_ok=True)
    plist.write_bytes(
        plistlib.dumps(
            {"ProductName": product, "ProductVersion": version, "ProductBuildVersion": build}
        )
    )
    return runtime


def test_a_simulator_runtime_is_named_by_its_system_version_plist(
    tmp_path: Path, tree: DeviceSupportTree
) -> None:
    runtimes = tmp_path / "Runtimes"
    runtime = simruntime(runtimes, tree, "iPhone OS", "17.5", "21F79")
    simruntime(runtimes, tree, "Apple TVOS", "17.5", "21L569")
    (os_build,) = device_support.os_builds(str(runtime))
    assert (os_build.os, os_build.version, os_build.build) == ("iOS Simulator", "17.5", "21F79")
    assert os_build.symbols == str(runtime / "Contents" / "Resources" / "RuntimeRoot")
    images, invalid = walked(os_build)
    assert images == expected(tree) and invalid == []  # the plist is no image, and not invalid
    found = device_support.os_builds(str(runtimes))
    assert sorted(b.label for b in found) == [
        "iOS Simulator 17.5 (21F79)",
        "tvOS Simulator 17.5 (21L569)",
    ]
    # A runtime whose plist is missing is none.
    (
        runtime / "Contents/Resources/RuntimeRoot/System/Library/CoreServices/SystemVersion.plist"
    ).unlink()
    with pytest.raises(DeviceSupportError):
        device_support.os_builds(str(runtime))


def test_files_that_are_not_mach_o_are_passed_over_in_silence(tree: DeviceSupportTree) -> None:
    junk = tree.symbols / "System" / "Library" / "Caches"
    junk.mkdir(parents=True)
    (junk / "com.apple.dyld.plist").write_bytes(plistlib.dumps({"a": 1}))
    (junk / "empty").write_bytes(b"")
    (junk / "text").write_text("not a Mach-O\n")
    os.mkfifo(junk / "fifo")  # never opened for reading: the walk lists regular files only
    (os_build,) = device_support.os_builds(str(tree.root))
    images, invalid = walked(os_build)
    assert images == expected(tree) and invalid == []


def test_a_folder_of_only_other_files_holds_no_build(tmp_path: Path) -> None:
    junk = tmp_path / "iOS DeviceSupport" / "notes"
    junk.mkdir(parents=True)
    (junk / "README").write_text("hello\n")
    with pytest.raises(DeviceSupportError, match="no OS build here"):
        device_support.os_builds(str(tmp_path / "iOS DeviceSupport"))
    with pytest.raises(DeviceSupportError, match="not a folder"):
        device_support.os_builds(str(junk / "README"))


def test_a_truncated_image_is_reported_and_the_others_are_read(tree: DeviceSupportTree) -> None:
    broken = tree.libraries[0]
    data = broken.path.read_bytes()
    broken.path.write_bytes(data[: len(data) // 3])
    (os_build,) = device_support.os_builds(str(tree.root))
    images, invalid = walked(os_build)
    assert images == {k: v for k, v in expected(tree).items() if k != broken.install_path}
    assert [path for path, _ in invalid] == [str(broken.path)]
    assert invalid[0][1]  # a reason, without the path repeated
    assert not invalid[0][1].startswith(str(broken.path))


def test_a_symlink_loop_is_not_followed(tree: DeviceSupportTree) -> None:
    frameworks = tree.symbols / "System" / "Library" / "Frameworks"
    (frameworks / "loop").symlink_to(frameworks)
    (frameworks / "self").symlink_to("self")
    first = tree.libraries[1]
    (frameworks / "alias").symlink_to(first.path)  # a framework's top-level link, say
    (os_build,) = device_support.os_builds(str(tree.root))
    images, invalid = walked(os_build)
    assert images == expected(tree)  # each file once, by its real path
    assert invalid == []
