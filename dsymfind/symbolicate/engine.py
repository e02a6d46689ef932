"""Names for addresses: one image's SymCache, inline chains, demangling.

`symbolic` reads the DWARF (symcaches.py); its lookups are by image offset (the
address less the image's `__TEXT` address), innermost inlined callee first. Its Python
bindings do not demangle, so names go through `pydemumble` (C++, Rust, Swift); a name
that does not demangle is shown as it is.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from dsymfind.symbolicate import bindings
from dsymfind.symbolicate.addresses import lookup_offset
from dsymfind.symbolicate.model import Located

SymCache = bindings.SymCache


class SourceLocation(NamedTuple):
    """One entry of symbolic's lookup result, as its C interface gives it."""

    sym_addr: int  # the function's start, UNKNOWN_START for an inlined callee
    line: int  # 0 when unknown
    symbol: str  # as the DWARF names it: mangled
    full_path: str  # "" when unknown


# symbolic's function start of an inlined callee: it does not know one.
UNKNOWN_START = 0xFFFFFFFF


class ImageSymbols:
    """Lookups in one image's SymCache, each address resolved once."""

    def __init__(self, symcache: SymCache) -> None:
        self._locations = SourceLocations(symcache)
        self.arch: str = symcache.arch
        self._resolved: dict[int, list[Located]] = {}
        self._names: dict[str, str] = {}

    def frame(self, offset: int, position: int) -> list[Located]:
        """What a frame at `offset` (pc or return address, by `position`) was running."""
        target = lookup_offset(offset, position, self.arch)
        return [] if target is None else self.at(target)

    def at(self, offset: int) -> list[Located]:
        """The function at an image offset, innermost inlined callee first; [] for none."""
        found = self._resolved.get(offset)
        if found is None:
            found = self._resolved[offset] = self._lookup(offset)
        return found

    def _lookup(self, offset: int) -> list[Located]:
        chain = self._locations(offset)
        if not chain:
            return []
        # An inlined callee's code lies inside the function it was inlined into: its
        # offsets are measured from that function's start.
        outer = chain[-1].sym_addr
        start = None if outer == UNKNOWN_START else outer
        last = len(chain) - 1
        return [self._located(item, start, i < last) for i, item in enumerate(chain)]

    def _located(self, item: SourceLocation, start: int | None, inline: bool) -> Located:
        return Located(
            symbol=self._demangled(item.symbol),
            start=start,
            file=item.full_path or None,
            line=item.line or None,
            inline=inline,
        )

    def _demangled(self, name: str) -> str:
        shown = self._names.get(name)
        if shown is None:
            shown = self._names[name] = demangle(name)
        return shown


class SourceLocations:
    """`symcache.lookup(offset)`, innermost inlined callee first, at less than half its
    cost: symbolic's wrapper spends most of a lookup building objects and checking for
    errors around each of its four C calls (symbolic/symcache.py), which a report of many
    frames pays per frame. The C interface is symbolic's own, pinned below 14
    (pyproject.toml); tests/symbolicate/test_engine.py holds both readers to each other."""

    def __init__(self, symcache: SymCache) -> None:
        lowlevel = bindings.lowlevel()
        lib, ffi = lowlevel.lib, lowlevel.ffi

        self._symcache = symcache  # keeps the table mapped while its pointer is used
        self._pointer = symcache.pointer
        self._call = bindings.caller()
        self._lookup = lib.symbolic_symcache_lookup
        self._free_result, self._free_str = lib.symbolic_lookup_result_free, lib.symbolic_str_free
        self._unpack, self._address_of = ffi.unpack, ffi.addressof

    def __call__(self, offset: int) -> list[SourceLocation]:
        result = self._call(self._lookup, self._pointer, offset)  # raises symbolic's errors
        try:
            return [self._entry(result.items[i]) for i in range(result.len)]
        finally:
            self._free_result(self._address_of(result))

    def _entry(self, item: Any) -> SourceLocation:
        path = item.full_path
        try:
            full_path = self._text(path) if path.len else ""
        finally:
            if path.owned:  # the one string of an entry made for it (symbolic/symcache.py)
                self._free_str(self._address_of(path))
        return SourceLocation(item.sym_addr, item.line, self._text(item.symbol), full_path)

    def _text(self, text: Any) -> str:
        return self._unpack(text.data, text.len).decode("utf-8", "replace")  # type: ignore[no-any-return]


def demangle(name: str) -> str:
    """`name` demangled (C++ `_Z`, Rust `_R`/`_ZN..E`, Swift `$s`...); as it is otherwise."""
    import pydemumble

    try:
        shown = pydemumble.demangle(name)
    except Exception:  # noqa: BLE001 - any failure of the demangler leaves the name as it is
        return name
    return shown if isinstance(shown, str) and shown else name
