"""Names for addresses: one image's SymCache, inline chains, demangling.

`symbolic` reads the DWARF (symcaches.py); its lookups are by image offset (the
address less the image's `__TEXT` address), innermost inlined callee first. Its Python
bindings do not demangle, so names go through `pydemumble` (C++, Rust, Swift); a name
that does not demangle is shown as it is.
"""

from __future__ import annotations

from typing import Any

from dsymfind.symbolicate.addresses import lookup_offset
from dsymfind.symbolicate.model import Located

# symbolic's objects (SymCache, SourceLocation) are typed Any here: its bindings are not
# annotated.
SymCache = Any
SourceLocation = Any

# symbolic's function start of an inlined callee: it does not know one.
UNKNOWN_START = 0xFFFFFFFF


class ImageSymbols:
    """Lookups in one image's SymCache, each address resolved once."""

    def __init__(self, symcache: SymCache) -> None:
        self._symcache = symcache
        self.arch = symcache.arch
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
        chain = self._symcache.lookup(offset)
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


def demangle(name: str) -> str:
    """`name` demangled (C++ `_Z`, Rust `_R`/`_ZN..E`, Swift `$s`...); as it is otherwise."""
    import pydemumble

    try:
        shown = pydemumble.demangle(name)
    except Exception:  # noqa: BLE001 - any failure of the demangler leaves the name as it is
        return name
    return shown if isinstance(shown, str) and shown else name
