"""`dsymfind publish --system` with what a Mac's DeviceSupport folders really hold besides
dylibs, into a folder store: a folder with no OS build, files that are no Mach-O, a truncated
dylib, a symlink loop, a key already holding other bytes, several OS builds at once; and
--dry-run, --json and the flags that do not go with --system."""

from __future__ import annotations

import json
import plistlib
import shutil
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support

from dsymfind import main as cli
from dsymfind.apple import macho
from dsymfind.stores import builds, layouts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("devicesupport"))


@pytest.fixture
def tree(built: DeviceSupportTree, tmp_path: Path) -> DeviceSupportTree:
    """A copy of the built tree this test may change."""
    root = tmp_path / built.root.name
    shutil.copytree(built.root, root, symlinks=True)
    moved = [
        lib.__class__(
            lib.install_path, root / lib.path.relative_to(built.root), lib.uuids, lib.functions
        )
        for lib in built.libraries
    ]
    return DeviceSupportTree(
        root, root / built.build_dir.name, built.os, built.version, built.build, moved
    )


def publish(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["publish", "--system", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def files_in(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file()) if store.exists() else []


def only_record(store: Path) -> dict[str, object]:
    (path,) = (store / "_builds").iterdir()
    document: dict[str, object] = json.loads(path.read_bytes())
    return document


def test_a_folder_with_no_os_build_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Downloads" / "Symbols").mkdir(parents=True)
    store = tmp_path / "store"

    code, out, err = publish(capsys, "--to", store, tmp_path / "Downloads")

    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"dsymfind: error: {tmp_path / 'Downloads'}: no OS build here")
    assert files_in(store) == []


def test_junk_is_passed_over_a_truncated_dylib_refused_and_a_link_loop_harmless(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    symbols = tree.symbols
    (symbols / "usr" / "lib" / "notes.txt").write_text("not a library\n")
    (symbols / "System" / "Library" / "Caches").mkdir()
    (symbols / "System" / "Library" / "Caches" / "com.apple.dyld").write_bytes(b"\0" * 4096)
    foundation = next(lib for lib in tree.libraries if lib.path.name == "Foundation")
    truncated = symbols / "usr" / "lib" / "libtruncated.dylib"
    truncated.write_bytes(foundation.path.read_bytes()[:3000])
    (symbols / "usr" / "lib" / "loop").symlink_to("..")
    (symbols / "usr" / "lib" / "a").symlink_to("b")
    (symbols / "usr" / "lib" / "b").symlink_to("a")
    store = tmp_path / "store"

    code, out, err = publish(capsys, "--to", store, tree.root)

    assert code == 1  # as publish exits for any input it refused
    (refused,) = err.splitlines()
    assert refused.startswith(f"dsymfind: refused {truncated}: truncated or malformed")
    assert (
        out.splitlines()[-1] == "summary: 4 published, 0 exists, 0 skipped, 1 refused, 0 conflicts"
    )
    record = only_record(store)
    images = record["images"]
    assert isinstance(images, list) and len(images) == 4
    assert "libtruncated.dylib" not in json.dumps(record)


def test_other_bytes_under_a_key_are_a_conflict_left_alone_and_the_rest_recorded(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    foundation = next(lib for lib in tree.libraries if lib.path.name == "Foundation")
    uuid = foundation.uuids["arm64"]
    key = layouts.executable_key(layouts.DEFAULT, uuid, "Foundation")
    assert key is not None
    (store / key).parent.mkdir(parents=True)
    (store / key).write_bytes(b"someone else's Foundation")

    code, out, err = publish(capsys, "--to", store, tree.root)

    assert code == 1, err
    assert f"Foundation {uuid} arm64: conflict" in out
    assert (store / key).read_bytes() == b"someone else's Foundation"
    assert "0 conflicts" not in out.splitlines()[-1]
    images = only_record(store)["images"]
    assert isinstance(images, list)
    assert sorted(image["name"] for image in images) == [
        "UIKitCore",
        "UIKitCore",
        "libsystem_kernel.dylib",
    ]


def test_a_dry_run_writes_nothing_and_says_what_it_would(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"

    code, out, err = publish(capsys, "--to", store, "--dry-run", tree.root)

    assert code == 0, err
    assert out.count(": would publish") == 4
    assert "would write build record _builds/" in out and ",iOS,17.5.1,21F90,," in out
    assert out.rstrip().endswith(
        ",system.json\nsummary: 4 would publish, 0 exists, 0 skipped, 0 refused, 0 conflicts"
    )
    assert files_in(store) == []


def test_json_is_a_record_per_object_refused_files_included(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = tree.symbols / "usr" / "lib" / "libtruncated.dylib"
    truncated.write_bytes(b"\xcf\xfa\xed\xfe" + b"\0" * 60)

    code, out, _ = publish(capsys, "--to", tmp_path / "store", "--json", tree.root)

    assert code == 1
    listed = json.loads(out)
    executables = [r for r in listed if (r["key"] or "").endswith("/executable")]
    assert sorted((r["name"], r["arch"], r["state"]) for r in executables) == [
        ("Foundation", "arm64", "published"),
        ("UIKitCore", "arm64", "published"),
        ("UIKitCore", "arm64e", "published"),
        ("libsystem_kernel.dylib", "arm64e", "published"),
    ]
    (refused,) = [r for r in listed if r["state"] == "refused"]
    assert refused["file"] == str(truncated) and refused["key"] is None


def test_each_os_build_gets_its_own_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = (("/usr/lib/libobjc.A.dylib", ("arm64",)),)
    first = build_device_support(tmp_path, libraries=one)
    second = build_device_support(tmp_path, version="17.6", build="21G80", libraries=one)
    assert first.root == second.root
    store = tmp_path / "store"

    code, out, err = publish(capsys, "--to", store, first.root)

    assert code == 0, err
    summaries = [builds.parse_summary(f"_builds/{p.name}") for p in (store / "_builds").iterdir()]
    assert sorted((s.kind, s.app, s.version, s.build, s.images) for s in summaries) == [
        ("system", "iOS", "17.5.1", "21F90", 1),
        ("system", "iOS", "17.6", "21G80", 1),
    ]
    assert out.count("build record _builds/") == 2

    code, _, err = publish(capsys, "--to", tmp_path / "other", "--build-id", "x", first.root)
    assert code == 1 and "--build-id names one build; the paths hold 2 OS builds" in err


def test_a_path_without_an_os_build_beside_good_ones_is_refused_and_the_rest_published(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()

    code, out, err = publish(capsys, "--to", tmp_path / "store", empty, tree.build_dir)

    assert code == 1
    assert err.startswith(f"dsymfind: refused {empty}: no OS build here")
    assert "4 published" in out.splitlines()[-1]


@pytest.mark.parametrize(
    "flag", [["--executables"], ["--app-version", "1"], ["--source-root", "."], ["--xcode"]]
)
def test_flags_of_an_app_build_do_not_go_with_system(
    tree: DeviceSupportTree, tmp_path: Path, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = publish(capsys, "--to", tmp_path / "store", *flag, tree.root)

    assert code == 1 and out == ""
    assert f"{flag[0]} does not go with --system" in err
    assert not (tmp_path / "store").exists()


def test_the_published_bytes_are_one_thin_slice_of_a_universal_library(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert publish(capsys, "--to", store, tree.root)[0] == 0
    uikit = next(lib for lib in tree.libraries if lib.path.name == "UIKitCore")
    for arch, uuid in uikit.uuids.items():
        key = layouts.executable_key(layouts.DEFAULT, uuid, "UIKitCore")
        assert key is not None
        assert [(s.uuid, s.arch) for s in macho.read_slices(store / key)] == [(uuid, arch)]


def test_a_simulator_runtime_is_published_as_its_os_build_says(
    tree: DeviceSupportTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .simruntime's RuntimeRoot mirrors the simulator's file system; its
    SystemVersion.plist names the OS build."""
    runtime = tmp_path / "Runtimes" / "iOS 17.5.simruntime"
    root = runtime / "Contents" / "Resources" / "RuntimeRoot"
    shutil.copytree(tree.symbols, root)
    plist = root / "System" / "Library" / "CoreServices" / "SystemVersion.plist"
    plist.parent.mkdir(parents=True)
    plist.write_bytes(
        plistlib.dumps(
            {"ProductName": "iPhone OS", "ProductVersion": "17.5", "ProductBuildVersion": "21F79"}
        )
    )
    store = tmp_path / "store"

    code, out, err = publish(capsys, "--to", store, tmp_path / "Runtimes")

    assert code == 0, err
    assert "build record _builds/" in out and ",iOS%20Simulator,17.5,21F79,," in out
    record = only_record(store)
    assert (record["kind"], record["app"], record["version"], record["build"]) == (
        "system",
        "iOS Simulator",
        "17.5",
        "21F79",
    )
    images = record["images"]
    assert isinstance(images, list) and len(images) == 4
    assert "/System/Library/Frameworks/Foundation.framework/Foundation" in {
        image["install_path"] for image in images
    }
