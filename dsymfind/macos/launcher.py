"""The launcher DebugSymbols runs: dsymfind's helper, sealed off from the environment it gets.

LLDB passes its whole environment to the helper. A PYTHONHOME or PYTHONPATH meant for
another Python (a user's shell, an IDE, a Python tool that started lldb) kills a console
script before any dsymfind code runs ("Fatal Python error: init_fs_encoding" on stderr,
exit 1), and PYTHONSTARTUP, PYTHONVERBOSE or PYTHONWARNINGS=error break the helper's
contract in other ways. So `dsymfind install` writes this launcher and registers it:

- its #! line runs the installed interpreter with -I (every PYTHON* variable ignored, no
  user site, neither the script's folder nor the working folder on sys.path) and -S (no
  `site`: nothing from .pth files or sitecustomize runs, and start-up is faster);
- without `site`, it puts on sys.path itself the folders this installation imports from,
  found at install time: dsymfind's own folder, then what `site` gives the interpreter.

The launcher cannot count on writing bytecode: the package folder may be read-only to the
user lldb runs as, and without it every lookup compiles the helper's modules again. So
install compiles the package (timestamped .pyc files beside the sources, where this
interpreter looks with -I) and says which modules are left without.

The console script stays, for humans. The downloader the helper starts is isolated the
same way (processes.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import dsymfind
from dsymfind import atomic
from dsymfind.errors import DsymfindError
from dsymfind.macos.system import System

# One token: on Linux a #! line passes everything after the interpreter as one argument.
FLAGS = "-IS"
# The second line: uninstall and doctor recognise a launcher of ours by it.
MARKER = b"# dsymfind launcher, written by `dsymfind install`"
# Enough to hold the #! line and the marker.
_HEAD_BYTES = 4096
# A .pyc's header: magic number, flags, the source's mtime and size.
_PYC_HEADER = 16
# How long listing the interpreter's site folders may take (a start-up: milliseconds).
_LIST_TIMEOUT = 30.0

# Run with -S: the folders `site` adds (site-packages, .pth entries, the user site when
# the interpreter uses it), NUL-separated. A sitecustomize that prints goes to stderr.
_SITE_FOLDERS = """\
import os, site, sys
bare = set(sys.path)
sys.stdout, out = sys.stderr, sys.stdout
site.main()
added = [folder for folder in sys.path if folder not in bare]
out.buffer.write(b"\\0".join(os.fsencode(folder) for folder in added))
"""

# The installation the launcher names has moved or broken: still the helper's promise (one
# plist on stdout, nothing on stderr, exit 0), with the fix for the user to read.
_MOVED = """\
words = [w for w in sys.argv[1:] if not w.startswith("-")]
digits = words[-1].replace("-", "").upper() if words else ""
key = "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:]))
body = "<dict/>"
if len(digits) == 32 and all(c in "0123456789ABCDEF" for c in digits):
    body = (
        f"<dict><key>{key}</key><dict><key>DBGError</key><string>dsymfind cannot "
        "start from here (its installation moved): run `dsymfind install` again"
        "</string></dict></dict>"
    )
head = '<?xml version="1.0" encoding="UTF-8"?>\\n<plist version="1.0">'
sys.stdout.write(f"{head}{body}</plist>\\n")
sys.exit(0)
"""

_BODY = """\
# -I: lldb's PYTHON* variables are ignored; -S: no site, so the folders this installation
# imports from (as `dsymfind install` found them) are added here.
import sys

sys.path += {folders}
try:
    from dsymfind.helper import main
except Exception:
    # The installation written in above has moved or broken. Python compiles this script
    # on every lookup: as a string, the answer for that case costs no compiling until then.
    exec({moved})
sys.exit(main())
"""


def interpreter() -> str:
    """The Python this dsymfind runs on: the one the launcher's #! line names."""
    if not sys.executable:
        raise DsymfindError("cannot tell which Python runs dsymfind (sys.executable is empty)")
    python = os.path.abspath(sys.executable)
    if any(character.isspace() for character in python):
        raise DsymfindError(
            f"the Python path {python!r} contains a space, which a #! line cannot carry; "
            "install dsymfind under a path without spaces"
        )
    return python


def import_folders(python: str) -> list[str]:
    """dsymfind's own folder first, then the folders `site` gives `python`.

    Listed by `python` itself, with -E: what PYTHONPATH says in the shell that runs
    install is left out, as is the working folder.
    """
    own = os.path.dirname(os.path.dirname(os.path.abspath(dsymfind.__file__)))
    folders = [own]
    for folder in _site_folders(python):
        if os.path.isabs(folder) and folder not in folders:
            folders.append(folder)
    return folders


