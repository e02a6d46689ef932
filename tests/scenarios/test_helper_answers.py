"""What the helper answers, held from a second angle: a remembered answer whose file was
missing when it was made, the key of an error for a UUID given in lowercase, and paths a
plist cannot carry. The installed `dsymForUUID` (and the launcher) as real processes, on
the real fixtures."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, HELLO_UUID, UNREACHABLE_SERVER, toml_list, write_config
from support.processes import run_helper

from dsymfind import answers, settings
from dsymfind.local_lookup import search_origin
from dsymfind.macos import launcher
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

LOWERCASE_SPELLINGS = [
    pytest.param(HELLO_UUID.lower(), id="dashed"),
    pytest.param(uuid_hex(HELLO_UUID).lower(), id="bare"),
]


# --- a remembered answer is served only while every file it names exists ----------------


def test_a_search_path_answer_remembered_while_its_file_was_gone_is_not_answered(
    products: Path, config_file: Path, cache_dir: Path
) -> None:
    """A rebuild removes the bundle and writes it again; an answer made in between names
    the missing file, and its stamp ("missing") still matches while the file stays missing.
    The file lies below the configured search path, so only its absence can refuse it."""
    write_config(config_file, f"search_paths = {toml_list([products])}\n")
    real = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"]
    answers_dir = CachePaths(str(cache_dir)).answers
    source = search_origin(settings.load(os.environ)["search_paths"][0])
    gone = products / "rebuilding" / "hello.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    made_while_gone = {"DBGDSYMPath": str(gone), "DBGArchitecture": "arm64"}
    answers.remember(answers_dir, HELLO_UUID, made_while_gone, source, [])

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert os.path.exists(entry["DBGDSYMPath"]), "the answer remembered while it was gone"
    assert entry["DBGDSYMPath"] == real  # the lookup behind the remembered answer


# --- an error's key: the UUID as the answers spell it ------------------------------------


@pytest.mark.parametrize("asked", LOWERCASE_SPELLINGS)
def test_an_error_for_a_lowercase_uuid_is_keyed_by_the_dashed_uppercase_uuid(
    config_file: Path, asked: str
) -> None:
    """DebugSymbols and lldb look an answer up by the uppercase dashed UUID, whatever
    spelling they passed: an error keyed otherwise is never read, and the reason is lost."""
    write_config(config_file, "timeout = 0\n")  # a configuration error, as the DBGError

    run = run_helper(asked)

    assert list(run.plist) == [HELLO_UUID]
    assert "timeout" in run.entry(HELLO_UUID)["DBGError"]


@pytest.mark.parametrize("asked", LOWERCASE_SPELLINGS)
def test_the_launchers_own_error_for_a_lowercase_uuid_is_keyed_the_same_way(
    tmp_path: Path, asked: str
) -> None:
    """The launcher answers by itself when the installation it names has moved away."""
    script = tmp_path / "dsymForUUID"
    script.write_bytes(launcher.render(sys.executable, [str(tmp_path / "moved-away")]))
    script.chmod(0o755)

    done = subprocess.run(
        [str(script), asked], capture_output=True, stdin=subprocess.DEVNULL, timeout=60
    )

    assert (done.returncode, done.stderr) == (0, b"")
    document = plistlib.loads(done.stdout)
    assert list(document) == [HELLO_UUID]
    assert "dsymfind install" in document[HELLO_UUID]["DBGError"]


# --- paths a plist cannot carry: a DBGError naming the key, never a broken answer ---------


@pytest.mark.parametrize(
    "folder", [pytest.param(b"build\x01tmp", id="control"), pytest.param(b"caf\xe9", id="latin-1")]
)
def test_a_dsym_at_a_path_a_plist_cannot_carry_is_refused_by_name(
    tmp_path: Path, config_file: Path, folder: bytes
) -> None:
    """XML 1.0 cannot carry U+0001, and a name that is not UTF-8 is no text at all: the
    answer says which path could not be carried, instead of failing as a whole."""
    search = tmp_path / "symbols"
    bundle = os.fsencode(search) + b"/" + folder + b"/hello.dSYM"
    shutil.copytree(FIXTURES / "hello.dSYM", os.fsdecode(bundle))
    write_config(config_file, f"search_paths = {toml_list([search])}\n{UNREACHABLE_SERVER}")

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert entry == {"DBGError": "dsymfind: DBGDSYMPath is a path that a plist cannot carry"}
