"""The UUID tree's writer: each folder made or checked once per run (siblings share their
levels), a new link made in one call under its final name, and a symlink planted in place
of a shared level refused for every UUID below it."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsymfind.cache import tree
from dsymfind.errors import DsymfindError
from dsymfind.main import main
from dsymfind.uuids import tree_entry

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
import bench_fixtures  # the bench's tree of generated bundles

# bench_uuid(305) and bench_uuid(413) share their first folder level, 5A37: the first
# pair of the bench's UUIDs to do so.
SIBLINGS = (305, 413)
BUNDLES = SIBLINGS[1] + 1


@pytest.fixture(scope="module")
def bundle_tree(tmp_path_factory: pytest.TempPathFactory) -> bench_fixtures.BundleTree:
    tree = bench_fixtures.BundleTree(tmp_path_factory.mktemp("bundles") / "tree", BUNDLES)
    tree.build()
    return tree


def counting(calls: Counter[str], name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        paths = " ".join(os.fspath(a) for a in args if isinstance(a, (str, os.PathLike)))
        calls[f"{name} {paths}"] += 1
        return real(*args, **kwargs)

    return call


def test_a_cold_index_makes_each_folder_once_and_each_link_in_one_call(
    bundle_tree: bench_fixtures.BundleTree,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: Counter[str] = Counter()
    for name in ("mkdir", "lstat", "symlink", "rename", "replace"):
        monkeypatch.setattr(os, name, counting(calls, name, getattr(os, name)))
    assert main(["index", str(bundle_tree.root)]) == 0
    monkeypatch.undo()
    assert f"{BUNDLES} UUIDs linked" in capsys.readouterr().out

    uuids = str(cache_dir / "uuids")
    entries = [tree_entry(uuids, bench_fixtures.bench_uuid(n)) for n in range(BUNDLES)]
    folders = {f for e in entries for f in _levels(uuids, os.path.dirname(e))}
    below = uuids + os.sep
    in_tree = Counter(c.split()[0] for c, n in calls.items() for _ in range(n) if below in c)
    assert in_tree["mkdir"] == len(folders)  # each folder once, none tried twice
    # A new folder costs its mkdir alone: only one found there already is lstat'ed.
    assert in_tree["lstat"] == 0
    assert in_tree["symlink"] == BUNDLES and in_tree["rename"] + in_tree["replace"] == 0
    # A new bundle's DWARF file needs no realpath: nothing of the user's is lstat'ed.
    assert not [c for c in calls if c.startswith("lstat") and str(bundle_tree.root) in c]
    for number, entry in enumerate(entries):
        assert os.path.realpath(entry) == str(bundle_tree.dwarf(number).resolve())


def test_a_links_text_is_what_relpath_says_without_a_relpath_per_link(
    bundle_tree: bench_fixtures.BundleTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    up = (os.pardir + os.sep) * 5
    targets = [str(bundle_tree.dwarf(0)), "/", str(tmp_path / "uuids"), "rel/../x/./dwarf"]
    uuids = [bench_fixtures.bench_uuid(n) for n in range(len(targets))]
    expected = [up + os.path.relpath(t, "uuids") for t in targets]
    calls: Counter[str] = Counter()
    monkeypatch.setattr(os.path, "relpath", counting(calls, "relpath", os.path.relpath))
    writer = tree.TreeWriter("uuids")  # relative, as a cache_dir given so would be
    entries = [writer.link(u, t) for u, t in zip(uuids, targets, strict=True)]
    assert not calls  # the root's half is worked out once per writer
    assert [os.readlink(e) for e in entries] == expected


def test_a_symlink_planted_in_a_shared_level_is_refused_for_every_sibling(
    bundle_tree: bench_fixtures.BundleTree, tmp_path: Path
) -> None:
    uuids = tmp_path / "uuids"
    uuids.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first, second = (bench_fixtures.bench_uuid(n) for n in SIBLINGS)
    (uuids / first[:4]).symlink_to(elsewhere)
    writer = tree.TreeWriter(str(uuids))
    for number, uuid in zip(SIBLINGS, (first, second), strict=True):
        with pytest.raises(DsymfindError, match="is a symlink where the UUID tree keeps a folder"):
            writer.link(uuid, str(bundle_tree.dwarf(number)))
    assert list(elsewhere.iterdir()) == []  # nothing made through it, for either sibling


def test_a_symlink_planted_below_existing_levels_is_refused_and_nothing_made_through_it(
    bundle_tree: bench_fixtures.BundleTree, tmp_path: Path
) -> None:
    uuids, elsewhere = tmp_path / "uuids", tmp_path / "elsewhere"
    elsewhere.mkdir()
    uuid = bench_fixtures.bench_uuid(0)
    levels = Path(os.path.dirname(tree_entry(str(uuids), uuid)))
    planted = uuids / levels.relative_to(uuids).parts[0] / levels.relative_to(uuids).parts[1]
    planted.parent.mkdir(parents=True)  # the levels above it are real folders, there already
    planted.symlink_to(elsewhere)
    with pytest.raises(DsymfindError, match="is a symlink where the UUID tree keeps a folder"):
        tree.TreeWriter(str(uuids)).link(uuid, str(bundle_tree.dwarf(0)))
    assert list(elsewhere.iterdir()) == []


def test_an_existing_link_is_kept_replaced_only_when_dangling_or_refused_as_a_conflict(
    bundle_tree: bench_fixtures.BundleTree, tmp_path: Path
) -> None:
    uuids = str(tmp_path / "uuids")
    uuid = bench_fixtures.bench_uuid(0)
    mine, other = (str(bundle_tree.dwarf(n)) for n in (0, 1))
    entry = tree.TreeWriter(uuids).link(uuid, mine)
    assert tree.TreeWriter(uuids).link(uuid, mine) == entry  # says the same: kept
    with pytest.raises(tree.LinkConflict):
        tree.TreeWriter(uuids).link(uuid, other)
    os.unlink(entry)
    os.symlink("gone", entry)
    tree.TreeWriter(uuids).link(uuid, mine)  # a dangling link is replaced
    assert os.path.realpath(entry) == os.path.realpath(mine)
    assert sorted(os.listdir(os.path.dirname(entry))) == [os.path.basename(entry)]


def _levels(root: str, folder: str) -> list[str]:
    parts = os.path.relpath(folder, root).split(os.sep)
    return [os.path.join(root, *parts[: i + 1]) for i in range(len(parts))]
