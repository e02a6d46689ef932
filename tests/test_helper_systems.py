"""The dsymForUUID helper answering a system image `dsymfind index` recorded, as a real
process: its file as the symbol-rich executable, checked once and remembered, never a
vanished file, and never before a dSYM."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support, clone_with_uuid
from support.fixtures import FIXTURES, HELLO_UUID, write_config
from support.negative import remember_absent
from support.processes import modules_loaded_answering, run_cli, run_helper
from support.system_images import copied, recorded

from dsymfind.cache import systems
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

# Never contacted: a fresh negative marker answers before any request would be made.
UNREACHABLE = "http://127.0.0.1:9/"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("built"))


@pytest.fixture
def tree(built: DeviceSupportTree, tmp_path: Path, cache_dir: Path) -> DeviceSupportTree:
    """A copy of the tree, indexed."""
    found = copied(built, tmp_path / "Xcode")
    done = run_cli("index", str(found.root))
    assert done.returncode == 0, done.stdout + done.stderr
    return found


def system_answer(path: Path, arch: str) -> dict[str, str]:
    return {"DBGArchitecture": arch, "DBGSymbolRichExecutable": str(path)}


def test_each_slice_is_answered_with_its_file_alone(tree: DeviceSupportTree) -> None:
    for library in tree.libraries:
        for arch, uuid in library.uuids.items():
            for argv in ([uuid], ["--copyExecutable", uuid.lower()], [uuid, "--copyExecutable"]):
                run = run_helper(*argv)  # one plist on stdout, no stderr, exit 0
                assert run.plist == {uuid: system_answer(library.path, arch)}, argv


def test_the_file_itself_asked_for_answers_each_slice(tree: DeviceSupportTree) -> None:
    universal = tree.libraries[0]
    run = run_helper(*str(universal.path).split(" "))  # as LLDB splits a path with spaces
    assert run.plist == {
        uuid: system_answer(universal.path, arch) for arch, uuid in universal.uuids.items()
    }


def test_the_answer_is_remembered_and_recalled_without_the_mach_o_reader(
    tree: DeviceSupportTree, cache_dir: Path
) -> None:
    library = tree.libraries[1]
    (uuid,) = library.uuids.values()
    first = run_helper(uuid).plist
    assert (cache_dir / "answers" / uuid_hex(uuid)).is_file()
    loaded = modules_loaded_answering(uuid, str(library.path).encode())
    assert "dsymfind.apple.macho" not in loaded
    assert "dsymfind.cache.systems" not in loaded
    assert run_helper(uuid).plist == first


def test_a_vanished_or_replaced_file_is_no_answer(tree: DeviceSupportTree) -> None:
    gone, replaced = tree.libraries[1], tree.libraries[2]
    (gone_uuid,) = gone.uuids.values()
    (replaced_uuid,) = replaced.uuids.values()
    for uuid in (gone_uuid, replaced_uuid):
        assert uuid in run_helper(uuid).plist  # answered, and remembered
    gone.path.unlink()
    clone_with_uuid(replaced.path, replaced.path.with_name("rebuilt"), "rebuilt")
    os.replace(replaced.path.with_name("rebuilt"), replaced.path)  # carries other UUIDs now
    assert run_helper(gone_uuid).plist == {}
    assert run_helper(replaced_uuid).plist == {}


def test_a_system_image_answers_before_the_negative_cache(
    tree: DeviceSupportTree, cache_dir: Path, config_file: Path
) -> None:
    write_config(config_file, f"[[servers]]\nurl = '{UNREACHABLE}'\nlayout = 'native'\n")
    library = tree.libraries[1]
    (uuid,) = library.uuids.values()
    remember_absent(cache_dir, uuid)
    assert run_helper(uuid).plist == {uuid: system_answer(library.path, "arm64")}


def test_a_dsym_always_wins_over_a_system_image(
    built: DeviceSupportTree, tmp_path: Path, cache_dir: Path
) -> None:
    # A tree whose image is the fixtures' `hello`, whose dSYM the products hold.
    symbols = tmp_path / "iOS DeviceSupport" / "17.5.1 (21F90)" / "Symbols" / "usr" / "bin"
    symbols.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "hello", symbols / "hello")
    assert run_cli("index", str(tmp_path / "iOS DeviceSupport")).returncode == 0
    # Remembered as a system image first: a dSYM indexed later is answered all the same.
    assert run_helper(HELLO_UUID).plist == {HELLO_UUID: system_answer(symbols / "hello", "arm64")}
    products = tmp_path / "products"
    products.mkdir()
    shutil.copytree(FIXTURES / "hello.dSYM", products / "hello.dSYM")
    assert run_cli("index", str(products)).returncode == 0
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert entry["DBGDSYMPath"].endswith("hello.dSYM/Contents/Resources/DWARF/hello")


def test_an_unknown_uuid_stays_a_quiet_negative_answer(tree: DeviceSupportTree) -> None:
    missing = "0BE7C0DE-0000-4000-8000-00000000DEAD"
    assert run_helper(missing).plist == {}
    # One stat of systems/<HEX> found nothing: no module of the system path was loaded.
    loaded = modules_loaded_answering(missing, b"<dict/>")
    assert "dsymfind.cache.systems" not in loaded
    assert "dsymfind.apple.device_support" not in loaded


def test_a_record_naming_a_file_outside_its_uuid_is_not_answered(
    tree: DeviceSupportTree, cache_dir: Path
) -> None:
    """A record (damaged, or another user's doing) whose file does not carry the UUID."""
    first, other = tree.libraries[1], tree.libraries[2]
    (uuid,) = first.uuids.values()
    with systems.Shards(CachePaths(str(cache_dir))) as shards:
        shards.put(recorded(cache_dir)[uuid]._replace(path=str(other.path)))
        assert shards.save() == []
    assert run_helper(uuid).plist == {}
