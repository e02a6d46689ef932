"""How the helper's process ends: at once after the answer, and with nothing lost."""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
from pathlib import Path

from support.fixtures import (
    HELLO_UUID,
    MISSING_UUID,
    dwarf_of,
    make_tree_link,
    toml_list,
    write_config,
)
from support.processes import BIN, run_helper


def _helper_with_exit_hook(uuid: str, hook_output: Path) -> subprocess.CompletedProcess[bytes]:
    """The console script's own lines, with an atexit hook first: it runs only if the
    interpreter tears itself down."""
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(hook_output)!r}, 'w').write('torn down'))\n"
        f"sys.argv = ['dsymForUUID', {uuid!r}]\n"
        "from dsymfind.helper import main\n"
        "sys.exit(main())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )


def test_the_helper_ends_without_the_interpreters_teardown(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    make_tree_link(tree, HELLO_UUID, dwarf_of(products / "hello.dSYM"))
    write_config(config_file, f"file_mapped_paths = {toml_list([tree])}\n")
    hook_output = tmp_path / "hook"

    done = _helper_with_exit_hook(HELLO_UUID, hook_output)

    assert (done.returncode, done.stderr) == (0, b"")
    assert plistlib.loads(done.stdout)[HELLO_UUID]["DBGDSYMPath"].endswith("DWARF/hello")
    assert not hook_output.exists()


def test_a_stray_print_never_follows_the_plist(config_file: Path) -> None:
    """The answer goes out through raw writes to fd 1; anything printed through Python's
    stdout (a library's warning, a debugging line) goes to /dev/null, never after the
    plist, whether it was flushed at once or left in the buffer for the end."""
    write_config(config_file, "")
    script = (
        "import sys\n"
        f"sys.argv = ['dsymForUUID', {MISSING_UUID!r}]\n"
        "from dsymfind import helper\n"
        "respond = helper.respond\n"
        "def printing(*args, **kwargs):\n"
        "    print('flushed line', flush=True)\n"
        "    document = respond(*args, **kwargs)\n"
        "    print('buffered line', end='')\n"
        "    return document\n"
        "helper.respond = printing\n"
        "helper.main()\n"
    )
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env=buffered, timeout=60, check=False
    )

    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.startswith(b"<?xml") and done.stdout.endswith(b"</plist>\n")
    assert plistlib.loads(done.stdout) == {}


def test_a_helper_started_with_stdout_closed_still_exits_0(config_file: Path) -> None:
    """Python makes sys.stdout None when fd 1 is closed at start-up; ending the process
    must not trip on it."""
    write_config(config_file, "")
    helper = str(BIN / "dsymForUUID")
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" "$1" >&-', helper, MISSING_UUID],
        capture_output=True,
        timeout=60,
        check=False,
    )

    assert (done.returncode, done.stderr) == (0, b"")


def test_a_miss_is_in_the_log_file_when_the_helper_has_ended(
    products: Path, config_file: Path, tmp_path: Path
) -> None:
    log_file = tmp_path / "logs" / "dsymfind.log"
    write_config(config_file, f"log_file = '{log_file}'\nsearch_paths = {toml_list([products])}\n")

    assert run_helper(MISSING_UUID).plist == {}

    assert f"{MISSING_UUID}: not found in" in log_file.read_text()
