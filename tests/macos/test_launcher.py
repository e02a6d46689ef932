"""The launcher `dsymfind install` registers, run as lldb runs it: with a hostile environment.

LLDB passes its whole environment to the helper. A PYTHONHOME or PYTHONPATH meant for
another Python kills a console script before any dsymfind code runs; the registered
launcher must answer all the same, and so must the downloader it starts on a miss.
"""

from __future__ import annotations

import ast
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import GREET_UUID, HELLO_UUID, dwarf_of, make_tree_link
from support.install import DOMAIN, prefs, python_in
from support.processes import BIN, run_cli, run_helper, settled_record
from support.served import HELLO_DWARF, configure_native, url_path
from support.tmpfs import small_file_system

from dsymfind.macos import launcher
from dsymfind.macos.system import System
from dsymfind.main import main

# Each of these alone breaks a plain `python` (dies, writes to stderr, or changes how
# it runs); the launcher must not notice any of them.
HOSTILE = {
    "PYTHONHOME": "/nonexistent",
    "PYTHONPATH": "/nonexistent",
    "PYTHONWARNINGS": "error",
    "PYTHONIOENCODING": "nonexistent-codec",
    "PYTHONSAFEPATH": "1",
    "PYTHONUSERBASE": "/nonexistent",
    "PYTHONINSPECT": "1",
    "PYTHONVERBOSE": "1",
    "PYTHONDEVMODE": "1",
    "PYTHONMALLOC": "nonsense",
    "PYTHONHASHSEED": "nonsense",
    "PYTHONPLATLIBDIR": "nonexistent",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPROFILEIMPORTTIME": "1",
}


def hostile_env(tmp_path: Path, only: str | None = None) -> dict[str, str]:
    """The test's environment with every PYTHON* trap set (or just `only`)."""
    startup = tmp_path / "startup.py"
    startup.write_text("import sys\nsys.stderr.write('PYTHONSTARTUP ran\\n')\n")
    traps = {**HOSTILE, "PYTHONSTARTUP": str(startup)}
    if only is not None:
        traps = {only: traps[only]}
    return {**os.environ, **traps}


def registered(state: Path) -> str:
    helper = prefs(state)["DBGShellCommands"]
    assert isinstance(helper, str)
    return helper


def first_line(path: str | Path) -> bytes:
    return Path(path).read_bytes().split(b"\n", 1)[0]


def installed(state: Path) -> str:
    done = run_cli("install")
    assert done.returncode == 0, done.stderr
    return registered(state)


def run_launcher(launcher: str, *args: str, env: dict[str, str]) -> dict[str, object]:
    """The launcher as lldb runs it (a real process, no shell), held to the contract."""
    done = subprocess.run(
        [launcher, *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=60,
        check=False,
        cwd="/",
    )
    assert done.stderr == b"", done.stderr[-2000:]
    assert done.returncode == 0
    assert done.stdout.startswith(b"<?xml"), done.stdout[:200]
    document = plistlib.loads(done.stdout)
    assert isinstance(document, dict)
    return document


def test_the_console_script_dies_under_pythonhome(tmp_path: Path) -> None:
    """Why the launcher exists: lldb would get nothing at all from the console script."""
    done = subprocess.run(
        [str(BIN / "dsymForUUID"), HELLO_UUID],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=hostile_env(tmp_path, "PYTHONHOME"),
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == b""
    assert b"init_fs_encoding" in done.stderr


def test_install_registers_an_isolated_launcher(macos: Path) -> None:
    launcher = installed(macos)
    assert os.path.realpath(launcher) != os.path.realpath(BIN / "dsymForUUID")
    assert " " not in launcher
    assert os.access(launcher, os.X_OK)
    # One flag token: on Linux a #! line passes everything after the interpreter as one.
    assert first_line(launcher) == b"#!" + os.fsencode(os.path.abspath(sys.executable)) + b" -IS"
    assert (BIN / "dsymForUUID").exists(), "the console script stays, for humans"


@pytest.mark.parametrize("only", [None, "PYTHONSTARTUP", *HOSTILE])
def test_the_launcher_answers_a_cache_hit_in_a_hostile_environment(
    only: str | None, macos: Path, products: Path, tmp_path: Path
) -> None:
    launcher = installed(macos)
    assert run_cli("index", str(products / "hello.dSYM")).returncode == 0
    dwarf = str(dwarf_of(products / "hello.dSYM"))
    env = hostile_env(tmp_path, only)

    for _ in range(2):  # the answer built, then the remembered answer
        document = run_launcher(launcher, HELLO_UUID, env=env)
        entry = document[HELLO_UUID]
        assert isinstance(entry, dict)
        assert os.path.realpath(entry["DBGDSYMPath"]) == os.path.realpath(dwarf)


@pytest.mark.parametrize("only", [None, "PYTHONWARNINGS"])
def test_a_miss_is_fetched_through_the_downloader_in_a_hostile_environment(
    only: str | None,
    macos: Path,
    server: ss.SymbolServer,
    config_file: Path,
    cache_dir: Path,
    tmp_path: Path,
) -> None:
    launcher = installed(macos)
    server.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))
    configure_native(config_file, server, timeout=20)
    document = run_launcher(launcher, HELLO_UUID, env=hostile_env(tmp_path, only))
    entry = document[HELLO_UUID]
    assert isinstance(entry, dict), document
    assert "DBGError" not in entry, entry
    assert Path(entry["DBGDSYMPath"]).read_bytes() == HELLO_DWARF
    assert Path(entry["DBGDSYMPath"]).is_relative_to(cache_dir / "dsyms")
    assert server.count(url_path(HELLO_UUID)) == 1
    assert settled_record(cache_dir, HELLO_UUID, timeout=30)["state"] == "done"


