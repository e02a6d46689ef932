"""symbolic's C interface called without its package's `__init__` or its Python wrappers
(bindings.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.processes import fail_line, modules_loaded_running, run_cli
from support.symbolication import CRASHY_DWARF, TEXT_VMADDR

from dsymfind.symbolicate import bindings

# The bare package, its cffi module and the module that module makes its `ffi` in.
USED = {"symbolic", "symbolic._lowlevel", "symbolic._lowlevel__ffi"}

SYMBOLICATE = (
    "symbolicate", "--image", str(CRASHY_DWARF), "--arch", "arm64",
    "--load-address", hex(TEXT_VMADDR), hex(TEXT_VMADDR + 0x398),
)  # fmt: skip


def _symbolic_modules_symbolicating() -> set[str]:
    """The symbolic modules a fresh `dsymfind symbolicate` process has loaded at its end."""
    return {m for m in modules_loaded_running(list(SYMBOLICATE)) if m.split(".")[0] == "symbolic"}


def test_symbolicate_loads_only_symbolics_c_interface() -> None:
    building = _symbolic_modules_symbolicating()  # no SymCache yet: it is built
    opening = _symbolic_modules_symbolicating()  # the table kept by the first run

    assert building == opening == USED


def test_the_whole_package_is_there_for_code_that_imports_it() -> None:
    probe = (
        "from dsymfind.symbolicate import bindings\n"
        "bindings.latest_version()\n"
        "import symbolic\n"
        "from symbolic import debuginfo\n"
        "assert symbolic.Archive is debuginfo.Archive\n"
        "assert symbolic.ProguardMapper is symbolic.proguard.ProguardMapper\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_a_symbolic_laid_out_otherwise_is_a_clear_error(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "symbolic"
    fake.mkdir(parents=True)
    modules = {
        "__init__": "raise RuntimeError('the package __init__ ran')",
        # A C library without one of the functions used.
        "_lowlevel": "class lib:\n    symbolic_err_clear = None\nffi = None",
    }
    for name, text in modules.items():
        (fake / f"{name}.py").write_text(text + "\n")

    done = run_cli(*SYMBOLICATE, env={**os.environ, "PYTHONPATH": str(fake.parent)})

    assert fail_line(done) == (
        "dsymfind: error: symbolic is not the one dsymfind symbolicates with (13.x): "
        "its C library has no " + ", ".join(bindings.FUNCTIONS[1:])
    )
