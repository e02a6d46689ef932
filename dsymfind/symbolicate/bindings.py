"""symbolic's C interface, called directly: neither its package's `__init__` nor its
Python wrappers are loaded.

That `__init__` imports every module symbolic has (source maps, ProGuard, CFI...) to
re-export their names, and the wrappers of SymCaches and archives import `uuid` (with
`platform`), `shutil` (with the compression modules) and `weakref`: together a sixth of
what `dsymfind symbolicate` of a report takes, for a dozen C calls. `symbolic._lowlevel`
alone (its cffi library) is loaded, under a bare package object in place of `symbolic`.
That object completes itself when asked for more, so code that imports `symbolic` as
usual in the same process sees the whole package.

The C functions used are checked on load: a symbolic whose interface moved
(pyproject.toml pins it below 14) fails with a clear message, not deep in a lookup.
"""

from __future__ import annotations

import sys

from dsymfind.errors import DsymfindError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any, TypeVar

    T = TypeVar("T")

PACKAGE = "symbolic"
LOWLEVEL = "symbolic._lowlevel"
# symbolic's C functions used here and by the engine (symbolic-cabi, as 13.x has it).
FUNCTIONS = (
    "symbolic_err_clear",
    "symbolic_err_get_last_code",
    "symbolic_err_get_last_message",
    "symbolic_str_free",
    "symbolic_archive_open",
    "symbolic_archive_object_count",
    "symbolic_archive_get_object",
    "symbolic_archive_free",
    "symbolic_object_get_debug_id",
    "symbolic_object_free",
    "symbolic_symcache_latest_version",
    "symbolic_symcache_from_bytes",
    "symbolic_symcache_from_object",
    "symbolic_symcache_get_arch",
    "symbolic_symcache_get_debug_id",
    "symbolic_symcache_get_version",
    "symbolic_symcache_get_bytes",
    "symbolic_symcache_get_size",
    "symbolic_symcache_lookup",
    "symbolic_lookup_result_free",
    "symbolic_symcache_free",
)


def _once(make: Callable[[], T]) -> Callable[[], T]:
    """`make`, called on the first call only: its value is kept. functools.cache would do,
    but functools (with collections and types) costs a run more to import."""
    made: list[T] = []

    def value() -> T:
        if not made:
            made.append(make())
        return made[0]

    return value


class SymbolicLayoutError(DsymfindError):
    """The installed symbolic is not laid out as the one dsymfind was written for."""


class SymbolicError(Exception):
    """What symbolic's C interface reports for a table or DWARF it cannot read."""


@_once
def lowlevel() -> Any:
    """symbolic's cffi module: `lib` (the C functions of FUNCTIONS) and `ffi`, checked once."""
    loaded = sys.modules.get(LOWLEVEL)
    if loaded is None:
        _install_bare_package()
        try:
            __import__(LOWLEVEL)  # importlib (with warnings) is not loaded for it
            loaded = sys.modules[LOWLEVEL]
        except ImportError as exc:
            raise SymbolicLayoutError(_unexpected(f"cannot import {LOWLEVEL} ({exc})")) from None
    lib = getattr(loaded, "lib", None)
    if lib is None or not hasattr(loaded, "ffi"):
        raise SymbolicLayoutError(_unexpected(f"{LOWLEVEL} has no lib and ffi"))
    missing = [name for name in FUNCTIONS if not hasattr(lib, name)]
    if missing:
        raise SymbolicLayoutError(_unexpected(f"its C library has no {', '.join(missing)}"))
    return loaded


@_once
def caller() -> Callable[..., Any]:
    """`call(function, *args)`: a C function of symbolic's, raising SymbolicError for
    the error it records (as symbolic's own wrappers do around every call)."""
    low = lowlevel()
    lib, ffi = low.lib, low.ffi
    clear, last_code, last_message = (
        lib.symbolic_err_clear,
        lib.symbolic_err_get_last_code,
        lib.symbolic_err_get_last_message,
    )
    free_str = lib.symbolic_str_free

    def call(function: Any, *args: Any) -> Any:
        clear()
        result = function(*args)
        if last_code():
            raise SymbolicError(_taken_text(ffi, free_str, last_message()) or "symbolic failed")
        return result

    return call