def test_uninstall_removes_the_launcher_it_created(macos: Path) -> None:
    launcher = installed(macos)
    assert os.path.exists(launcher)
    done = run_cli("uninstall")
    assert done.returncode == 0, done.stderr
    assert not os.path.lexists(launcher)
    assert "DBGShellCommands" not in prefs(macos)
    assert (BIN / "dsymForUUID").exists()


def test_link_points_the_fixed_path_at_the_launcher(macos: Path, helper_link: Path) -> None:
    assert main(["install", "--link"]) == 0
    assert registered(macos) == str(helper_link)
    launcher = os.readlink(helper_link)
    assert os.path.realpath(launcher) != os.path.realpath(BIN / "dsymForUUID")
    assert first_line(launcher).endswith(b" -IS")
    assert main(["uninstall"]) == 0
    assert not os.path.lexists(helper_link)
    assert not os.path.lexists(launcher)


def test_a_link_to_the_console_script_is_moved_to_the_launcher_and_back(
    macos: Path, helper_link: Path
) -> None:
    """crashlog.py and xnu run the link: one to the console script is not isolated."""
    helper_link.parent.mkdir()
    helper_link.symlink_to(BIN / "dsymForUUID")
    assert main(["install", "--link"]) == 0
    launcher = os.readlink(helper_link)
    assert first_line(launcher).endswith(b" -IS")
    assert main(["uninstall"]) == 0
    assert os.readlink(helper_link) == str(BIN / "dsymForUUID")


