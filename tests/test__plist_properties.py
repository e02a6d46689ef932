"""The plist writer and the helper's answers under property-based fuzzing.

Whatever strings arrive (control characters, CR/LF, NUL, U+FFFE/U+FFFF, astral
characters, XML metacharacters, file names of arbitrary bytes decoded with
surrogateescape), _plist.render's output parses back with plistlib to the same values,
or it refuses with _plist.UnrepresentableError exactly when _plist.representable says a
string cannot be carried; and the helper still answers with one valid _plist.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fixtures import FIXTURES, HELLO_UUID, toml_list, write_config

from dsymfind import _plist, helper

sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
from fuzzing import targets
from fuzzing.properties import property_settings

# What XML 1.0 cannot carry, what it must escape, and what it carries but parsers mangle.
SPECIALS = (
    [chr(c) for c in range(0x20)]
    + ["&", "<", ">", "]]>", '"', "'", "\r\n", "\x7f", "\x85", "\u2028", "\ufeff"]
    + ["\ufffe", "\uffff", "\ufffd", "\U0001f600", "\U0010ffff", "\ud800", "\udc80", "\udfff"]
)
text = st.lists(st.sampled_from(SPECIALS) | st.characters(), max_size=30).map("".join)
fs_names = st.binary(max_size=40).map(os.fsdecode)  # undecodable bytes become U+DC80..U+DCFF
values = text | fs_names
documents = st.dictionaries(values, st.dictionaries(values, values, max_size=4), max_size=4)
# The helper shares one isolated HOME (conftest's autouse fixture) across examples.
HELPER_SETTINGS = settings(
    property_settings(40),
    suppress_health_check=list(HealthCheck),
)


@property_settings(200)
@given(document=documents)
def test_render_parses_back_or_refuses(document: dict[str, dict[str, str]]) -> None:
    targets.check_plist(document)


@property_settings(300)
@given(value=values)
def test_refusal_is_the_writers_own_error(value: str) -> None:
    if _plist.representable(value):
        assert plistlib.loads(_plist.render({"K": {"DBGDSYMPath": value}})) == {
            "K": {"DBGDSYMPath": value}
        }
    else:
        with pytest.raises(_plist.UnrepresentableError):
            _plist.render({"K": {"DBGDSYMPath": value}})


@property_settings(200)
@given(data=st.binary(max_size=200))
def test_fuzz_campaign_documents(data: bytes) -> None:
    targets.check_plist(targets.document_from_bytes(data))


def parsed_answer(document: bytes) -> dict[str, dict[str, str]]:
    assert document.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    parsed = plistlib.loads(document)
    assert all(isinstance(entry, dict) for entry in parsed.values())
    return parsed


@HELPER_SETTINGS
@given(args=st.lists(values | st.sampled_from(["--copyExecutable", "-x", HELLO_UUID]), max_size=4))
def test_helper_answers_any_argv(args: list[str]) -> None:
    document = helper.respond(args, dict(os.environ), started=time.monotonic())
    parsed = parsed_answer(document)
    assert len(parsed) <= 1


@pytest.fixture(scope="module")
def dsym_folder() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="dsymfind-plist-"))
    shutil.copytree(FIXTURES / "hello.dSYM", folder / "symbols" / "hello.dSYM")
    (folder / "binaries").mkdir()
    yield folder
    shutil.rmtree(folder)


@HELPER_SETTINGS
@given(name=st.binary(min_size=1, max_size=60).filter(lambda n: b"/" not in n and b"\0" not in n))
def test_helper_answers_for_an_executable_at_any_path(
    dsym_folder: Path, config_file: Path, tmp_path: Path, name: bytes
) -> None:
    """The rich executable is the file asked about: its path is carried, or a DBGError says why."""
    if name in (b".", b".."):
        return
    write_config(config_file, f"search_paths = {toml_list([dsym_folder / 'symbols'])}\n")
    executable = os.fsencode(dsym_folder / "binaries") + b"/" + name
    shutil.copyfile(FIXTURES / "hello", executable)
    env = {**os.environ, "DSYMFIND_CACHE_DIR": tempfile.mkdtemp(dir=tmp_path)}
    try:
        document = helper.respond([os.fsdecode(executable)], env, started=time.monotonic())
    finally:
        os.unlink(executable)
    entry = parsed_answer(document)[HELLO_UUID]
    if _plist.representable(os.fsdecode(executable)):
        assert entry["DBGSymbolRichExecutable"] == os.fsdecode(executable)
    else:
        assert "a plist cannot carry" in entry["DBGError"]
