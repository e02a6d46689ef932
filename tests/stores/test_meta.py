"""Fetched files keep their own names: `dsymfind publish` records each Mach-O file's name
(and its dSYM bundle's) beside it, and a download restores them. The real CLI publishes
into a folder, the loopback symbol server serves it, and the helper fetches from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, link_of, write_config
from support.processes import run_cli, run_helper

from dsymfind.stores import layouts, meta

APP_BUNDLE = "MyApp.app.dSYM"
APP_NAME = "MyApp"


def build_products(tmp_path: Path) -> tuple[Path, Path]:
    """hello's dSYM and executable as an app's build names them."""
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "build" / APP_BUNDLE)
    dwarf = bundle / "Contents" / "Resources" / "DWARF"
    (dwarf / "hello").rename(dwarf / APP_NAME)
    executable = tmp_path / "build" / APP_NAME
    shutil.copyfile(FIXTURES / "hello", executable)
    return bundle, executable


def published_store(tmp_path: Path, layout: str) -> Path:
    store = tmp_path / "store"
    bundle, executable = build_products(tmp_path)
    done = run_cli("publish", "--to", str(store), "--layout", layout, "--executables",
                   str(bundle), str(executable))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return store


def fetch_both(store: Path, config_file: Path, layout: str) -> dict[str, str]:
    with ss.SymbolServer(store) as server:
        write_config(
            config_file,
            f"timeout = 30\n[[servers]]\nurl = '{server.url}/'\nlayout = '{layout}'\n",
        )
        return run_helper("--copyExecutable", HELLO_UUID).entry(HELLO_UUID)


@pytest.mark.parametrize("layout", [layouts.UNIFIED, layouts.NATIVE])
def test_a_fetched_dsym_and_executable_keep_their_names(
    tmp_path: Path, config_file: Path, cache_dir: Path, layout: str
) -> None:
    store = published_store(tmp_path, layout)
    answer = fetch_both(store, config_file, layout)
    dwarf = Path(answer["DBGDSYMPath"])
    assert dwarf.name == APP_NAME
    assert dwarf.parents[3].name == APP_BUNDLE
    assert Path(answer["DBGSymbolRichExecutable"]).name == APP_NAME
    assert link_of(cache_dir, HELLO_UUID).resolve() == dwarf.resolve()
    # The cache with the new names is a valid one, and a second lookup recalls the answer.
    checked = run_cli("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert run_helper("--copyExecutable", HELLO_UUID).entry(HELLO_UUID) == answer


def test_the_unified_meta_file_is_symsorters(tmp_path: Path) -> None:
    store = published_store(tmp_path, layouts.UNIFIED)
    key = layouts.debug_file_key(layouts.UNIFIED, HELLO_UUID)
    written = json.loads((store / key).with_name("meta").read_bytes())
    assert written == {
        "name": APP_NAME,
        "arch": "arm64",
        "file_format": "macho",
        "bundle": APP_BUNDLE,
    }


HOSTILE_NAMES = {
    "parent": "../x",
    "two components": "a/b",
    "control character": "My\x07App",
    "newline": "My\nApp",
    "hidden": ".MyApp",
    "4 KB": "M" * 4096,
    "not a string": 7,
}


@pytest.mark.parametrize("hostile", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_a_hostile_name_falls_back_to_the_uuid(
    tmp_path: Path, config_file: Path, hostile: object
) -> None:
    store = published_store(tmp_path, layouts.UNIFIED)
    key = layouts.debug_file_key(layouts.UNIFIED, HELLO_UUID)
    values = {"name": hostile, "arch": "arm64", "file_format": "macho", "bundle": hostile}
    (store / key).with_name("meta").write_text(json.dumps(values))
    answer = fetch_both(store, config_file, layouts.UNIFIED)
    dwarf = Path(answer["DBGDSYMPath"])
    assert dwarf.name == HELLO_UUID
    assert dwarf.parents[3].name == f"{HELLO_UUID}.dSYM"
    assert Path(answer["DBGSymbolRichExecutable"]).name == HELLO_UUID


def test_a_name_without_a_bundle_names_the_bundle_after_it(
    tmp_path: Path, config_file: Path
) -> None:
    """A store symsorter made has no `bundle`: the dSYM is `<name>.dSYM`."""
    store = published_store(tmp_path, layouts.UNIFIED)
    key = layouts.debug_file_key(layouts.UNIFIED, HELLO_UUID)
    (store / key).with_name("meta").write_bytes(b'{"name":"MyApp","arch":"arm64"}')
    dwarf = Path(fetch_both(store, config_file, layouts.UNIFIED)["DBGDSYMPath"])
    assert (dwarf.parents[3].name, dwarf.name) == ("MyApp.dSYM", APP_NAME)


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[1]", b'{"name": "\\ud800"}', b"[" * 100_000, b'{"bundle": "x.dSYM"}'],
)
def test_damaged_metadata_names_nothing(data: bytes) -> None:
    assert meta.decode(data) == (None, None)


def test_a_bundle_name_must_be_a_dsym() -> None:
    assert meta.decode(b'{"name": "a", "bundle": "a.app"}') == ("a", None)
    assert meta.decode(b'{"name": "a", "bundle": ".dSYM"}') == ("a", None)