def test_a_python_path_with_a_space_is_refused_before_any_change(
    macos: Path,
    isolated_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A #! line cannot name an interpreter whose path holds a space."""
    python_in(tmp_path / "My Python" / "bin", monkeypatch)
    assert main(["install"]) == 1
    assert "contains a space" in capsys.readouterr().err
    assert prefs(macos) == {}
    assert not (isolated_home / ".state" / "dsymfind" / "dsymForUUID").exists()


def doctor_line(subject: str) -> tuple[str, str]:
    """The line doctor prints for `subject`, and the fix under it."""
    done = run_cli("doctor")
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    for number, line in enumerate(lines):
        if line.split(" ", 1)[-1].lstrip().startswith(f"{subject}:"):
            following = lines[number + 1] if number + 1 < len(lines) else ""
            return line, following.strip() if following.startswith(" ") else ""
    raise AssertionError(f"no {subject} line in {done.stdout}")


def test_doctor_warns_about_a_registered_console_script(macos: Path) -> None:
    assert run_cli("install").returncode == 0
    line, _ = doctor_line("DBGShellCommands")
    assert line.startswith("ok "), line
    subprocess.run(
        ["defaults", "write", DOMAIN, "DBGShellCommands", "-string", str(BIN / "dsymForUUID")],
        check=True,
    )
    line, fix = doctor_line("DBGShellCommands")
    assert line.startswith("warn "), line
    assert "PYTHONHOME" in line
    assert fix == "fix: dsymfind install"


def test_doctor_warns_about_a_launcher_of_another_installation(macos: Path) -> None:
    launcher = Path(installed(macos))
    text = launcher.read_bytes()
    other = b"#!/opt/elsewhere/bin/python3 -IS"
    launcher.write_bytes(other + text[len(first_line(launcher)) :])
    line, fix = doctor_line("DBGShellCommands")
    assert line.startswith("warn "), line
    assert "another installation's Python" in line
    assert fix == "fix: dsymfind install"


def test_a_link_that_is_not_ours_is_refused_before_the_launcher_is_written(
    macos: Path, isolated_home: Path, helper_link: Path
) -> None:
    helper_link.parent.mkdir()
    helper_link.symlink_to("/opt/someone-else/dsymForUUID")
    assert main(["install", "--link"]) == 1
    assert os.readlink(helper_link) == "/opt/someone-else/dsymForUUID"
    assert not (isolated_home / ".state" / "dsymfind" / "dsymForUUID").exists()
    assert prefs(macos) == {}


def test_install_leaves_every_module_compiled(macos: Path) -> None:
    installed(macos)

    assert launcher.uncompiled(launcher.package_folder()) == []


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_the_launcher_answers_from_bytecode_out_of_a_read_only_package(
    tmp_path: Path, products: Path, cache_dir: Path
) -> None:
    """The package compiled as install compiles it, then its folder made read-only: a hit
    reads the .pyc files and no source, and tries to write nothing there."""
    make_tree_link(cache_dir / "uuids", GREET_UUID, dwarf_of(products / "libgreet.dylib.dSYM"))
    run_helper(GREET_UUID)  # remembers the answer
    with small_file_system(tmp_path / "site", "32m") as site:
        package = site / "dsymfind"
        shutil.copytree(
            launcher.package_folder(), package, ignore=shutil.ignore_patterns("__pycache__")
        )
        assert launcher.compile_package(System(dry_run=False), str(package)) == []
        subprocess.run(["mount", "-o", "remount,ro", str(site)], check=True)
        python = launcher.interpreter()
        script = tmp_path / "dsymForUUID"
        folders = [str(site), *launcher.import_folders(python)]
        script.write_bytes(launcher.render(python, folders))
        script.chmod(0o755)
        log = tmp_path / "opened.log"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        strace = ["strace", "-f", "-e", "trace=openat", "-o", str(log), str(script)]
        run_launcher(strace[0], *strace[1:], GREET_UUID, env=env)

        opened = [line for line in log.read_text().splitlines() if str(package) in line]
        assert any(".pyc" in line for line in opened)
        assert [line for line in opened if '.py"' in line or "O_WRONLY" in line] == []


def test_a_launcher_whose_installation_moved_still_answers_a_plist(tmp_path: Path) -> None:
    """Its import folders gone (dsymfind reinstalled elsewhere): one plist naming the fix,
    nothing on stderr, exit 0, as every answer of the helper (it used to be a traceback
    on stderr and exit 1, which older LLDB reads as the answer)."""
    script = tmp_path / "dsymForUUID"
    script.write_bytes(launcher.render(sys.executable, [str(tmp_path / "moved-away")]))
    script.chmod(0o755)
    done = subprocess.run(
        [str(script), "--ignoreNegativeCache", HELLO_UUID.lower()],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.startswith(b"<?xml")
    error = plistlib.loads(done.stdout)[HELLO_UUID]["DBGError"]
    assert "dsymfind install" in error
    bare = subprocess.run([str(script), "/some/path"], capture_output=True, timeout=60)
    assert (bare.returncode, bare.stderr, plistlib.loads(bare.stdout)) == (0, b"", {})


def test_what_each_lookup_compiles_of_the_launcher_is_a_few_statements() -> None:
    """A script has no .pyc: Python compiles the launcher on every lookup (a 180-node
    tree was about 0.2 ms of a 12 ms hit). The answer for a moved installation stays a
    string until it is needed."""
    tree = ast.parse(launcher.render(sys.executable, ["/nowhere"]))
    assert sum(1 for _ in ast.walk(tree)) <= 40
