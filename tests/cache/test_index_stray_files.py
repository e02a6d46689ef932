"""`dsymfind index` on real bundles whose DWARF folder holds a stray file beside the DWARF file.

Finder leaves `.DS_Store` files, and copies and interrupted tools leave empty or foreign
files. Each one is reported on one `invalid:` line (exit status 1, as for anything not
indexed), and the valid DWARF file beside it is indexed all the same.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    UNIVERSAL_UUIDS,
    dwarf_of,
    link_of,
    zip_bundles,
)
from support.processes import run_cli, run_helper

from dsymfind.uuids import uuid_hex

# The first bytes of a real .DS_Store (a "Bud1" buddy-allocator file).
DS_STORE = b"\x00\x00\x00\x01Bud1" + bytes(4088)
DWARF_DIR = Path("Contents", "Resources", "DWARF")


def invalid_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("invalid: ")]


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        (".DS_Store", DS_STORE, "not a Mach-O file (starts with 00 00 00 01)"),
        ("hello.partial", b"", "empty file, not a Mach-O file"),
    ],
    ids=["ds-store", "empty"],
)
def test_a_stray_file_is_reported_and_the_dwarf_file_beside_it_indexed(
    name: str, content: bytes, reason: str, products: Path, cache_dir: Path
) -> None:
    bundle = products / "hello.dSYM"
    dwarf = dwarf_of(FIXTURES / "hello.dSYM").name
    stray = bundle / DWARF_DIR / name
    stray.write_bytes(content)

    done = run_cli("index", str(bundle))

    assert done.returncode == 1, done.stdout
    assert done.stderr == ""
    assert invalid_lines(done.stdout) == [f"invalid: {stray}: {reason}"]
    assert "1 UUIDs linked" in done.stdout
    assert link_of(cache_dir, HELLO_UUID).resolve() == (bundle / DWARF_DIR / dwarf).resolve()
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert Path(answer["DBGDSYMPath"]).resolve() == (bundle / DWARF_DIR / dwarf).resolve()


def test_an_executable_in_the_dwarf_folder_is_no_dsym_and_is_not_linked(
    products: Path, cache_dir: Path
) -> None:
    """The executable carries the same UUID: the link must lead to the dSYM, not to it."""
    bundle = products / "hello.dSYM"
    stray = bundle / DWARF_DIR / "hello copy"
    shutil.copyfile(FIXTURES / "hello", stray)

    done = run_cli("index", str(bundle))

    assert done.returncode == 1
    assert invalid_lines(done.stdout) == [
        f"invalid: {stray}: no dSYM slice with a UUID (MH_EXECUTE)"
    ]
    assert link_of(cache_dir, HELLO_UUID).resolve() == (bundle / DWARF_DIR / "hello").resolve()


def test_a_walk_indexes_every_bundle_and_names_the_one_stray_file(
    products: Path, cache_dir: Path
) -> None:
    stray = products / "universal.dSYM" / DWARF_DIR / ".DS_Store"
    stray.write_bytes(DS_STORE)

    done = run_cli("index", str(products))

    assert done.returncode == 1
    assert "7 bundles and zips seen: 7 new or changed, 0 unchanged, 1 invalid" in done.stdout
    assert [line.split(": ")[1] for line in invalid_lines(done.stdout)] == [str(stray)]
    for uuid in (HELLO_UUID, GREET_UUID, *UNIVERSAL_UUIDS.values()):
        assert link_of(cache_dir, uuid).exists(), uuid


def test_the_stray_file_is_reported_until_it_is_gone(products: Path, cache_dir: Path) -> None:
    bundle = products / "hello.dSYM"
    stray = bundle / DWARF_DIR / ".DS_Store"
    stray.write_bytes(DS_STORE)
    assert run_cli("index", str(bundle)).returncode == 1

    again = run_cli("index", str(bundle))  # the same tree, the same verdict
    assert again.returncode == 1
    assert invalid_lines(again.stdout) == [
        f"invalid: {stray}: not a Mach-O file (starts with 00 00 00 01)"
    ]
    assert link_of(cache_dir, HELLO_UUID).exists()

    stray.unlink()
    cleaned = run_cli("index", str(bundle))
    assert cleaned.returncode == 0, cleaned.stdout
    assert "0 invalid" in cleaned.stdout
    settled = run_cli("index", str(bundle))
    assert "1 bundles and zips seen: 0 new or changed, 1 unchanged, 0 invalid" in settled.stdout


def test_a_stray_file_does_not_keep_a_source_map_shadow_from_being_made(
    products: Path, cache_dir: Path, tmp_path: Path
) -> None:
    bundle = products / "hello.dSYM"
    stray = bundle / DWARF_DIR / ".DS_Store"
    stray.write_bytes(DS_STORE)

    done = run_cli("index", str(bundle), "--source-map", f"/build={tmp_path}")

    assert done.returncode == 1
    assert invalid_lines(done.stdout) == [
        f"invalid: {stray}: not a Mach-O file (starts with 00 00 00 01)"
    ]
    link = link_of(cache_dir, HELLO_UUID)
    shadow_dwarf = Path(os.path.normpath(link.parent / os.readlink(link)))
    assert shadow_dwarf.is_relative_to(cache_dir / "dsyms")
    assert shadow_dwarf.resolve() == (bundle / DWARF_DIR / "hello").resolve()


def test_a_bundle_holding_only_a_stray_file_is_invalid(products: Path, cache_dir: Path) -> None:
    bundle = products / "hello.dSYM"
    (bundle / DWARF_DIR / "hello").unlink()
    stray = bundle / DWARF_DIR / ".DS_Store"
    stray.write_bytes(DS_STORE)

    done = run_cli("index", str(bundle))

    assert done.returncode == 1
    assert invalid_lines(done.stdout) == [
        f"invalid: {stray}: not a Mach-O file (starts with 00 00 00 01)"
    ]
    assert not link_of(cache_dir, HELLO_UUID).exists()


def test_a_stray_file_in_a_zipped_bundle_is_named_inside_the_zip_and_left_out(
    products: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """App Store Connect's layout, a .DS_Store zipped along: the bundle is unpacked into the
    cache without it, so `dsymfind check` finds a valid entry."""
    stray = products / "hello.dSYM" / DWARF_DIR / ".DS_Store"
    stray.write_bytes(DS_STORE)
    delivery = zip_bundles(tmp_path / "appDsyms.zip", [products / "hello.dSYM"])

    done = run_cli("index", str(delivery))

    assert done.returncode == 1
    assert invalid_lines(done.stdout) == [
        f"invalid: {delivery}: dSYMs/hello.dSYM/Contents/Resources/DWARF/.DS_Store: "
        "not a Mach-O file (starts with 00 00 00 01)"
    ]
    entry = cache_dir / "dsyms" / uuid_hex(HELLO_UUID) / "hello.dSYM"
    assert link_of(cache_dir, HELLO_UUID).resolve() == (entry / DWARF_DIR / "hello").resolve()
    assert sorted(p.name for p in (entry / DWARF_DIR).iterdir()) == ["hello"]
    check = run_cli("check")
    assert check.returncode == 0, check.stdout
    assert "0 invalid" in check.stdout


def test_every_dwarf_file_of_a_users_zipped_bundle_is_linked(
    tmp_path: Path, cache_dir: Path
) -> None:
    """A download keeps only the file asked for; a zip of the user's own is theirs entire."""
    bundle = tmp_path / "two.dSYM"
    dwarf = bundle / "Contents" / "Resources" / "DWARF"
    dwarf.mkdir(parents=True)
    shutil.copy(dwarf_of(FIXTURES / "hello.dSYM"), dwarf / "hello")
    shutil.copy(dwarf_of(FIXTURES / "libgreet.dylib.dSYM"), dwarf / "libgreet.dylib")
    archive = zip_bundles(tmp_path / "two.zip", [bundle])
    done = run_cli("index", str(archive))
    assert done.returncode == 0, done.stdout + done.stderr
    for uuid in (HELLO_UUID, GREET_UUID):
        assert link_of(cache_dir, uuid).exists(), uuid
        assert "DBGDSYMPath" in run_helper(uuid).entry(uuid)
