"""_bare_os against os itself: every path function gives what os.path gives, over generated
and tricky paths, and its environment is os.environ's, then and later."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsymfind import _bare_os

sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
from fuzzing.properties import property_settings

# Pieces whose joins reach each branch: empty parts, dots, runs of slashes, a tilde, names
# of undecodable bytes (surrogates), other scripts and spaces.
PIECES = ["", ".", "..", "...", "/", "//", "///", "a", "b.c", "~", " ", "é", "\udc80", "x\udcff"]
TRICKY = ["", ".", "..", "/", "//", "///", "///x", "//x/", "x/", "x//", "/..", "//..", "./.."]
# For the tree below: past a loop, and a link met twice.
TRICKY += [" /b.c", "~/../~/b.c", "../~/../~", "\udc80/\udc80/é"]
paths = st.lists(st.sampled_from(PIECES), max_size=8).map("".join) | st.sampled_from(TRICKY)
PURE = ("dirname", "basename", "isabs", "normpath", "expanduser")


@property_settings(300)
@given(path=paths)
@pytest.mark.parametrize("name", PURE)
def test_each_pure_path_function_gives_what_os_path_gives(name: str, path: str) -> None:
    assert getattr(_bare_os, name)(path) == getattr(os.path, name)(path)


@property_settings(300)
@given(parts=st.lists(paths, min_size=1, max_size=4))
def test_join_gives_what_os_path_join_gives(parts: list[str]) -> None:
    assert _bare_os.join(*parts) == os.path.join(*parts)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder, a file, links to each, relative and absolute, through `..`, dangling and in
    a loop; the working folder inside."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.c").write_bytes(b"")
    (tmp_path / "~").symlink_to("a")
    (tmp_path / "a" / "é").symlink_to("b.c")
    (tmp_path / "a" / "...").symlink_to("nowhere")
    (tmp_path / "a" / " ").symlink_to(" /x")  # a loop
    (tmp_path / "a" / "x\udcff").symlink_to(tmp_path / "a" / "b.c" / ".." / "~")
    (tmp_path / "a" / "\udc80").symlink_to("../a/x\udcff/..")
    monkeypatch.chdir(tmp_path / "a")
    return tmp_path


FILE_FUNCTIONS = ("abspath", "exists", "lexists", "isdir", "islink", "realpath")
# A NUL makes stat() raise ValueError, not OSError: os.path answers False all the same.
with_nul = st.sampled_from(["", "a/"]).map(lambda head: head + "b\0c")


# The tree is only read: one for all of a test's examples.
@settings(property_settings(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=paths | with_nul)
@pytest.mark.parametrize("name", FILE_FUNCTIONS)
def test_each_file_system_function_gives_what_os_path_gives(
    name: str, path: str, tree: Path
) -> None:
    for spelled in (path, os.path.join(str(tree), path)):
        if name in ("abspath", "realpath") and "\0" in spelled:
            continue  # os.path's own answer is an exception there
        assert getattr(_bare_os, name)(spelled) == getattr(os.path, name)(spelled)


def test_the_environment_is_os_environ_with_undecodable_bytes() -> None:
    env = {**os.environb, b"DSYMFIND_TEST_\xff": b"value \xfe\x80", b"EMPTY": b""}
    check = (
        "import os; from dsymfind import _bare_os; assert _bare_os.current_environ() == os.environ"
    )
    subprocess.run([sys.executable, "-c", check], env=env, check=True, timeout=60)


def test_the_environment_follows_what_os_environ_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSYMFIND_TEST_SET", "x\udcff")  # stored as the byte 0xff
    monkeypatch.delenv("HOME")
    assert _bare_os.current_environ() == os.environ


def _outcome(call: Callable[..., None], *args: object) -> type[BaseException] | None:
    try:
        call(*args)
    except OSError as exc:
        return type(exc)
    return None


def _tree(root: Path) -> Path:
    """A folder holding a file and a symlink to a folder."""
    root.mkdir()
    (root / "file").write_bytes(b"")
    (root / "link").symlink_to(root)
    return root


@pytest.mark.parametrize("exist_ok", [True, False])
def test_makedirs_does_what_os_makedirs_does(tmp_path: Path, exist_ok: bool) -> None:
    ours, theirs = _tree(tmp_path / "ours"), _tree(tmp_path / "theirs")
    for case in ["", "new", "new", "new/deeper/deepest", "file", "file/below", "link"]:
        expected = _outcome(os.makedirs, theirs / case, 0o700, exist_ok)
        got = _outcome(_bare_os.makedirs, str(ours / case), 0o700, exist_ok)
        assert got is expected, case
        assert (ours / case).is_dir() == (theirs / case).is_dir(), case


def test_writing_into_a_folder_that_exists_loads_no_os(tmp_path: Path) -> None:
    """A remembered answer or a marker is written on the helper's path: the usual case,
    its folder already there, must not import os (about 1.5 ms under -I -S)."""
    (tmp_path / "answers").mkdir()
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parents[1])!r})\n"
        "from dsymfind import atomic, markers\n"
        f"atomic.write_marshal({str(tmp_path / 'answers' / 'one')!r}, {{'k': 1}})\n"
        f"markers.mark({str(tmp_path / 'answers' / 'marker')!r})\n"
        "print('os' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert (tmp_path / "answers" / "one").is_file() and (tmp_path / "answers" / "marker").exists()
    assert done.stdout == "False\n"
