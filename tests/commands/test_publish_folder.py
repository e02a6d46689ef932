"""`dsymfind publish --to DIR`: real fixtures, the real CLI as a process, a real folder store,
served by the loopback symbol server and fetched by the helper."""

from __future__ import annotations

import contextlib
import json
import os
import plistlib
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    PE_FIXTURES,
    UNIVERSAL_UUIDS,
    dwarf_of,
    write_config,
    zip_bundles,
)
from support.plists import POISONS
from support.processes import BIN, run_cli, run_helper

from dsymfind import main as cli
from dsymfind.apple import macho
from dsymfind.publish import keys
from dsymfind.stores import builds, layouts

PE_IDS = json.loads((PE_FIXTURES / "identities.json").read_text())
ALL_DSYM_UUIDS = [HELLO_UUID, GREET_UUID, *UNIVERSAL_UUIDS.values()]
FILE_OF = {
    HELLO_UUID: "hello.dSYM",
    GREET_UUID: "libgreet.dylib.dSYM",
    **{u: "universal.dSYM" for u in UNIVERSAL_UUIDS.values()},
}
ARCH_OF = {HELLO_UUID: "arm64", GREET_UUID: "arm64", **{u: a for a, u in UNIVERSAL_UUIDS.items()}}


def unified(uuid: str, what: str = "debuginfo") -> str:
    hex_digits = uuid.replace("-", "").lower()
    return f"{hex_digits[:2]}/{hex_digits[2:]}/{what}"


def publish(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("publish", *map(str, args))


def dsym_lines(outcome: str, uuids: list[str] = ALL_DSYM_UUIDS) -> list[str]:
    """The lines a publish of the fixtures' dSYMs prints for `uuids`: the bundle, the UUID
    and the architecture, then what became of it."""
    return sorted(f"{FILE_OF[u]} {u} {ARCH_OF[u]}: {outcome}" for u in uuids)


def file_lines(stdout: str) -> list[str]:
    """The lines of a run's output that name a file (not the build record, nor the summary)."""
    return sorted(
        line
        for line in stdout.splitlines()
        if not line.startswith(
            ("build record ", "would write build record ", "summary: ", "  ", "skipped ")
        )
    )


def store_files(store: Path, *, metadata: bool = False) -> dict[str, bytes]:
    """Every file of the store but its own records (build records, claims, refs) and, unless
    asked for, the metadata that names the files, by key."""
    return {
        key: p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file()
        and not (key := p.relative_to(store).as_posix()).startswith(builds.BOOKKEEPING)
        and (metadata or not is_metadata(key))
    }


def is_metadata(key: str) -> bool:
    return key.endswith(("/meta", ".meta"))


def build_records(store: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((store / "_builds").glob("*.json"))]


@pytest.fixture
def bundles(tmp_path: Path) -> Path:
    """hello, libgreet and universal dSYMs, copied, in a build folder with Xcode clutter."""
    build = tmp_path / "build"
    for name in ("hello.dSYM", "libgreet.dylib.dSYM", "universal.dSYM"):
        shutil.copytree(FIXTURES / name, build / "Products" / name)
    # Xcode's intermediates: never walked.
    shutil.copytree(FIXTURES / "hello_arm64e.dSYM", build / "Index.noindex" / "x.dSYM")
    return build


def test_bundles_publish_one_thin_object_per_uuid(bundles: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = publish("--to", store, bundles)
    assert done.returncode == 0, done.stderr
    files = store_files(store)
    assert sorted(files) == sorted(unified(u) for u in ALL_DSYM_UUIDS)
    assert file_lines(done.stdout) == dsym_lines("published")
    assert files[unified(HELLO_UUID)] == dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
    # The universal file became one complete thin Mach-O per slice, each its own UUID.
    for arch, uuid in UNIVERSAL_UUIDS.items():
        (thin,) = macho.read_slices(store / unified(uuid))
        assert (thin.uuid, thin.arch, thin.filetype_name, thin.offset) == (
            uuid,
            arch,
            "MH_DSYM",
            0,
        )
    # Readable by a static server: files 0644, folders 0755, whatever the umask.
    for path in store.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), path
    assert not list(store.rglob("*.tmp"))


def test_every_requested_layout_and_the_plist_beside_the_dwarf_file(tmp_path: Path) -> None:
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "hello.dSYM")
    plist = bundle / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    plist.write_bytes(
        b'<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict>'
        b"<key>DBGBuildSourcePath</key><string>/ci/src</string></dict></plist>\n"
    )
    store = tmp_path / "store"
    done = publish("--to", store, "--layout", "native", "--layout", "symstore", bundle)
    assert done.returncode == 0, done.stderr
    native = layouts.debug_file_key("native", HELLO_UUID)
    symstore = layouts.debug_file_key("symstore", HELLO_UUID)
    assert sorted(store_files(store)) == sorted(
        [native, native + ".plist", symstore, symstore + ".plist"]
    )
    assert (store / (native + ".plist")).read_bytes() == plist.read_bytes()