def _taken_text(ffi: Any, free_str: Any, text: Any) -> str:
    """A SymbolicStr the caller owns, as text, freed."""
    try:
        shown: str = ffi.unpack(text.data, text.len).decode("utf-8", "replace") if text.len else ""
        return shown
    finally:
        if text.owned:
            free_str(ffi.addressof(text))


class SymCache:
    """One SymCache: read from bytes given to it, or built from DWARF in memory; freed
    with this object."""

    _borrowed: Any = None  # the bytes symbolic reads the table from, when it was given them

    def __init__(self, pointer: Any) -> None:
        low = lowlevel()
        self._lib, self._ffi, self._call = low.lib, low.ffi, caller()
        self.pointer = pointer  # valid while this object lives
        self.arch = self._text(self._lib.symbolic_symcache_get_arch)
        self.debug_id = self._text(self._lib.symbolic_symcache_get_debug_id)
        self.version: int = self._call(self._lib.symbolic_symcache_get_version, pointer)

    @classmethod
    def from_bytes(cls, table: bytearray | memoryview) -> SymCache:
        """The SymCache in `table`, read in place (symbolic borrows the bytes: this object
        keeps them); SymbolicError when it is not one. symbolic needs them 8-byte aligned,
        as a bytearray's own buffer is."""
        low = lowlevel()
        borrowed = low.ffi.from_buffer("uint8_t[]", table)
        made = cls(caller()(low.lib.symbolic_symcache_from_bytes, borrowed, len(borrowed)))
        made._borrowed = borrowed
        return made

    def data(self) -> bytes:
        """The table's bytes, as symbolic reads them (a file keeps them after a header:
        symcaches.py)."""
        lib, pointer = self._lib, self.pointer
        start = self._call(lib.symbolic_symcache_get_bytes, pointer)
        size = self._call(lib.symbolic_symcache_get_size, pointer)
        return bytes(self._ffi.buffer(start, size))

    def _text(self, getter: Any) -> str:
        text = self._call(getter, self.pointer)
        return _taken_text(self._ffi, self._lib.symbolic_str_free, text)

    def __del__(self) -> None:
        pointer, self.pointer = getattr(self, "pointer", None), None
        if pointer is not None:
            self._lib.symbolic_symcache_free(pointer)


@_once
def latest_version() -> int:
    """The SymCache format the installed symbolic writes."""
    return int(caller()(lowlevel().lib.symbolic_symcache_latest_version))


def build_symcache(dwarf_path: str, wanted: Callable[[str], bool]) -> SymCache | None:
    """The SymCache of the first object of the file at `dwarf_path` whose debug id
    `wanted` accepts; None when none is. SymbolicError when symbolic cannot read it."""
    low, call = lowlevel(), caller()
    lib, ffi = low.lib, low.ffi
    archive = call(lib.symbolic_archive_open, dwarf_path.encode())
    try:
        for index in range(call(lib.symbolic_archive_object_count, archive)):
            found = call(lib.symbolic_archive_get_object, archive, index)
            if found == ffi.NULL:
                continue
            try:
                debug_id = call(lib.symbolic_object_get_debug_id, found)
                if wanted(_taken_text(ffi, lib.symbolic_str_free, debug_id)):
                    # The table is built into memory of its own: it outlives the archive.
                    return SymCache(call(lib.symbolic_symcache_from_object, found))
            finally:
                lib.symbolic_object_free(found)
    finally:
        lib.symbolic_archive_free(archive)
    return None


def _install_bare_package() -> None:
    if PACKAGE in sys.modules:
        return  # the real one, or ours
    spec = _find_spec(PACKAGE)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        raise SymbolicLayoutError(_unexpected("it is not installed as a package"))
    package = type(sys)(PACKAGE)
    package.__spec__, package.__file__ = spec, spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__getattr__ = _completing(package, spec)  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package


def _find_spec(name: str) -> Any:
    """The spec `import name` would load, as importlib.util.find_spec finds it (each
    finder of sys.meta_path in turn), without the contextlib and warnings it imports."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = None if find_spec is None else find_spec(name, None)
        if spec is not None:
            return spec
    return None


def _completing(package: ModuleType, spec: Any) -> Any:
    """The bare package's `__getattr__` (PEP 562): a submodule asked for by name
    (`symbolic.debuginfo`, `from symbolic import exceptions`) is imported alone; any
    other name runs the real `__init__`, once."""

    def complete(name: str) -> Any:
        if not name.startswith("_"):
            import importlib

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
