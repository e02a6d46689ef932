"""Parse a Windows debugger symbol path (`_NT_SYMBOL_PATH` syntax) into what to search.

`;` separates elements, searched in order (Microsoft's "Symbol path for Windows
debuggers"):

- `srv*A*B*URL`: a chain of symbol stores. The leftmost are local downstream stores;
  a file found further right is copied into every store to its left. An empty store
  (`srv**URL`) or a lone `srv*URL` means the default downstream store.
  `symsrv*symsrv.dll*...` is the older spelling of the same thing.
- `cache*DIR`: whatever the elements to its right find is also kept in DIR, a store;
  `cache*` alone uses the default downstream store.
- anything else: a plain folder, searched for the file by name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from dsymfind.errors import DsymfindError
from dsymfind.stores import KINDS, scheme_of

SEPARATOR = ";"
SERVER_PREFIXES = ("srv*", "symsrv*symsrv.dll*")
CACHE_PREFIX = "cache*"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class SymbolPathError(DsymfindError):
    """The symbol path cannot be understood; the message quotes the element."""


@dataclass(frozen=True)
class Folder:
    """A plain folder: the PDB is looked for directly in it, by name."""

    path: str


@dataclass(frozen=True)
class Cache:
    """A store that keeps what the elements to its right find."""

    path: str


@dataclass(frozen=True)
class Chain:
    """`srv*...`: stores searched left to right; all but the last are local folders."""

    stores: tuple[str, ...]

    @property
    def url(self) -> str | None:
        """The symbol server at the end of the chain, if it ends in one."""
        last = self.stores[-1]
        return last if is_url(last) else None

    @property
    def local_stores(self) -> tuple[str, ...]:
        return self.stores[:-1] if self.url else self.stores


Element = Folder | Cache | Chain


def is_url(text: str) -> bool:
    """Anything with a scheme: a server, or a mistake to name (never a local folder)."""
    return _URL.match(text) is not None


def parse(text: str, *, default_store: str) -> list[Element]:
    """The elements of `text` in search order; raises SymbolPathError for a bad element."""
    elements: list[Element] = []
    for raw in text.split(SEPARATOR):
        item = raw.strip()
        if item:
            elements.append(_element(item, default_store))
    return elements


def _element(item: str, default_store: str) -> Element:
    lowered = item.lower()
    for prefix in SERVER_PREFIXES:
        if lowered.startswith(prefix):
            return _chain(item, item[len(prefix) :], default_store)
    if lowered.startswith(CACHE_PREFIX):
        folder = item[len(CACHE_PREFIX) :]
        if "*" in folder or is_url(folder):
            raise SymbolPathError(f"symbol path element {item!r}: cache* takes one local folder")
        return Cache(_local(folder) if folder else default_store)
    if "*" in item:
        keyword = item.split("*", 1)[0]
        raise SymbolPathError(
            f"symbol path element {item!r}: unknown keyword {keyword!r} (srv*, cache* or a folder)"
        )
    if is_url(item):
        raise SymbolPathError(f"symbol path element {item!r}: a symbol server is given as srv*URL")
    return Folder(_local(item))


def _chain(item: str, body: str, default_store: str) -> Chain:
    parts = [part.strip() for part in body.split("*")]
    if not any(parts):
        raise SymbolPathError(f"symbol path element {item!r}: names no store and no server")
    last = parts[-1]
    if is_url(last) and scheme_of(last) not in KINDS:
        raise SymbolPathError(
            f"symbol path element {item!r}: {scheme_of(last)}: servers are not supported "
            f"(use {', '.join(sorted(KINDS))})"
        )
    stores = [_local(part) if part else default_store for part in parts]
    if any(is_url(store) for store in stores[:-1]):
        raise SymbolPathError(
            f"symbol path element {item!r}: a symbol server URL must end its srv* chain"
        )
    if len(stores) == 1 and is_url(stores[0]):
        stores.insert(0, default_store)  # srv*URL: the default downstream store
    return Chain(tuple(stores))


def _local(part: str) -> str:
    if is_url(part):
        return part
    return os.path.abspath(os.path.expanduser(part))
