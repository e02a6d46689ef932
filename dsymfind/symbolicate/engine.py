"""Names for addresses: one image's SymCache, inline chains, demangling.

`symbolic` reads the DWARF (symcaches.py); its lookups are by image offset (the
address less the image's `__TEXT` address), innermost inlined callee first. Its Python
bindings do not demangle, so names go through `pydemumble` (C++, Rust, Swift); a name
that does not demangle is shown as it is.
"""

from __future__ import annotations

from dsymfind.records import Record
from dsymfind.symbolicate import bindings
from dsymfind.symbolicate.addresses import lookup_offset
from dsymfind.symbolicate.model import Located

SymCache = bindings.SymCache


class SourceLocation(Record):
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
        # Each symbol's name as shown, by its bytes in the table: decoded and demangled once.
        self._names: dict[bytes, str] = {}

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
        chain = self._locations.raw(offset)
        if not chain:
            return []
        # An inlined callee's code lies inside the function it was inlined into: its
        # offsets are measured from that function's start.
        outer = chain[-1][0]
        start = None if outer == UNKNOWN_START else outer
        last = len(chain) - 1
        names = self._names
        # Built inline, not by a helper per entry: this runs for every distinct address.
        return [
            Located(
                names.get(name) or self._shown(name),
                start,
                full_path or None,
                line or None,
                i < last,
            )
            for i, (_, line, name, full_path) in enumerate(chain)
        ]

    def _shown(self, name: bytes) -> str:
        shown = self._names[name] = demangle(name.decode("utf-8", "replace"))
        return shown


# One entry of symbolic's lookup result with its name as the table's bytes.
RawLocation = tuple[int, int, bytes, str]


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
        return [
            SourceLocation(start, line, name.decode("utf-8", "replace"), path)
            for start, line, name, path in self.raw(offset)
        ]

    def raw(self, offset: int) -> list[RawLocation]:
        """The entries at `offset` with each name undecoded: most names recur, and are
        decoded once by their bytes."""
        # Called unchecked: symbolic records an error only when a call fails, and a failed
        # lookup returns no entries, which the checked call below then tells apart.
        result = self._lookup(self._pointer, offset)
        count = result.len
        if not count:
            self._free_result(self._address_of(result))
            self._call(self._lookup, self._pointer, offset)  # raises symbolic's errors
            return []
        unpack, address_of, free_str = self._unpack, self._address_of, self._free_str
        found = []
        try:
            items = result.items
            # One loop with no call of ours in it: it runs for every distinct address.
            for index in range(count):
                item = items[index]
                path = item.full_path
                size = path.len
                full_path = unpack(path.data, size).decode("utf-8", "replace") if size else ""
                if path.owned:  # the one string of an entry made for it (symbolic/symcache.py)
                    free_str(address_of(path))
                symbol = item.symbol
                found.append((item.sym_addr, item.line, unpack(symbol.data, symbol.len), full_path))
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