def _site_folders(python: str) -> list[str]:
    try:
        done = subprocess.run(
            [python, "-E", "-P", "-S", "-c", _SITE_FOLDERS],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=_LIST_TIMEOUT,
            check=False,
            cwd="/",
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise DsymfindError(f"cannot run {python} to list its import folders: {exc}") from None
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise DsymfindError(f"{python} could not list its import folders: {detail[0]}")
    return [os.fsdecode(folder) for folder in done.stdout.split(b"\0") if folder]


def package_folder() -> str:
    """The folder of the dsymfind package the launcher imports."""
    return os.path.dirname(os.path.abspath(dsymfind.__file__))


def compile_package(system: System, folder: str) -> list[str]:
    """Compile every module below `folder` where the launcher's interpreter reads bytecode;
    the modules still without it (a folder we may not write), as `uncompiled` says."""
    import compileall
    import py_compile

    system.note(f"compile {folder}")
    if system.dry_run:
        return []
    # -I ignores PYTHONPYCACHEPREFIX: bytecode kept elsewhere would never be read. A hash
    # pyc (the default under SOURCE_DATE_EPOCH) would have every lookup hash the source.
    prefix, sys.pycache_prefix = sys.pycache_prefix, None
    try:
        compileall.compile_dir(
            folder, quiet=2, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
        )
    finally:
        sys.pycache_prefix = prefix
    return uncompiled(folder)


def uncompiled(folder: str) -> list[str]:
    """The modules below `folder` whose bytecode the launcher's interpreter would not use:
    missing, stale, or for another interpreter."""
    return sorted(
        source for source in _sources(folder) if not _fresh_bytecode(source, _bytecode(source))
    )


def _sources(folder: str) -> list[str]:
    found = []
    for where, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if name != "__pycache__"]
        found += [os.path.join(where, name) for name in files if name.endswith(".py")]
    return found


def _bytecode(source: str) -> str:
    where, name = os.path.split(source)
    tag = sys.implementation.cache_tag
    return os.path.join(where, "__pycache__", f"{name[:-3]}.{tag}.pyc")


def _fresh_bytecode(source: str, bytecode: str) -> bool:
    """What the import system checks before it uses a timestamped .pyc: the interpreter's
    magic number, then the source's mtime and size as recorded."""
    import importlib.util

    try:
        st = os.stat(source)
        head = atomic.read_small_file(bytecode, _PYC_HEADER)
    except OSError:
        return False
    mtime, size = int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF
    expected = importlib.util.MAGIC_NUMBER + bytes(4) + mtime.to_bytes(4, "little")
    return head == expected + size.to_bytes(4, "little")


def render(python: str, folders: list[str]) -> bytes:
    """The launcher's text. Folders as ASCII literals: any path survives, whatever its bytes."""
    head = b"#!" + os.fsencode(python) + b" " + FLAGS.encode() + b"\n" + MARKER + b"\n"
    body = _BODY.format(folders=ascii(folders), moved=ascii(_MOVED))
    return head + body.encode("ascii")


def write(system: System, path: str, python: str, folders: list[str]) -> None:
    system.note(f"write {path} (runs {python} {FLAGS})")
    if not system.dry_run:
        atomic.write_bytes(path, render(python, folders), mode=0o755)


def is_ours(path: str) -> bool:
    """A launcher dsymfind wrote (by its marker line), not a file the user put there."""
    lines = _head(path).split(b"\n", 2)
    return len(lines) > 1 and lines[0].startswith(b"#!") and lines[1] == MARKER


def interpreter_of(path: str) -> str | None:
    """The Python a launcher of ours runs; None for any other file."""
    if not is_ours(path):
        return None
    first = _head(path).split(b"\n", 1)[0][2:]
    python, _, flags = first.rpartition(b" ")
    return os.fsdecode(python) if flags == FLAGS.encode() else None


def remove(system: System, path: str) -> bool:
    """Remove the launcher at `path` if it is ours; True when removed."""
    if not is_ours(path):
        return False
    system.note(f"rm {path}")
    if not system.dry_run:
        atomic.unlink_quietly(path)
    return True


def _head(path: str) -> bytes:
    try:
        return atomic.read_small_file(path, _HEAD_BYTES)
    except OSError:
        return b""