def test_a_zip_of_dsyms(tmp_path: Path) -> None:
    archive = zip_bundles(
        tmp_path / "appDsyms.zip", [FIXTURES / "hello.dSYM", FIXTURES / "universal.dSYM"]
    )
    store = tmp_path / "store"
    done = publish("--to", store, archive)
    assert done.returncode == 0, done.stderr
    expected = [HELLO_UUID, *UNIVERSAL_UUIDS.values()]
    assert sorted(store_files(store)) == sorted(unified(u) for u in expected)


def make_xcarchive(tmp_path: Path) -> Path:
    archive = tmp_path / "Hello.xcarchive"
    shutil.copytree(FIXTURES / "hello.dSYM", archive / "dSYMs" / "hello.dSYM")
    shutil.copytree(FIXTURES / "universal.dSYM", archive / "dSYMs" / "universal.dSYM")
    app = archive / "Products" / "Applications" / "Hello.app" / "Contents" / "MacOS"
    app.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "hello", app / "hello")
    shutil.copyfile(FIXTURES / "universal", app / "universal")
    (app.parent / "Info.plist").write_text("<plist/>")  # not a binary: ignored
    return archive


def test_an_xcarchive_with_its_executables(tmp_path: Path) -> None:
    archive = make_xcarchive(tmp_path)
    store = tmp_path / "store"
    done = publish("--to", store, "--executables", archive)
    assert done.returncode == 0, done.stderr
    dsym_uuids = [HELLO_UUID, *UNIVERSAL_UUIDS.values()]
    executable_uuids = [u["uuid"] for u in macho_uuids("hello") + macho_uuids("universal")]
    expected = [unified(u) for u in dsym_uuids] + [
        unified(u, "executable") for u in executable_uuids
    ]
    assert sorted(store_files(store)) == sorted(expected)
    for uuid in executable_uuids:
        (thin,) = macho.read_slices(store / unified(uuid, "executable"))
        assert thin.uuid == uuid and thin.filetype_name == "MH_EXECUTE"

    plain = tmp_path / "plain"
    assert publish("--to", plain, archive).returncode == 0
    assert sorted(store_files(plain)) == sorted(unified(u) for u in dsym_uuids)


def macho_uuids(name: str) -> list[dict[str, str]]:
    uuids = json.loads((FIXTURES / "uuids.json").read_text())[name]["uuids"]
    assert isinstance(uuids, list)
    return uuids


def test_pe_and_pdb_under_symstore_keys(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = publish("--to", store, PE_FIXTURES / "hello64.exe", PE_FIXTURES / "hello64.pdb")
    assert done.returncode == 0, done.stderr
    exe, pdb = PE_IDS["hello64.exe"], PE_IDS["hello64.pdb"]
    exe_key = f"hello64.exe/{exe['timestamp']:08X}{exe['size_of_image']:X}/hello64.exe"
    pdb_key = f"hello64.pdb/{pdb['guid'].replace('-', '')}{pdb['age']:X}/hello64.pdb"
    files = store_files(store)
    assert sorted(files) == sorted([exe_key, pdb_key])
    assert files[pdb_key] == (PE_FIXTURES / "hello64.pdb").read_bytes()  # uncompressed


def test_republishing_rewrites_no_object_only_adds_its_build_record(
    bundles: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    assert publish("--to", store, bundles).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()}
    again = publish("--to", store, "--json", bundles)
    assert again.returncode == 0, again.stderr
    records = json.loads(again.stdout)
    assert {r["state"] for r in records} == {"exists"}
    assert sorted(r["key"] for r in records) == sorted(store_files(store, metadata=True))
    after = {p: p.stat().st_mtime_ns for p in before}
    assert after == before
    # Only the run's own build record and what it stands on are new.
    new = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()} - {
        p.relative_to(store).as_posix() for p in before
    }
    assert new and all(key.startswith(builds.BOOKKEEPING) for key in new)
    assert len(build_records(store)) == 2


