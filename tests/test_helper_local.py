"""The dsymForUUID helper answering from local sources, as a real process."""

from __future__ import annotations

import os
import plistlib
import shutil
from pathlib import Path

import pytest
from support.fixtures import (
    GREET_UUID,
    HELLO_UUID,
    UNIVERSAL_UUIDS,
    dwarf_of,
    make_tree_link,
    toml_list,
    write_config,
)
from support.plists import POISONS
from support.processes import (
    COSTLY_MODULES,
    assert_universal_answered,
    modules_loaded_answering,
    run_helper,
)


def test_file_mapped_tree_answer_has_every_key(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    make_tree_link(tree, HELLO_UUID, dwarf_of(products / "hello.dSYM"))
    write_config(config_file, f"file_mapped_paths = {toml_list([tree])}\n")

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert entry["DBGDSYMPath"] == str(dwarf_of(products / "hello.dSYM").resolve())
    assert entry["DBGArchitecture"] == "arm64"
    assert entry["DBGSymbolRichExecutable"] == str(products / "hello")


def test_every_uuid_spelling_and_flag_order(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    make_tree_link(tree, HELLO_UUID, dwarf_of(products / "hello.dSYM"), relative=False)
    write_config(config_file, f"file_mapped_paths = {toml_list([tree])}\n")
    spellings = [
        [HELLO_UUID],
        [HELLO_UUID.lower()],
        [HELLO_UUID.replace("-", "")],
        ["--ignoreNegativeCache", "--copyExecutable", HELLO_UUID],
        ["--copyExecutable", "--ignoreNegativeCache", HELLO_UUID.lower()],
        ["--databases", "a,b", HELLO_UUID],
        ["--some-new-flag", HELLO_UUID, "--copyExecutable"],
    ]
    for argv in spellings:
        run = run_helper(*argv)
        assert list(run.plist) == [HELLO_UUID], argv
        assert run.entry(HELLO_UUID)["DBGDSYMPath"].endswith("DWARF/hello")


def test_file_path_split_on_spaces_answers_each_slice(
    spaced_products: Path, config_file: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([spaced_products])}\n")
    executable = spaced_products / "universal"

    run = run_helper("--ignoreNegativeCache", *str(executable).split(" "))

    assert_universal_answered(run, executable)
    for uuid in UNIVERSAL_UUIDS.values():
        assert Path(run.entry(uuid)["DBGDSYMPath"]).is_file()


def test_stale_and_foreign_tree_entries_are_skipped(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    wrong, dangling, good = tmp_path / "wrong", tmp_path / "dangling", tmp_path / "good"
    make_tree_link(wrong, HELLO_UUID, dwarf_of(products / "libgreet.dylib.dSYM"))
    make_tree_link(dangling, HELLO_UUID, tmp_path / "gone" / "hello")
    make_tree_link(good, HELLO_UUID, dwarf_of(products / "hello.dSYM"))
    write_config(config_file, f"file_mapped_paths = {toml_list([wrong, dangling, good])}\n")

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert entry["DBGDSYMPath"] == str(dwarf_of(products / "hello.dSYM").resolve())


def test_own_cache_tree_is_searched(products: Path, cache_dir: Path) -> None:
    make_tree_link(cache_dir / "uuids", GREET_UUID, dwarf_of(products / "libgreet.dylib.dSYM"))

    entry = run_helper(GREET_UUID).entry(GREET_UUID)

    assert entry["DBGSymbolRichExecutable"] == str(products / "libgreet.dylib")


def test_not_found_is_an_empty_dict() -> None:
    run = run_helper(HELLO_UUID)
    assert run.plist == {}
    assert b"<dict/>" in run.stdout


def test_uuid_plist_supplies_source_paths_and_executable(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    sources = tmp_path / "src"
    sources.mkdir()
    elsewhere = tmp_path / "bin" / "hello-unstripped"
    elsewhere.parent.mkdir()
    shutil.move(str(products / "hello"), elsewhere)
    bundle = products / "hello.dSYM"
    info = {
        "DBGBuildSourcePath": "/Users/ci/build/hello",
        "DBGSourcePath": str(sources),
        "DBGSymbolRichExecutable": str(elsewhere),
    }
    (bundle / "Contents" / "Resources" / f"{HELLO_UUID}.plist").write_bytes(plistlib.dumps(info))
    write_config(config_file, f"search_paths = {toml_list([products])}\n")

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert entry["DBGBuildSourcePath"] == "/Users/ci/build/hello"
    assert entry["DBGSourcePath"] == str(sources)
    assert entry["DBGSymbolRichExecutable"] == str(elsewhere)


def test_source_pair_left_out_when_local_sources_are_missing(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    info = {"DBGBuildSourcePath": "/Users/ci/build", "DBGSourcePath": str(tmp_path / "absent")}
    plist_path = products / "hello.dSYM" / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    plist_path.write_bytes(plistlib.dumps(info))
    write_config(config_file, f"search_paths = {toml_list([products])}\n")

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert "DBGSourcePath" not in entry and "DBGBuildSourcePath" not in entry


@pytest.mark.parametrize("poison", POISONS.values(), ids=list(POISONS))
def test_an_unreadable_per_uuid_plist_is_ignored_and_the_dsym_answered(
    poison: bytes, products: Path, config_file: Path
) -> None:
    """DebugSymbols ignores a per-UUID plist it cannot read; so does the helper, whatever
    plistlib raised reading it (AttributeError for a bad <date>, binascii.Error, ...)."""
    plist_path = products / "hello.dSYM" / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    plist_path.write_bytes(poison)
    write_config(config_file, f"search_paths = {toml_list([products])}\n")

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert entry["DBGDSYMPath"] == str(dwarf_of(products / "hello.dSYM"))
    assert entry["DBGSymbolRichExecutable"] == str(products / "hello")
    assert "DBGError" not in entry and "DBGSourcePath" not in entry


def test_remembered_answer_never_names_a_removed_file(products: Path, config_file: Path) -> None:
    write_config(config_file, f"search_paths = {toml_list([products])}\n")
    first = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "DBGSymbolRichExecutable" in first
    (products / "hello").unlink()

    second = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert "DBGSymbolRichExecutable" not in second
    shutil.rmtree(products / "hello.dSYM")
    assert run_helper(HELLO_UUID).plist == {}


def test_bad_config_is_a_dbgerror_with_nothing_on_stderr(config_file: Path) -> None:
    for text in (
        "timeout = 'soon'\n",
        "this is [not toml\n",
        "cache_dri = '/x'\n",
        "timeout = 9999\n",
    ):
        write_config(config_file, text)
        entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
        assert entry["DBGError"].startswith("dsymfind: ")
        assert str(config_file) in entry["DBGError"]


def test_hostile_argv_always_gets_a_plist(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    not_macho = tmp_path / "notes.txt"
    not_macho.write_text("hello")
    for argv in (
        [],
        ["--copyExecutable"],
        ["nonsense"],
        ["<&>"],
        [str(fifo)],
        [str(not_macho)],
        ["\x01\x02"],
    ):
        run = run_helper(*argv)
        assert len(run.plist) == 1, argv
        (entry,) = run.plist.values()
        assert entry["DBGError"].startswith("dsymfind: "), argv


def test_unwritable_log_and_cache_still_answer(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    write_config(
        config_file,
        f"search_paths = {toml_list([products])}\n"
        f"log_file = '{blocker}/sub/dsymfind.log'\ncache_dir = '{blocker}/cache'\n",
    )
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGArchitecture"] == "arm64"
    assert run_helper("0" * 32).plist == {}


def test_hit_path_imports_nothing_costly(products: Path, config_file: Path) -> None:
    """The remembered-answer path must not load what costs the helper its start-up time."""
    write_config(config_file, f"search_paths = {toml_list([products])}\n")
    run_helper(HELLO_UUID)  # builds the settings snapshot and remembers the answer
    loaded = modules_loaded_answering(HELLO_UUID, b"DBGDSYMPath")
    assert loaded & COSTLY_MODULES == set()


def test_a_repointed_or_removed_tree_entry_is_not_answered_from_memory(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    copy = tmp_path / "b" / "hello.dSYM"
    shutil.copytree(products / "hello.dSYM", copy)
    link = make_tree_link(tree, HELLO_UUID, dwarf_of(products / "hello.dSYM"), relative=False)
    write_config(config_file, f"file_mapped_paths = {toml_list([tree])}\n")
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"].startswith(str(products))

    link.unlink()
    link.symlink_to(dwarf_of(copy))
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf_of(copy))

    link.unlink()
    assert run_helper(HELLO_UUID).plist == {}


def test_a_record_made_while_its_file_was_gone_is_never_answered(tmp_path: Path) -> None:
    from dsymfind import answers

    gone = str(tmp_path / "vanished.dSYM" / "Contents" / "Resources" / "DWARF" / "hello")
    answer = {"DBGDSYMPath": gone, "DBGArchitecture": "arm64"}
    answers.remember(str(tmp_path / "answers"), HELLO_UUID, answer, "source", [])
    assert answers.recall(str(tmp_path / "answers"), HELLO_UUID, ["source"]) is None


def test_a_fifo_as_config_or_log_never_hangs_the_helper(
    tmp_path: Path, config_file: Path, products: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    env = {**os.environ, "DSYMFIND_CONFIG": str(fifo)}
    error = run_helper(HELLO_UUID, env=env, timeout=20).entry(HELLO_UUID)["DBGError"]
    assert str(fifo) in error and "not a regular file" in error

    write_config(config_file, f"log_file = '{fifo}'\nsearch_paths = {toml_list([products])}\n")
    assert run_helper("0" * 32, timeout=20).plist == {}  # a miss, logged: to nowhere
