"""Names for addresses: one image's SymCache, inline chains, demangling.

`symbolic` reads the DWARF (symcaches.py); its lookups are by image offset (the
address less the image's `__TEXT` address), innermost inlined callee first. Its Python
bindings do not demangle, so names go through `pydemumble` (C++, Rust, Swift); a name
that does not demangle is shown as it is.
"""

from __future__ import annotations

from typing import NamedTuple

from dsymfind.symbolicate import bindings
from dsymfind.symbolicate.addresses import return_address_step

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


SymCache = bindings.SymCache


class Context(NamedTuple):
    """The source lines around a frame's line (symbolicate/context.py)."""

    first: int  # the number of lines[0] in its file
    lines: tuple[str, ...]  # without their line endings


class Located(NamedTuple):
    """One frame's worth of symbol: a function, or a callee inlined into the next one."""

    symbol: str  # demangled when it can be
    start: int | None  # the image offset of the function's start; None when unknown
    file: str | None  # the source path as the DWARF names it
    line: int | None
    inline: bool  # inlined into the Located that follows it
    context: Context | None = None  # with --source-context, when its file could be read
    # Named by the image's own symbol table, no dSYM: a function and offset, no file or
    # line (an Apple library; docs/system-symbols.md).
    symbol_table: bool = False


# symbolic's function start of an inlined callee: it does not know one.
UNKNOWN_START = 0xFFFFFFFF


class ImageSymbols:
    """Lookups in one image's SymCache, each address resolved once."""

    def __init__(self, symcache: SymCache, *, symbol_table: bool = False) -> None:
        """`symbol_table`: the table was built from the image's own file, not a dSYM."""
        self._locations = SourceLocations(symcache)
        self._symbol_table = symbol_table
        self.arch: str = symcache.arch
        self._step = return_address_step(self.arch)
        self._resolved: dict[int, list[Located]] = {}
        # Each symbol's name as shown, by its bytes in the table: decoded and demangled once.
        self._names: dict[bytes, str] = {}

    def frame(self, offset: int, position: int) -> list[Located]:
        """What a frame at `offset` (pc or return address, by `position`) was running."""
        # lookup_offset() and at() spelled out: this runs for every frame of every report.
        if position:
            step = self._step
            if offset < step:
                return []
            offset -= step
        found = self._resolved.get(offset)
        if found is None:
            found = self._resolved[offset] = self._lookup(offset)
        return found

    def at(self, offset: int) -> list[Located]:
        """The function at an image offset, innermost inlined callee first; [] for none."""
        found = self._resolved.get(offset)
        if found is None:
            found = self._resolved[offset] = self._lookup(offset)
        return found

    def _lookup(self, offset: int) -> list[Located]:
        return self._locations.located(
            offset, self._names, self._shown, symbol_table=self._symbol_table
        )

    def _shown(self, name: bytes) -> str:
        shown = self._names[name] = demangle(name.decode("utf-8", "replace"))
        return shown


class SourceLocations:
    """`symcache.lookup(offset)` as Located entries, innermost inlined callee first, at
    less than half its cost: symbolic's wrapper spends most of a lookup building objects
    and checking for errors around each of its four C calls (symbolic/symcache.py), which
    a report of many frames pays per frame. The C interface is symbolic's own, pinned
    below 14 (pyproject.toml); tests/symbolicate/test_engine.py holds both readers to
    each other."""

    def __init__(self, symcache: SymCache) -> None:
        lowlevel = bindings.lowlevel()
        lib, ffi = lowlevel.lib, lowlevel.ffi

        self._symcache = symcache  # keeps the table mapped while its pointer is used
        self._pointer = symcache.pointer
        self._call = bindings.caller()
        self._lookup = lib.symbolic_symcache_lookup
        self._free_result, self._free_str = lib.symbolic_lookup_result_free, lib.symbolic_str_free
        self._unpack, self._address_of = ffi.unpack, ffi.addressof

    def located(
        self,
        offset: int,
        names: dict[bytes, str],
        name_of: Callable[[bytes], str],
        *,
        symbol_table: bool = False,
    ) -> list[Located]:
        """The entries at `offset`, each name shown as `names` has its bytes in the table,
        else as `name_of` makes it (most names recur: each is decoded once); each marked
        `symbol_table` when the table was built from the image's own symbols."""
        # Called unchecked: symbolic records an error only when a call fails, and a failed
        # lookup returns no entries, which the checked call below then tells apart.
        result = self._lookup(self._pointer, offset)
        count = result.len
        if not count:
            self._free_result(self._address_of(result))
            checked = self._call(self._lookup, self._pointer, offset)  # raises symbolic's errors
            self._free_result(self._address_of(checked))
            return []
        unpack, address_of, free_str = self._unpack, self._address_of, self._free_str
        found = []
        try:
            items = result.items
            # An inlined callee's code lies inside the function it was inlined into: its
            # offsets are measured from that function's start.
            outer = items[count - 1].sym_addr
            start = None if outer == UNKNOWN_START else outer
            last = count - 1
            # One loop making the entries themselves: it runs for every distinct address.
            for index in range(count):
                item = items[index]
                path = item.full_path
                size = path.len
                full_path = unpack(path.data, size).decode("utf-8", "replace") if size else None
                if path.owned:  # the one string of an entry made for it (symbolic/symcache.py)
                    free_str(address_of(path))
                symbol = item.symbol
                name = unpack(symbol.data, symbol.len)
                shown = names.get(name) or name_of(name)
                found.append(
                    Located(
                        shown, start, full_path, item.line or None, index < last, None, symbol_table
                    )
                )
        finally:
            self._free_result(address_of(result))
        return found


# How every name the demangler knows begins: C++ and Rust `_Z`, Rust `_R`, Swift `$s`,
# `_$s` and the older `_T`, Microsoft's C++ `?`. A C name never does, and goes unread by
# the demangler (whose import alone costs a report of C a few milliseconds).
MANGLED_STARTS = ("_", "$", "?")


def demangle(name: str) -> str:
    """`name` demangled (C++ `_Z`, Rust `_R`/`_ZN..E`, Swift `$s`...); as it is otherwise."""
    if not name.startswith(MANGLED_STARTS):
        return name
    import pydemumble

    try:
        shown = pydemumble.demangle(name)
    except Exception:  # noqa: BLE001 - any failure of the demangler leaves the name as it is
        return name
    return shown if isinstance(shown, str) and shown else name