def test_a_conflicting_object_is_left_alone(bundles: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    taken = store / unified(HELLO_UUID)
    taken.parent.mkdir(parents=True)
    taken.write_bytes(b"someone else's build")
    done = publish("--to", store, bundles)
    assert done.returncode == 1
    assert f"hello.dSYM {HELLO_UUID} arm64: conflict: {taken} holds other bytes" in done.stdout
    assert "left alone" in done.stdout
    assert taken.read_bytes() == b"someone else's build"
    assert f"libgreet.dylib.dSYM {GREET_UUID} arm64: published\n" in done.stdout  # others go


def test_a_truncated_input_is_refused_and_nothing_of_it_written(
    bundles: Path, tmp_path: Path
) -> None:
    dwarf = dwarf_of(bundles / "Products" / "hello.dSYM")
    dwarf.write_bytes(dwarf.read_bytes()[:4096])
    foreign = tmp_path / "notes.pdb"
    foreign.write_bytes(b"Microsoft C/C++ program database 2.00\r\n\x1aJG\0\0" + b"\0" * 64)
    store = tmp_path / "store"
    done = publish("--to", store, bundles, foreign)
    assert done.returncode == 1
    refused = [line for line in done.stderr.splitlines() if line.startswith("dsymfind: refused ")]
    assert len(refused) == 2, done.stderr
    assert "hello.dSYM/Contents/Resources/DWARF/hello: truncated or malformed" in refused[0]
    assert str(foreign) in refused[1]
    files = store_files(store)
    assert unified(HELLO_UUID) not in files
    assert sorted(files) == sorted(unified(u) for u in ALL_DSYM_UUIDS if u != HELLO_UUID)


@pytest.mark.parametrize("poison", ["date", "stray-key", "wide-integer", "binary-cut"])
def test_an_unreadable_per_uuid_plist_refuses_its_bundle_with_the_reason(
    poison: str, bundles: Path, tmp_path: Path
) -> None:
    """lldb would choke on it: that bundle is refused with one line saying why, whatever
    plistlib raised on it, and every other input is still published."""
    plist = bundles / "Products" / "hello.dSYM" / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    plist.write_bytes(POISONS[poison])
    store = tmp_path / "store"

    done = publish("--to", store, bundles)

    assert done.returncode == 1
    refused = [line for line in done.stderr.splitlines() if line.startswith("dsymfind: refused ")]
    assert len(refused) == 1, done.stderr
    assert f"Contents/Resources/{HELLO_UUID}.plist: unreadable plist: " in refused[0]
    assert "internal error" not in done.stderr
    files = store_files(store)
    assert sorted(files) == sorted(unified(u) for u in ALL_DSYM_UUIDS if u != HELLO_UUID)


def test_a_dry_run_writes_nothing(bundles: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = publish("--to", store, "--dry-run", bundles)
    assert done.returncode == 0, done.stderr
    assert file_lines(done.stdout) == dsym_lines("would publish")
    assert store_files(store) == {}
    assert not (store / "_builds").exists()
    assert "would write build record _builds/" in done.stdout


def test_the_build_record_lists_every_key_and_the_commit(tmp_path: Path) -> None:
    store = tmp_path / "store"
    bundle = FIXTURES / "hello.dSYM"  # inside this repository: its commit is known
    done = publish("--to", store, bundle, PE_FIXTURES / "hello64.pdb")
    assert done.returncode == 0, done.stderr
    (document,) = build_records(store)
    assert document["host"]
    head = subprocess.run(
        ["git", "-C", str(FIXTURES), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    commit = head.stdout.strip() if head.returncode == 0 else None
    assert [i["git_commit"] for i in document["inputs"]] == [commit, commit]
    objects = document["objects"]
    assert {o["key"] for o in objects} == set(store_files(store, metadata=True))
    for entry in objects:
        data = (store / entry["key"]).read_bytes()
        assert entry["size"] == len(data) and entry["state"] == "published"
    assert "build record _builds/" in done.stdout


def test_four_concurrent_publishers_make_one_object_per_key(bundles: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    runs = [
        subprocess.Popen(
            [
                str(BIN / "dsymfind"),
                "publish",
                "--verbose",
                "--to",
                str(store),
                "--layout",
                "unified",
                "--layout",
                "native",
                str(bundles),
                str(PE_FIXTURES / "hello64.pdb"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    assert [code for code, _, _ in results] == [0] * 4, results
    keys = [unified(u) for u in ALL_DSYM_UUIDS] + [
        layouts.debug_file_key("native", u) for u in ALL_DSYM_UUIDS
    ]
    files = store_files(store)
    assert len(files) == len(keys) + 1 and set(keys) <= set(files)
    # Each key was published exactly once across the four runs, and exists for the rest.
    for key in keys:
        assert sum(f"  published {key}\n" in out for _, out, _ in results) == 1
        assert sum(f"  exists {key}\n" in out for _, out, _ in results) == 3
    assert not [p for p in store.rglob("*") if p.name.endswith(".tmp")]


@contextlib.contextmanager
def served_to_the_helper(store: Path, config_file: Path) -> Iterator[ss.SymbolServer]:
    """The published folder behind a static server, the helper's only (unified) server."""
    with ss.SymbolServer(store) as server:
        write_config(
            config_file,
            f"timeout = 30\n[[servers]]\nurl = '{server.url}/'\nlayout = 'unified'\n",
        )
        yield server


def test_the_served_store_is_fetched_by_the_helper(
    bundles: Path, tmp_path: Path, config_file: Path
) -> None:
    store = tmp_path / "store"
    assert publish("--to", store, bundles).returncode == 0
    with served_to_the_helper(store, config_file) as server:
        for uuid in (HELLO_UUID, UNIVERSAL_UUIDS["arm64"]):
            run = run_helper(uuid)
            dsym_path = Path(run.entry(uuid)["DBGDSYMPath"])
            assert dsym_path.read_bytes() == (store / unified(uuid)).read_bytes()
            assert server.count("/" + unified(uuid)) >= 1


def test_the_per_uuid_plist_travels_with_its_dwarf_file(tmp_path: Path, config_file: Path) -> None:
    """CI's source mapping reaches the developer's answer: publish puts the bundle's per-UUID
    plist beside its DWARF file, and the downloader keeps its source keys (only those)."""
    source = tmp_path / "checkout"
    source.mkdir()
    bundle = tmp_path / "in" / "hello.dSYM"
    shutil.copytree(FIXTURES / "hello.dSYM", bundle)
    values = {
        "DBGBuildSourcePath": "/ci/build/src",
        "DBGSourcePath": str(source),
        "DBGSymbolRichExecutable": "/ci/build/hello",  # the build machine's: left out
    }
    plist = bundle / "Contents" / "Resources" / f"{HELLO_UUID}.plist"
    plist.write_bytes(plistlib.dumps(values))
    store = tmp_path / "store"
    assert publish("--to", store, bundle).returncode == 0
    with served_to_the_helper(store, config_file):
        answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGBuildSourcePath"] == "/ci/build/src"
    assert answer["DBGSourcePath"] == str(source)
    assert "DBGSymbolRichExecutable" not in answer


def test_bad_destinations_are_one_error_line(tmp_path: Path) -> None:
    done = publish("--to", "nosuchserver", FIXTURES / "hello.dSYM")
    assert done.returncode == 1
    assert done.stderr.startswith("dsymfind: error: --to nosuchserver: no server of that name")
    assert done.stderr.count("\n") == 1
    bad_layout = publish("--to", tmp_path / "s", "--layout", "template", FIXTURES / "hello.dSYM")
    assert bad_layout.returncode == 1 and "cannot publish in it" in bad_layout.stderr


def test_a_configured_folder_server_gives_its_layout(tmp_path: Path, config_file: Path) -> None:
    store = tmp_path / "served"
    write_config(
        config_file,
        f"[[servers]]\nname = 'team'\nurl = 'file://{store}'\nlayout = 'symstore'\n",
    )
    done = publish("--to", "team", FIXTURES / "hello.dSYM")
    assert done.returncode == 0, done.stderr
    assert sorted(store_files(store)) == [layouts.debug_file_key("symstore", HELLO_UUID)]


def test_a_store_inside_the_input_folder_is_not_an_input(bundles: Path) -> None:
    store = bundles / "symbols"
    assert publish("--to", store, bundles).returncode == 0
    again = publish("--to", store, "--json", bundles)
    assert again.returncode == 0, again.stderr
    records = json.loads(again.stdout)
    keys = [r["key"] for r in records if not is_metadata(r["key"])]
    assert sorted(keys) == sorted(unified(u) for u in ALL_DSYM_UUIDS)
    assert all(r["file"].startswith(str(bundles / "Products")) for r in records)


def xcode_build_folder(tmp_path: Path) -> Path:
    """What `xcodebuild` leaves in build/: the app with its executable, a framework's dylib
    and resources, the dSYMs beside it, a Swift module and logs."""
    build = tmp_path / "build"
    release = build / "Release"
    contents = release / "MyApp.app" / "Contents"
    (contents / "MacOS").mkdir(parents=True)
    shutil.copyfile(FIXTURES / "hello", contents / "MacOS" / "MyApp")
    framework = contents / "Frameworks" / "Greet.framework" / "Versions" / "A"
    framework.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "libgreet.dylib", framework / "Greet")
    (framework.parent / "Current").symlink_to("A")
    (contents / "Info.plist").write_text("<plist><dict/></plist>\n")
    (contents / "Resources").mkdir()
    (contents / "Resources" / "MainMenu.nib").write_bytes(b"NIBArchive\0\0")
    shutil.copytree(FIXTURES / "hello.dSYM", release / "MyApp.app.dSYM")
    shutil.copytree(FIXTURES / "libgreet.dylib.dSYM", release / "Greet.framework.dSYM")
    module = release / "MyApp.swiftmodule"
    module.mkdir()
    (module / "arm64-apple-macos.swiftmodule").write_bytes(b"\xe2\x9c\xa8ROTM" + b"\0" * 64)
    (module / "arm64-apple-macos.swiftdoc").write_bytes(b"\xe2\x9c\xa8DOC" + b"\0" * 32)
    (build / "Logs").mkdir()
    (build / "Logs" / "build.log").write_text("** BUILD SUCCEEDED **\n")
    return build


def test_an_xcode_build_folder_publishes_its_dsyms_and_skips_the_rest(tmp_path: Path) -> None:
    build = xcode_build_folder(tmp_path)
    store = tmp_path / "store"
    done = publish("--to", store, build)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert sorted(store_files(store)) == sorted(unified(u) for u in (HELLO_UUID, GREET_UUID))
    # Two dSYMs; skipped: the app's executable, the framework's dylib and symlink, the
    # plist, the nib, the Swift module's two files and the log.
    assert done.stdout.splitlines()[-1] == (
        "summary: 2 published, 0 exists, 8 skipped, 0 refused, 0 conflicts"
    )
    listed = json.loads(publish("--to", store, "--json", build).stdout)
    skipped = {r["file"]: r["message"] for r in listed if r["state"] == "skipped"}
    executable = str(build / "Release" / "MyApp.app" / "Contents" / "MacOS" / "MyApp")
    assert "MH_EXECUTE" in skipped[executable] and "--executables" in skipped[executable]
    assert str(build / "Logs" / "build.log") in skipped
    assert {r["state"] for r in listed} == {"exists", "skipped"}


def test_lines_name_the_file_and_verbose_adds_the_keys_and_the_skipped_files(
    tmp_path: Path,
) -> None:
    build = xcode_build_folder(tmp_path)
    store = tmp_path / "store"
    plain = publish("--to", store, build)
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert sorted(lines[:2]) == [
        f"Greet.framework.dSYM {GREET_UUID} arm64: published",
        f"MyApp.app.dSYM {HELLO_UUID} arm64: published",
    ]
    assert lines[2].startswith("build record _builds/") and lines[3].startswith("summary: ")
    assert "debuginfo" not in plain.stdout and "skipped " not in plain.stdout

    verbose = publish("--to", tmp_path / "other", "--verbose", build)
    assert verbose.returncode == 0, verbose.stderr
    lines = verbose.stdout.splitlines()
    skipped = [line for line in lines if line.startswith("skipped ")]
    release = build / "Release"
    assert len(skipped) == 8
    assert f"skipped {build / 'Logs' / 'build.log'}: not a dSYM, zip, Mach-O, PE or PDB file" in (
        skipped
    )
    executable = release / "MyApp.app" / "Contents" / "MacOS" / "MyApp"
    assert any(
        line.startswith(f"skipped {executable}: no dSYM slice") and "--executables" in line
        for line in skipped
    )
    hello = lines.index(f"MyApp.app.dSYM {HELLO_UUID} arm64: published")
    assert lines[hello + 1 : hello + 3] == [
        f"  published {unified(HELLO_UUID)}",
        f"  published {unified(HELLO_UUID, 'meta')}",
    ]

    listed = json.loads(publish("--to", store, "--json", build).stdout)
    (record,) = [r for r in listed if r["key"] == unified(HELLO_UUID)]
    assert record["state"] == "exists"
    assert (record["name"], record["uuid"], record["arch"]) == (
        "MyApp.app.dSYM",
        HELLO_UUID,
        "arm64",
    )
    assert record["file"] == str(
        release / "MyApp.app.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    )


def test_an_xcode_build_folder_with_executables(tmp_path: Path) -> None:
    build = xcode_build_folder(tmp_path)
    store = tmp_path / "store"
    done = publish("--to", store, "--executables", build)
    assert done.returncode == 0, done.stderr
    uuids = (HELLO_UUID, GREET_UUID)
    expected = [unified(u) for u in uuids] + [unified(u, "executable") for u in uuids]
    assert sorted(store_files(store)) == sorted(expected)
    executable = store / unified(HELLO_UUID, "executable")
    assert executable.read_bytes() == (FIXTURES / "hello").read_bytes()
    # A unified folder's one meta serves its debuginfo and executable: written once, for
    # both, and never this run's own "other metadata".
    assert file_lines(done.stdout) == sorted(
        [
            f"MyApp.app.dSYM {HELLO_UUID} arm64: published",
            f"Greet.framework.dSYM {GREET_UUID} arm64: published",
            f"MyApp {HELLO_UUID} arm64: published",
            f"Greet {GREET_UUID} arm64: published",
        ]
    )
    assert "summary: 4 published, 0 exists, 6 skipped, 0 refused, 0 conflicts" in done.stdout
    assert "other metadata" not in done.stdout
    described = json.loads((store / unified(HELLO_UUID, "meta")).read_text())
    assert described["name"] == "MyApp" and described["bundle"] == "MyApp.app.dSYM"
    listed = json.loads(publish("--to", store, "--executables", "--json", build).stdout)
    assert {r["state"] for r in listed if r["key"]} == {"exists"}
    assert "other metadata" not in json.dumps(listed)


def test_a_published_executable_and_dsym_are_fetched_under_their_names(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    build = xcode_build_folder(tmp_path)
    store = tmp_path / "store"
    assert publish("--to", store, "--executables", build).returncode == 0
    with served_to_the_helper(store, config_file):
        done = run_cli("fetch", "--executables", "--json", HELLO_UUID)
    assert done.returncode == 0, done.stdout + done.stderr
    (found,) = json.loads(done.stdout)
    hex_name = HELLO_UUID.replace("-", "")
    assert found["path"].endswith(f"/{hex_name}/MyApp.app.dSYM/Contents/Resources/DWARF/MyApp")
    assert [p.name for p in (cache_dir / "executables" / hex_name).iterdir()] == ["MyApp"]


def test_a_binary_named_on_the_command_line_is_still_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = publish("--to", store, FIXTURES / "hello", FIXTURES / "hello.dSYM")
    assert done.returncode == 1
    assert f"dsymfind: refused {FIXTURES / 'hello'}: no dSYM slice" in done.stderr
    assert "--executables publishes binaries" in done.stderr
    assert "summary: 1 published, 0 exists, 0 skipped, 1 refused, 0 conflicts" in done.stdout


def test_a_folder_with_nothing_to_publish_fails(tmp_path: Path) -> None:
    logs = tmp_path / "Logs"
    logs.mkdir()
    (logs / "build.log").write_text("** BUILD SUCCEEDED **\n")
    shutil.copyfile(FIXTURES / "hello", logs / "hello")
    store = tmp_path / "store"
    done = publish("--to", store, logs)
    assert done.returncode == 1
    assert done.stderr == (
        f"dsymfind: error: nothing to publish under {logs} (2 files skipped, none a dSYM, "
        "PE or PDB file; --executables publishes binaries)\n"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = publish("--to", store, "--json", empty)
    assert nothing.returncode == 1
    assert nothing.stderr == f"dsymfind: error: nothing to publish under {empty}\n"
    assert store_files(store) == {}


def cut_after_verification(monkeypatch: pytest.MonkeyPatch, victim: Path) -> None:
    """Cut `victim` in half once every input is verified, before anything is written: a
    build still writing, or a copy interrupted, while publish runs."""
    real = keys.plan

    def plan(*args: Any, **kwargs: Any) -> list[keys.Planned]:
        data = victim.read_bytes()
        victim.write_bytes(data[: len(data) // 2])
        return real(*args, **kwargs)

    monkeypatch.setattr(keys, "plan", plan)


def test_a_file_cut_after_verification_is_not_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "in" / "hello.dSYM")
    good = dwarf_of(bundle).read_bytes()
    store = tmp_path / "store"
    cut_after_verification(monkeypatch, dwarf_of(bundle))
    assert cli.main(["publish", "--to", str(store), str(bundle)]) == 1
    out = capsys.readouterr().out
    assert f"hello.dSYM {HELLO_UUID} arm64: failed: " in out and "not published" in out
    assert store_files(store) == {}
    assert not list(store.rglob("*.tmp"))
    # The good build, published again, is not a conflict.
    monkeypatch.undo()
    dwarf_of(bundle).write_bytes(good)
    assert cli.main(["publish", "--to", str(store), str(bundle)]) == 0
    assert store_files(store) == {unified(HELLO_UUID): good}


NOBODY = 65534  # "another user": the suite runs as root, which counts as trusted


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("planted", ["their symlink", "their open folder above", "their store"])
def test_a_store_another_user_could_redirect_or_write_is_refused(
    tmp_path: Path, planted: str
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    theirs.chmod(0o777)
    os.chown(theirs, NOBODY, -1)
    if planted == "their symlink":
        shared = tmp_path / "shared"  # sticky, like /tmp: every folder on the way is fine
        shared.mkdir()
        shared.chmod(0o1777)
        store = shared / "store"
        store.symlink_to(mine)
        os.chown(store, NOBODY, -1, follow_symlinks=False)
        named = f"{store}, a symlink on the way to it, belongs to another user (uid {NOBODY})"
    elif planted == "their open folder above":
        store = theirs / "store"
        named = f"{theirs}, which holds it, is writable by other users (mode 777)"
    else:
        store = theirs
        named = f"{theirs} belongs to another user (uid {NOBODY})"

    done = publish("--to", store, FIXTURES / "hello.dSYM")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert f"dsymfind: error: refusing to publish to {store}: {named}" in done.stderr
    assert list(mine.iterdir()) == [] and list(theirs.iterdir()) == []
