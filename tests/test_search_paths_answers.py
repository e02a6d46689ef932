"""Search-path answers from the index's answer shards: light, and never stale."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, GREET_UUID, HELLO_UUID, dwarf_of, toml_list, write_config
from support.negative import remember_absent
from support.processes import COSTLY_MODULES, modules_loaded_answering, run_helper

from dsymfind import answers, atomic, search_paths, settings
from dsymfind.local_lookup import Lookup, search_origin

# Never contacted: the negative cache answers first.
UNREACHABLE_SERVER = '[[servers]]\nurl = "http://127.0.0.1:9/"\nlayout = "native"\n'
MISSING_UUID = "0F0F0F0F-1111-2222-3333-444455556666"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "Products"
    (root / "Debug").mkdir(parents=True)
    shutil.copytree(FIXTURES / "hello.dSYM", root / "Debug" / "hello.dSYM")
    return root


def forget_answers(cache_dir: Path) -> None:
    shutil.rmtree(cache_dir / "answers", ignore_errors=True)


def test_a_warm_index_answers_without_the_macho_reader(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n")
    first = run_helper(HELLO_UUID).entry(HELLO_UUID)  # walks the tree, writes the shards
    forget_answers(cache_dir)

    loaded = modules_loaded_answering(HELLO_UUID, b"DBGDSYMPath")

    assert loaded & (COSTLY_MODULES | {"dsymfind.apple.macho", "dsymfind.apple.bundle"}) == set()
    assert run_helper(HELLO_UUID).entry(HELLO_UUID) == first


def negative_answer_with_a_search_path(tree: Path, config_file: Path, cache_dir: Path) -> None:
    """MISSING_UUID in the negative cache, a search path configured and walked once."""
    write_config(config_file, f"search_paths = {toml_list([tree])}\n{UNREACHABLE_SERVER}")
    remember_absent(cache_dir, MISSING_UUID)
    assert run_helper(MISSING_UUID).plist == {}


def test_negative_cache_with_a_search_path_loads_nothing_costly(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    negative_answer_with_a_search_path(tree, config_file, cache_dir)

    loaded = modules_loaded_answering(MISSING_UUID, b"<dict/>")

    assert loaded & (COSTLY_MODULES | {"dsymfind.apple.macho", "dsymfind.apple.bundle"}) == set()


def test_a_miss_the_shards_cannot_settle_loads_no_reader(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    """Without the walk's marker the index itself says no: no bundle is looked at."""
    negative_answer_with_a_search_path(tree, config_file, cache_dir)
    (marker,) = (cache_dir / "index").glob(f"*.answers/{search_paths._WALKED_MARKER}")
    marker.unlink()

    loaded = modules_loaded_answering(MISSING_UUID, b"<dict/>")

    assert not marker.exists()  # no walk was due: the index answered as it was
    assert loaded & {"dsymfind.apple", "dsymfind.apple.bundle"} == set()


