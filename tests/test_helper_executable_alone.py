"""An executable the downloader fetched alone (no store had its dSYM) answers lookups, but
does not hide a dSYM published later: once the absence is forgotten, the helper asks the
stores for the dSYM again and answers it; while it is remembered, the executable answers
at once without a request."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support
from support.fixtures import write_config
from support.processes import run_helper

from dsymfind import main as cli
from dsymfind.apple import macho
from dsymfind.uuids import uuid_hex

DSYMUTIL = "/usr/lib/llvm-14/bin/dsymutil"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    return build_device_support(tmp_path_factory.mktemp("devicesupport"))


def test_a_dsym_published_after_the_executable_alone_wins_once_the_absence_is_forgotten(
    tree: DeviceSupportTree,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    library = tree.libraries[1]  # Foundation: thin arm64
    (wanted,) = library.uuids.values()
    store = tmp_path / "team-store"
    assert cli.main(["publish", "--system", "--to", str(store), str(tree.root)]) == 0
    home = tmp_path / "user"
    for var, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(var, str(home / sub))
    write_config(
        home / ".config" / "dsymfind" / "config.toml",
        f"timeout = 30\n[[servers]]\nname = 'team'\nurl = 'file://{store}'\nlayout = 'unified'\n",
    )
    cache = home / ".cache" / "dsymfind"

    first = run_helper(wanted)
    (kept,) = (cache / "executables" / uuid_hex(wanted)).iterdir()
    assert first.plist == {
        wanted: {"DBGArchitecture": "arm64", "DBGSymbolRichExecutable": str(kept)}
    }

    # The build's dSYM arrives in the store later (dsymutil keeps the library's UUID).
    dsym = tmp_path / f"{library.name}.dSYM"
    subprocess.run([DSYMUTIL, str(library.path), "-o", str(dsym)], check=True, capture_output=True)
    dwarf = next((dsym / "Contents" / "Resources" / "DWARF").iterdir())
    assert [s.uuid for s in macho.read_slices(dwarf)] == [wanted]
    assert cli.main(["publish", "--to", str(store), str(dsym)]) == 0
    capsys.readouterr()

    # The absence is still remembered: the executable answers, nothing is fetched.
    assert run_helper(wanted).plist == first.plist
    assert not (cache / "dsyms" / uuid_hex(wanted)).exists()

    # Forgotten (as the negative cache's time would): the dSYM is fetched and answered.
    assert cli.main(["forget", wanted]) == 0
    again = run_helper(wanted).plist[wanted]
    assert again["DBGDSYMPath"].startswith(str(cache / "dsyms" / uuid_hex(wanted)))
    assert again["DBGArchitecture"] == "arm64"
