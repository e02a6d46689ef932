"""What the helper's hot paths and the light admin commands load, as an allow-list.

A cache hit, a search-path hit and a negative answer are most of what LLDB asks: each
module they load is start-up time on every one. A subpackage __init__ costs about
0.2 ms, so none of them sits on these paths, and no third-party module does either.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixtures import (
    FIXTURES,
    HELLO_UUID,
    MISSING_UUID,
    UNREACHABLE_SERVER,
    dwarf_of,
    folder_with,
    make_tree_link,
    toml_list,
    write_config,
)
from support.negative import remember_absent
from support.processes import (
    modules_loaded_answering,
    modules_loaded_launched,
    modules_loaded_running,
    run_helper,
)
from support.symbolication import CRASHY_DWARF

# Never contacted: the negative cache answers before any request. An object store beside
# it: botocore must not load for its configuration either.
UNREACHABLE_SERVERS = UNREACHABLE_SERVER + (
    "[[servers]]\nurl = 's3://symbols/ios/'\nendpoint_url = 'http://127.0.0.1:9'\n"
)

# Everything a hit or a negative answer may load of dsymfind, and why each is there.
HOT_PATH_MODULES = frozenset(
    {
        "dsymfind",  # the package: __version__ only
        "dsymfind.helper",  # argv -> plist
        "dsymfind._bare_os",  # what the others need of os, from the built-in posix
        "dsymfind.errors",  # the one expected-failure type
        "dsymfind.settings",  # the compiled configuration snapshot
        "dsymfind.paths",  # where the configuration and the cache are, and names inside it
        "dsymfind.atomic",  # reading marshal files whole
        "dsymfind.uuids",  # UUID spellings
        "dsymfind._plist",  # the answer's XML
        "dsymfind.permissions",  # a cache others could write into is refused
        "dsymfind.local_lookup",  # trees, the cache, search paths
        "dsymfind.answers",  # remembered answers
        "dsymfind.debugsymbols",  # the answer's keys, and which paths it may carry
        "dsymfind.search_paths",  # a search path's ready answers
        "dsymfind.markers",  # the negative cache
    }
)
# Standard modules a hot path must not load although `python -c pass` does not either:
# `from __future__ import annotations` costs an import (0.15-0.2 ms) on every answer.
NOT_ON_THE_HOT_PATH = frozenset({"__future__"})
# What `import os` brings: about 2 ms of CPU in the launcher's -I -S interpreter, which
# has loaded none of them (`python -c pass` has, through site).
OS_AND_ITS_IMPORTS = frozenset({"os", "posixpath", "genericpath", "stat", "_collections_abc"})
# Admin commands that only read: none of them may load the network or locking libraries.
READ_ONLY_COMMANDS = ("status", "config", "lookup", "id")
NETWORK_AND_LOCKING = (
    "httpx",
    "httpcore",
    "h11",
    "filelock",
    "certifi",
    "anyio",
    "botocore",
    "boto3",
)


def bare_interpreter_modules() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def judge(loaded: set[str]) -> None:
    extra = loaded - bare_interpreter_modules()
    ours = {m for m in extra if m == "dsymfind" or m.startswith("dsymfind.")}
    assert ours <= HOT_PATH_MODULES, sorted(ours - HOT_PATH_MODULES)
    foreign = {m for m in extra - ours if m.split(".")[0] not in sys.stdlib_module_names}
    assert foreign == set()
    assert extra & NOT_ON_THE_HOT_PATH == set()


def remember_no_answer(cache_dir: Path) -> None:
    """A negative marker for MISSING_UUID, and the search path walked once (lldb's first ask)."""
    remember_absent(cache_dir, MISSING_UUID)
    assert run_helper(MISSING_UUID).plist == {}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return folder_with(tmp_path / "Products", "hello.dSYM")


def test_a_remembered_hit_loads_only_the_allowed_modules(tree: Path, config_file: Path) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n")
    run_helper(HELLO_UUID)  # builds the settings snapshot and remembers the answer
    judge(modules_loaded_answering(HELLO_UUID, b"DBGDSYMPath"))


def test_a_search_path_hit_loads_only_the_allowed_modules(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n")
    run_helper(HELLO_UUID)  # walks the tree and writes the index's ready answers
    shutil.rmtree(cache_dir / "answers")
    judge(modules_loaded_answering(HELLO_UUID, b"DBGDSYMPath"))


def test_a_negative_answer_loads_only_the_allowed_modules(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n{UNREACHABLE_SERVERS}")
    remember_no_answer(cache_dir)
    judge(modules_loaded_answering(MISSING_UUID, b"<dict/>"))


def test_a_remembered_hit_through_the_launcher_loads_no_os(tree: Path, config_file: Path) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n")
    run_helper(HELLO_UUID)  # builds the settings snapshot and remembers the answer
    loaded = modules_loaded_launched(HELLO_UUID, b"DBGDSYMPath")
    assert loaded & OS_AND_ITS_IMPORTS == set()
    judge(loaded)


@pytest.mark.parametrize("named", ["bundle", "DWARF file"])
def test_a_cache_tree_hit_through_the_launcher_loads_no_os(
    named: str, tree: Path, cache_dir: Path
) -> None:
    # An entry naming a bundle is checked through its real path (_bare_os.realpath).
    bundle = tree / "hello.dSYM"
    make_tree_link(
        cache_dir / "uuids", HELLO_UUID, bundle if named == "bundle" else dwarf_of(bundle)
    )
    run_helper(HELLO_UUID)  # remembers the answer
    loaded = modules_loaded_launched(HELLO_UUID, b"DBGDSYMPath")
    assert loaded & OS_AND_ITS_IMPORTS == set()
    judge(loaded)


def test_a_negative_answer_through_the_launcher_loads_no_os(
    tree: Path, config_file: Path, cache_dir: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n{UNREACHABLE_SERVERS}")
    remember_no_answer(cache_dir)
    loaded = modules_loaded_launched(MISSING_UUID, b"<dict/>")
    assert loaded & OS_AND_ITS_IMPORTS == set()
    judge(loaded)


def test_the_allow_list_is_not_wider_than_what_a_hit_needs(tree: Path, config_file: Path) -> None:
    """Each module listed is really loaded on some hot path: the list must not rot."""
    write_config(config_file, f"search_paths = {toml_list([tree])}\n{UNREACHABLE_SERVERS}")
    run_helper(HELLO_UUID)
    hit = modules_loaded_answering(HELLO_UUID, b"DBGDSYMPath")
    # The negative answer's marker check and a search path's index are the other paths' own.
    assert HOT_PATH_MODULES - hit <= {"dsymfind.markers", "dsymfind.search_paths"}


@pytest.mark.parametrize("verb", READ_ONLY_COMMANDS)
def test_read_only_commands_load_no_network_or_locking_library(
    verb: str, tree: Path, config_file: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([tree])}\n{UNREACHABLE_SERVERS}")
    target = {"lookup": [HELLO_UUID], "id": [str(FIXTURES / "hello")]}.get(verb, [])
    loaded = modules_loaded_running([verb, *target])
    assert {m.split(".")[0] for m in loaded} & set(NETWORK_AND_LOCKING) == set()


def test_symbolicate_loads_no_module_a_plain_class_spares() -> None:
    # dataclasses (with inspect) alone was a tenth of a small report's run.
    argv = ["symbolicate", "--image", str(CRASHY_DWARF), "--arch", "arm64"]
    argv += ["--load-address", "0", "0x398"]
    modules_loaded_running(argv)  # the settings snapshot made, the SymCache built
    loaded = modules_loaded_running(argv)
    assert {"dataclasses", "inspect", "subprocess"} & loaded == set()


def test_symbolicate_loads_none_of_the_modules_of_symbolics_wrappers_or_argparses_help() -> None:
    # symbolic's SymCache and Archive wrappers import these, and so does argparse's help
    # formatter (shutil, for the terminal's width): about 15 ms of a report's run.
    argv = ["symbolicate", "--image", str(CRASHY_DWARF), "--arch", "arm64"]
    argv += ["--load-address", "0", "0x398"]
    modules_loaded_running(argv)  # the settings snapshot made (config_reader uses shutil)
    loaded = modules_loaded_running(argv)
    assert {"shutil", "bz2", "lzma", "uuid", "platform", "weakref"} & loaded == set()