def test_a_due_refresh_of_an_unchanged_tree_loads_no_reader(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    """Every few seconds a lookup walks the tree again: unchanged, it reads no DWARF file."""
    negative_answer_with_a_search_path(tree, config_file, cache_dir)
    (index_file,) = (cache_dir / "index").glob("*[!s]")  # the index, not its answers folder
    walked = Path(f"{index_file}.answers") / search_paths._WALKED_MARKER
    state = atomic.read_marshal(str(index_file))
    state["refreshed"] = 0.0  # as if the last walk were long ago
    atomic.write_marshal(str(index_file), state)
    os.utime(walked, (0, 0))

    loaded = modules_loaded_answering(MISSING_UUID, b"<dict/>")

    assert atomic.read_marshal(str(index_file))["refreshed"] > 0  # the walk did run
    assert walked.stat().st_mtime > 0
    assert loaded & (COSTLY_MODULES | {"dsymfind.apple.macho", "plistlib"}) == set()


def test_a_changed_dwarf_file_is_verified_again(tree: Path, config_file: Path) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n")
    run_helper(HELLO_UUID)
    dwarf = dwarf_of(tree / "Debug" / "hello.dSYM")
    shutil.copyfile(dwarf_of(FIXTURES / "libgreet.dylib.dSYM"), dwarf)  # another UUID now

    assert run_helper(HELLO_UUID).plist == {}


def test_a_bundle_that_appears_locally_beats_the_negative_cache(
    tree: Path, config_file: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n{UNREACHABLE_SERVER}")
    lookup = Lookup(settings.load())
    assert lookup.find(GREET_UUID) is None  # walks, writes the shards
    remember_absent(cache_dir, GREET_UUID)
    shutil.copytree(FIXTURES / "libgreet.dylib.dSYM", tree / "Debug" / "libgreet.dylib.dSYM")
    monkeypatch.setattr(search_paths, "REFRESH_INTERVAL", 0.0)  # a walk is due at once
    monkeypatch.setattr(search_paths, "WALK_INTERVAL_FACTOR", 0.0)

    found = lookup.find(GREET_UUID)

    assert found is not None
    assert found["DBGDSYMPath"].endswith(
        "libgreet.dylib.dSYM/Contents/Resources/DWARF/libgreet.dylib"
    )


def test_shards_verdicts(tree: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogs_dir, root = str(cache_dir / "index"), str(tree)
    source = search_origin(root)
    assert search_paths.quick_find(catalogs_dir, root, HELLO_UUID, source) == (None, False)
    index = search_paths.SearchCatalog(catalogs_dir, root)
    index.refresh()
    index.write_answers(source)

    ready, settled = search_paths.quick_find(catalogs_dir, root, HELLO_UUID, source)
    assert settled and ready is not None
    assert answers.check(ready[1], [source]) == (ready[0], source)
    assert search_paths.quick_find(catalogs_dir, root, MISSING_UUID, source) == (None, True)
    assert search_paths.quick_find(catalogs_dir, root, HELLO_UUID, "another source")[0] is None
    monkeypatch.setattr(search_paths, "REFRESH_INTERVAL", 0.0)  # a walk is due at once
    monkeypatch.setattr(search_paths, "WALK_INTERVAL_FACTOR", 0.0)
    assert search_paths.quick_find(catalogs_dir, root, MISSING_UUID, source) == (None, False)


def test_a_long_walks_findings_stand_as_long_as_the_index_says_without_loading_it(
    tree: Path, cache_dir: Path
) -> None:
    """A walk of 60 s is due again only after 600 s: until then a miss is settled by the
    shards, not by unmarshalling the whole index (as large as the tree)."""
    catalogs_dir, root = str(cache_dir / "index"), str(tree)
    source = search_origin(root)
    index = search_paths.SearchCatalog(catalogs_dir, root)
    index.refresh()
    index.walk_seconds = 60.0
    index.refreshed = time.time() - 7.0  # past REFRESH_INTERVAL, well inside the long walk's
    index._save()
    index.write_answers(source)

    assert search_paths.walk_interval(index.walk_seconds) >= 600.0
    reloaded = search_paths.SearchCatalog(catalogs_dir, root)
    assert not reloaded.find(MISSING_UUID)
    assert reloaded.refreshed == index.refreshed  # no walk was due, none was made
    assert search_paths.quick_find(catalogs_dir, root, MISSING_UUID, source) == (None, True)
    walked = Path(search_paths._answers_folder(index.path)) / search_paths._WALKED_MARKER
    os.utime(walked, (time.time() - 601.0, time.time() - 601.0))  # now the walk is due
    assert search_paths.quick_find(catalogs_dir, root, MISSING_UUID, source) == (None, False)


def test_a_walk_longer_than_the_deadline_goes_on_in_the_background(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    """The deadline holds however large a search path is; the walk finishes elsewhere."""
    root = tmp_path / "Huge"
    for i in range(150):
        for j in range(100):
            (root / f"d{i}" / f"e{j}").mkdir(parents=True)
    shutil.copytree(FIXTURES / "hello.dSYM", root / "d149" / "e99" / "hello.dSYM")
    write_config(config_file, f"timeout = 0.05\nsearch_paths = {toml_list([root])}\n")

    started = time.monotonic()
    first = run_helper(HELLO_UUID)
    elapsed = time.monotonic() - started

    assert first.plist.get(HELLO_UUID) is None  # not walked in time: not found yet
    assert elapsed < 0.05 + 2.5  # the deadline plus process start-up, not the 15,000-folder walk
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = run_helper(HELLO_UUID).plist.get(HELLO_UUID)
        if answer is not None:
            break
        time.sleep(0.2)
    assert answer is not None and answer["DBGDSYMPath"].startswith(str(root))
