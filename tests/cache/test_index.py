"""`dsymfind index` on the real fixtures: folders linked in place, zips unpacked into the
cache, incremental re-runs, bad input, and the helper answering from the tree afterwards."""

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
    link_of,
    make_tree_link,
    snapshot,
    toml_list,
    write_config,
    zip_bundles,
)
from support.processes import run_cli, run_helper

from dsymfind.apple import bundle
from dsymfind.cache import entries
from dsymfind.main import main
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex


def index(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["index", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_folder_is_linked_in_place_and_the_helper_answers_from_the_tree(
    products: Path, cache_dir: Path
) -> None:
    before = snapshot(products)
    done = run_cli("index", str(products))
    assert done.returncode == 0, done.stderr
    assert "7 bundles and zips seen: 7 new or changed, 0 unchanged, 0 invalid" in done.stdout
    assert done.stderr == ""
    hello_dwarf = dwarf_of(products / "hello.dSYM")
    assert link_of(cache_dir, HELLO_UUID).resolve() == hello_dwarf.resolve()
    universal_dwarf = dwarf_of(products / "universal.dSYM").resolve()
    for uuid in UNIVERSAL_UUIDS.values():
        assert link_of(cache_dir, uuid).resolve() == universal_dwarf
    assert snapshot(products) == before  # nothing written into the user's folders
    assert not (cache_dir / "dsyms").exists()  # and nothing copied

    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert Path(answer["DBGDSYMPath"]).resolve() == hello_dwarf.resolve()


def test_a_first_index_looks_for_no_shadow_entry_the_cache_does_not_have(
    products: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    listed: list[str] = []
    real_listdir = os.listdir

    def listing(path: str = ".") -> list[str]:
        listed.append(os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listing)
    status, out, _ = index(str(products), capsys=capsys)
    monkeypatch.undo()
    assert status == 0 and "7 new or changed" in out
    # The cache's entries are listed once for the run; no failed open per bundle.
    dsyms = str(cache_dir / "dsyms")
    assert [p for p in listed if p.startswith(dsyms)] == [dsyms]


def test_a_first_index_stamps_each_dwarf_file_from_the_descriptor_it_was_read_through(
    products: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stat_by_path: list[str] = []
    real_stat = os.stat

    def stat(path: str, *args: object, **kwargs: object) -> os.stat_result:
        stat_by_path.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(os, "stat", stat)
        status, out, _ = index(str(products), capsys=capsys)
    assert status == 0 and "7 new or changed" in out
    # The listing says a file is regular; the open descriptor's fstat gives its stamp.
    dwarf_files = {str(dwarf_of(b)) for b in products.glob("*.dSYM")}
    assert dwarf_files and not dwarf_files.intersection(stat_by_path)
    assert "0 new or changed, 7 unchanged" in index(str(products), capsys=capsys)[1]


def test_a_first_index_compares_no_bundle_with_entries_it_cannot_have(
    products: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[str] = []
    real_entry_dir = entries.entry_dir

    def entry_dir(cache: CachePaths, uuid: str) -> str:
        asked.append(uuid)
        return real_entry_dir(cache, uuid)

    with monkeypatch.context() as patched:
        patched.setattr(entries, "entry_dir", entry_dir)
        status, out, _ = index(str(products), capsys=capsys)
    # No cache entry yet and no earlier record of any bundle: no shadow, no dropped UUID.
    assert status == 0 and "7 new or changed" in out
    assert asked == []


def test_unchanged_bundles_are_not_read_again_and_a_corrupt_one_is_reported(
    products: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert index(str(products), capsys=capsys)[0] == 0
    status, out, _ = index(str(products), capsys=capsys)
    assert status == 0
    assert "7 bundles and zips seen: 0 new or changed, 7 unchanged, 0 invalid" in out

    broken = dwarf_of(products / "libgreet.dylib.dSYM")
    broken.write_bytes(b"\xcf\xfa\xed\xfe" + b"\0" * 12)  # a Mach-O header cut short
    status, out, _ = index(str(products), capsys=capsys)
    assert status == 1
    assert "0 new or changed, 6 unchanged, 1 invalid" in out
    assert f"invalid: {broken}: " in out


def test_zip_of_dsyms_is_unpacked_into_the_cache_with_source_maps(
    products: Path, cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "deliveries").mkdir()
    delivery = zip_bundles(
        tmp_path / "deliveries" / "appDsyms.zip",
        [products / "universal.dSYM", products / "libgreet.dylib.dSYM"],
    )
    local = tmp_path / "src"
    local.mkdir()
    status, out, _ = index(str(delivery), "--source-map", f"/build/agent={local}", capsys=capsys)
    assert status == 0
    assert "1 bundles and zips seen: 1 new or changed" in out
    assert "3 UUIDs linked" in out
    entry = cache_dir / "dsyms" / uuid_hex(GREET_UUID) / "libgreet.dylib.dSYM"
    link = link_of(cache_dir, GREET_UUID)
    assert link.resolve() == dwarf_of(entry).resolve()
    values = plistlib.loads((entry / "Contents" / "Resources" / f"{GREET_UUID}.plist").read_bytes())
    assert values["DBGSourcePathRemapping"] == {"/build/agent": str(local)}
    assert values["DBGDSYMPath"] == str(dwarf_of(entry))

    answer = run_helper(GREET_UUID).entry(GREET_UUID)
    assert answer["DBGDSYMPath"] == str(dwarf_of(entry))
    assert (answer["DBGBuildSourcePath"], answer["DBGSourcePath"]) == ("/build/agent", str(local))

    again = ["--source-map", f"/build/agent={local}"]
    status, out, _ = index(str(tmp_path), *again, capsys=capsys)  # found by name while walking
    assert status == 0, out
    assert "1 unchanged" in out
    assert "conflict" not in out  # the cache's own bundles are not indexed as the user's


def test_source_map_for_a_user_bundle_goes_into_a_cache_shadow(
    products: Path, cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = products / "hello.dSYM"
    before = snapshot(bundle)
    status, _, _ = index(str(bundle), "--source-map", f"/b={tmp_path}", capsys=capsys)
    assert status == 0
    assert snapshot(bundle) == before
    shadow = cache_dir / "dsyms" / uuid_hex(HELLO_UUID) / "hello.dSYM"
    shadow_dwarf = shadow / "Contents" / "Resources" / "DWARF" / "hello"
    assert shadow_dwarf.is_symlink()
    assert shadow_dwarf.resolve() == dwarf_of(bundle).resolve()
    link = link_of(cache_dir, HELLO_UUID)
    assert os.path.normpath(link.parent / os.readlink(link)) == str(shadow_dwarf)
    values = plistlib.loads(
        (shadow / "Contents" / "Resources" / f"{HELLO_UUID}.plist").read_bytes()
    )
    assert values["DBGSourcePathRemapping"] == {"/b": str(tmp_path)}
    assert values["DBGDSYMPath"] == str(shadow_dwarf)
    # The helper answers through the shadow, with its remapping.
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGDSYMPath"] == str(shadow_dwarf)
    assert (answer["DBGBuildSourcePath"], answer["DBGSourcePath"]) == ("/b", str(tmp_path))


def test_existing_link_to_another_bundle_is_kept_and_reported(
    products: Path, cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    os.rename(products / "hello_arm64e.dSYM", other / "hello_arm64e.dSYM")
    first = dwarf_of(products / "hello.dSYM")
    make_tree_link(cache_dir / "uuids", HELLO_UUID, first)
    copy = other / "hello.dSYM"
    (products / "hello.dSYM").rename(copy)
    first.parent.mkdir(parents=True)
    first.write_bytes(dwarf_of(copy).read_bytes())  # the same UUID at the first place
    status, out, _ = index(str(other), capsys=capsys)
    assert status == 0
    assert f"conflict: {link_of(cache_dir, HELLO_UUID)} already points to " in out
    assert link_of(cache_dir, HELLO_UUID).resolve() == first.resolve()


def test_default_folders_are_xcode_archives_and_derived_data(
    products: Path, isolated_home: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = index(capsys=capsys)
    assert (status, out) == (
        0,
        "Nothing to index: no Xcode Archives, DerivedData or DeviceSupport folder and no "
        "simulator runtime here; name a PATH.\n",
    )
    archives = isolated_home / "Library" / "Developer" / "Xcode" / "Archives"
    dsyms = archives / "2024-05-01" / "App 5-1-24.xcarchive" / "dSYMs"
    dsyms.mkdir(parents=True)
    os.rename(products / "hello.dSYM", dsyms / "hello.dSYM")
    noindex = isolated_home / "Library/Developer/Xcode/DerivedData/App/Build/Intermediates.noindex"
    noindex.mkdir(parents=True)
    os.rename(products / "libgreet.dylib.dSYM", noindex / "libgreet.dylib.dSYM")
    status, out, _ = index(capsys=capsys)
    assert status == 0
    assert out.startswith(f"Indexed {archives}, {archives.parent / 'DerivedData'}\n")
    assert "1 bundles and zips seen: 1 new" in out
    assert link_of(cache_dir, HELLO_UUID).resolve() == dwarf_of(dsyms / "hello.dSYM").resolve()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/folder"], "/nonexistent/folder: no such file or folder"),
        (["{hello}"], "not a folder, a .dSYM bundle or a .zip file"),
        (["{products}", "--source-map", "nomap"], "--source-map: expected BUILD=LOCAL"),
    ],
)
def test_bad_arguments_are_one_line_errors(products: Path, args: list[str], message: str) -> None:
    words = [a.format(products=products, hello=products / "hello") for a in args]
    done = run_cli("index", *words)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("dsymfind: error: ") and message in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_bad_zip_is_reported_and_the_rest_indexed(
    products: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (products / "Build.dSYM.zip").write_bytes(b"PK\x03\x04 not really a zip")
    status, out, _ = index(str(products), capsys=capsys)
    assert status == 1
    assert f"invalid: {products / 'Build.dSYM.zip'}: " in out
    assert link_of(cache_dir, HELLO_UUID).exists()
    assert not list((cache_dir / "tmp").iterdir())  # staging cleaned up


NO_DSYMS = "no .dSYM bundle, and no zip of dSYMs"


def test_a_folder_with_no_dsyms_fails_as_publish_does(
    tmp_path: Path, products: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "Logs"
    logs.mkdir()
    (logs / "build.log").write_text("** BUILD SUCCEEDED **\n")
    shutil.copyfile(products / "hello", logs / "hello")  # a binary: no dSYM
    done = run_cli("index", str(logs))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"dsymfind: error: nothing to index under {logs}: {NO_DSYMS}\n"
    # One PATH with dSYMs is enough for a run that indexes something.
    status, out, _ = index(str(logs), str(products / "hello.dSYM"), capsys=capsys)
    assert status == 0 and "1 bundles and zips seen: 1 new" in out


def test_the_cache_reached_through_a_symlink_is_not_indexed(
    products: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("DSYMFIND_CACHE_DIR", str(tmp_path / "link" / "cache"))
    delivery = zip_bundles(tmp_path / "dSYMs.zip", [products / "hello.dSYM"])
    assert index(str(delivery), capsys=capsys)[0] == 0
    assert (tmp_path / "real" / "cache" / "dsyms" / uuid_hex(HELLO_UUID)).is_dir()
    for inside in (tmp_path / "real", tmp_path / "real" / "cache"):
        status, out, err = index(str(inside), capsys=capsys)
        assert (status, out) == (1, ""), out
        assert err == f"dsymfind: error: nothing to index under {inside}: {NO_DSYMS}\n"


def test_only_regular_files_are_dwarf_files_and_symlinks_only_when_asked(tmp_path: Path) -> None:
    dwarf_dir = tmp_path / "x.dSYM" / "Contents" / "Resources" / "DWARF"
    dwarf_dir.mkdir(parents=True)
    (dwarf_dir / "x").write_bytes(b"regular")
    (dwarf_dir / "folder").mkdir()
    (dwarf_dir / "to-file").symlink_to(dwarf_dir / "x")
    (dwarf_dir / "to-folder").symlink_to(dwarf_dir / "folder")
    (dwarf_dir / "to-nothing").symlink_to(tmp_path / "missing")
    bundle_dir = str(tmp_path / "x.dSYM")
    assert bundle.dwarf_files(bundle_dir) == [str(dwarf_dir / "x")]
    assert bundle.dwarf_files(bundle_dir, follow_symlinks=True) == [
        str(dwarf_dir / "to-file"),
        str(dwarf_dir / "x"),
    ]


def test_a_source_map_added_later_replaces_the_remembered_answer(
    products: Path, config_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(config_file, f"search_paths = {toml_list([products])}\n")
    before = run_helper(HELLO_UUID).entry(HELLO_UUID)  # remembered, without a remapping
    assert "DBGSourcePath" not in before
    status, _, _ = index(
        str(products / "hello.dSYM"), "--source-map", f"/b={tmp_path}", capsys=capsys
    )
    assert status == 0
    after = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert (after["DBGBuildSourcePath"], after["DBGSourcePath"]) == ("/b", str(tmp_path))


def test_a_source_map_the_cache_cannot_apply_is_a_conflict_and_is_tried_again(
    products: Path, cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, _ = index(
        str(zip_bundles(tmp_path / "dSYMs.zip", [products / "hello.dSYM"])), capsys=capsys
    )
    assert status == 0
    entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)
    plist = next(entry.glob(f"*.dSYM/Contents/Resources/{HELLO_UUID}.plist"))
    before = plist.read_bytes()
    maps = ["--source-map", f"/b={tmp_path}", str(products / "hello.dSYM")]

    status, out, _ = index(*maps, capsys=capsys)

    assert status == 0
    assert (
        f"conflict: {HELLO_UUID}: the cache already holds {entry} (a download); "
        "its source remapping was not applied" in out
    )
    assert "0 UUIDs linked" in out
    assert plist.read_bytes() == before  # the download stays as it was
    status, out, _ = index(*maps, capsys=capsys)
    assert "1 new or changed, 0 unchanged" in out  # not recorded as done: tried again
    assert "its source remapping was not applied" in out


def test_an_explicit_source_map_wins_over_the_bundles_own(
    products: Path, cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle_dir = products / "hello.dSYM"
    own = {"DBGBuildSourcePath": "/b", "DBGSourcePath": "/old/src", "DBGVersion": "3"}
    own_plist = bundle_dir / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    own_plist.write_bytes(plistlib.dumps(own))
    status, _, _ = index(str(bundle_dir), "--source-map", f"/b={tmp_path}", capsys=capsys)
    assert status == 0
    shadow = cache_dir / "dsyms" / uuid_hex(HELLO_UUID) / "hello.dSYM"
    values = plistlib.loads((shadow / own_plist.relative_to(bundle_dir)).read_bytes())
    assert (values["DBGBuildSourcePath"], values["DBGSourcePath"]) == ("/b", str(tmp_path))
    assert values["DBGSourcePathRemapping"] == {"/b": str(tmp_path)}
    assert values["DBGDSYMPath"] == str(dwarf_of(shadow))
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGSourcePath"] == str(tmp_path)


def test_a_zip_indexed_again_with_a_source_map_says_it_was_not_applied(
    products: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery = str(zip_bundles(tmp_path / "dSYMs.zip", [products / "hello.dSYM"]))
    assert index(delivery, capsys=capsys)[0] == 0
    status, out, _ = index(delivery, "--source-map", f"/b={tmp_path}", capsys=capsys)
    assert status == 0
    assert f"conflict: {HELLO_UUID}: the cache already holds " in out
    assert "its source remapping was not applied" in out
    assert "1 new or changed" in index(delivery, "--source-map", f"/b={tmp_path}", capsys=capsys)[1]


def test_a_bundles_plist_naming_the_build_machines_executable_is_not_carried_over(
    products: Path, cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own_plist = products / "hello.dSYM" / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    own_plist.write_bytes(plistlib.dumps({"DBGSymbolRichExecutable": "/Users/ci/build/hello"}))
    delivery = zip_bundles(tmp_path / "dSYMs.zip", [products / "hello.dSYM"])
    assert index(str(delivery), capsys=capsys)[0] == 0
    entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID) / "hello.dSYM"
    values = plistlib.loads((entry / own_plist.relative_to(products / "hello.dSYM")).read_bytes())
    assert "DBGSymbolRichExecutable" not in values  # DebugSymbols would read a missing path
    assert run_cli("check").returncode == 0
