"""symbolic's modules, loaded without the package's `__init__`.

That `__init__` imports every module symbolic has (source maps, ProGuard, CFI...) to
re-export their names, which costs `dsymfind symbolicate` of a small report about a
tenth of its run. The modules used here import one another by their full names
(`symbolic.symcache` imports `symbolic._lowlevel`, `symbolic.utils`...), so a bare
package object in their place is enough. It completes itself when asked for more, so
code that imports `symbolic` as usual in the same process sees the whole package.

The names used of each module are checked on load: a symbolic whose layout moved
(pyproject.toml pins it below 14) fails with a clear message, not deep in a lookup.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from dsymfind.errors import DsymfindError

PACKAGE = "symbolic"
# Each module used, with the names read of it.
USED: dict[str, tuple[str, ...]] = {
    "symbolic._lowlevel": ("ffi", "lib"),
    "symbolic.utils": ("rustcall",),
    "symbolic.exceptions": ("SymbolicError",),
    "symbolic.symcache": ("SymCache", "SYMCACHE_LATEST_VERSION"),
    "symbolic.debuginfo": ("Archive",),
}


class SymbolicLayoutError(DsymfindError):
    """The installed symbolic is not laid out as the one dsymfind was written for."""


def module(name: str) -> Any:
    """symbolic's module `name` (one of USED), with the names dsymfind reads of it."""
    loaded = sys.modules.get(name)
    if loaded is None:
        _install_bare_package()
        try:
            loaded = importlib.import_module(name)
        except ImportError as exc:
            raise SymbolicLayoutError(_unexpected(f"cannot import {name} ({exc})")) from None
    missing = [attribute for attribute in USED[name] if not hasattr(loaded, attribute)]
    if missing:
        raise SymbolicLayoutError(_unexpected(f"{name} has no {', '.join(missing)}"))
    return loaded


def _install_bare_package() -> None:
    if PACKAGE in sys.modules:
        return  # the real one, or ours
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        raise SymbolicLayoutError(_unexpected("it is not installed as a package"))
    package = types.ModuleType(PACKAGE)
    package.__spec__, package.__file__ = spec, spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__getattr__ = _completing(package, spec)  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package


def _completing(package: types.ModuleType, spec: Any) -> Any:
    """The bare package's `__getattr__` (PEP 562): a submodule asked for by name
    (`symbolic.debuginfo`, `from symbolic import exceptions`) is imported alone; any
    other name runs the real `__init__`, once."""

    def complete(name: str) -> Any:
        if not name.startswith("_"):
            try:
                return importlib.import_module(f"{PACKAGE}.{name}")
            except ModuleNotFoundError:
                pass  # a name the package re-exports
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, name)

    return complete


def _unexpected(problem: str) -> str:
    return f"symbolic is not the one dsymfind symbolicates with (13.x): {problem}"
