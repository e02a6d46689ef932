"""The committed real fixtures (Mach-O files and dSYMs made by the LLVM toolchain) and
small builders of configuration and file-mapped trees around them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path
from types import ModuleType

from dsymfind.uuids import tree_entry

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures" / "macho"
PE_FIXTURES = TESTS / "fixtures" / "pe"


UUIDS = json.loads((FIXTURES / "uuids.json").read_text())


HELLO_UUID = UUIDS["hello"]["uuids"][0]["uuid"]


GREET_UUID = UUIDS["libgreet.dylib"]["uuids"][0]["uuid"]


UNIVERSAL_UUIDS = {u["arch"]: u["uuid"] for u in UUIDS["universal"]["uuids"]}


def load_generator() -> ModuleType:
    """tests/fixtures/make_macho.py, the fixtures' generator: its tool lookup and build
    flags serve tests that build Mach-O files of their own, rather than a second list."""
    spec = importlib.util.spec_from_file_location("make_macho", FIXTURES.parent / "make_macho.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


# Stand-ins for the macOS tools install and doctor drive (see tests/fakes).
FAKES = TESTS / "fakes"
# A UUID no fixture, tree or server has.
MISSING_UUID = "0BE7C0DE-0000-4000-8000-00000000DEAD"
# A symbol server nothing listens at (port 9, discard): a test meaning it never to be
# contacted fails fast if it is.
UNREACHABLE_SERVER = "[[servers]]\nurl = 'http://127.0.0.1:9/'\nlayout = 'native'\n"


def write_config(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def toml_list(paths: list[Path] | list[str]) -> str:
    return "[" + ", ".join(json.dumps(str(p)) for p in paths) + "]"


def dwarf_of(bundle: Path) -> Path:
    files = sorted((bundle / "Contents" / "Resources" / "DWARF").iterdir())
    assert len(files) == 1
    return files[0]


def padded_bundle(folder: Path, size: int) -> Path:
    """hello.dSYM as `folder`/big.dSYM, its DWARF file `size` bytes: zero padding (sparse, so
    cheap to make), still a valid Mach-O; for uploads large enough to be caught mid-way."""
    bundle = Path(shutil.copytree(FIXTURES / "hello.dSYM", folder / "big.dSYM"))
    with dwarf_of(bundle).open("r+b") as f:
        f.truncate(size)
    return bundle


def folder_with(folder: Path, *bundles: str) -> Path:
    """`folder`, made, holding a copy of each fixture bundle named (e.g. "hello.dSYM")."""
    folder.mkdir(parents=True)
    for name in bundles:
        shutil.copytree(FIXTURES / name, folder / name)
    return folder


def make_tree_link(root: Path, uuid: str, target: Path, *, relative: bool = True) -> Path:
    """A DebugSymbols file-mapped entry: uuids/XXXX/XXXX/XXXX/XXXX/XXXX/XXXXXXXXXXXX."""
    digits = uuid.replace("-", "")
    folder = root.joinpath(*(digits[i : i + 4] for i in range(0, 20, 4)))
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / digits[20:]
    link.symlink_to(os.path.relpath(target, folder) if relative else target)
    return link


def zip_bundles(path: Path, bundles: list[Path], folder: str = "dSYMs") -> Path:
    """A zip as App Store Connect delivers it: every bundle under one folder."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for bundle in bundles:
            for file in sorted(bundle.rglob("*")):
                if file.is_file():
                    name = Path(folder, bundle.name, file.relative_to(bundle))
                    archive.write(file, name.as_posix())
    return path


def link_of(cache_dir: Path, uuid: str) -> Path:
    return Path(tree_entry(str(cache_dir / "uuids"), uuid))


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file's size and mtime: what "never modify the user's files" is checked against."""
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


# Where each layout keeps hello's dSYM, spelled out from the store documentation.
# Where each layout keeps hello's dSYM.
_HELLO_HEX = HELLO_UUID.replace("-", "")
LAYOUT_PATHS = {
    "native": "/".join(
        [
            _HELLO_HEX[0:4],
            _HELLO_HEX[4:8],
            _HELLO_HEX[8:12],
            _HELLO_HEX[12:16],
            _HELLO_HEX[16:20],
            _HELLO_HEX[20:],
        ]
    ),
    "symstore": f"_.dwarf/mach-uuid-sym-{_HELLO_HEX.lower()}/_.dwarf",
    "symstore_index2": f"_/_.dwarf/mach-uuid-sym-{_HELLO_HEX.lower()}/_.dwarf",
    "ssqp": f"_.dwarf/mach-uuid-sym-{_HELLO_HEX.lower()}/_.dwarf",
    "unified": f"{_HELLO_HEX.lower()[:2]}/{_HELLO_HEX.lower()[2:]}/debuginfo",
    "debuginfod": f"buildid/{_HELLO_HEX.lower()}/debuginfo",
}
