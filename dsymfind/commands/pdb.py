"""`dsymfind pdb`: the matching PDB of each PE file, found locally or fetched from stores."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from dsymfind import settings
from dsymfind.errors import DsymfindError
from dsymfind.fetch import pdb_search
from dsymfind.paths import CachePaths
from dsymfind.stores import symbol_path
from dsymfind.windows import pe

# What Windows debuggers read when no symbol path is given.
SYMBOL_PATH_ENV = "_NT_SYMBOL_PATH"


def pdb(
    files: Sequence[str], *, symbol_path: str | None, ignore_negative_cache: bool = False
) -> int:
    """Print one PDB path per file; exit 1 when any is missing (one stderr line each)."""
    effective = settings.load(os.environ)
    elements = _elements(symbol_path, effective["symbol_path"], effective["cache_dir"])
    missed = False
    with pdb_search.Search(
        effective, elements, ignore_negative_cache=ignore_negative_cache
    ) as search:
        for path in files:
            try:
                codeview = pe.read_identity(path).require_codeview()
                found = search.find(path, codeview)
            except DsymfindError as exc:  # this file's miss; the others are still looked up
                print(f"dsymfind: {exc}", file=sys.stderr)
                missed = True
                continue
            print(found, flush=True)
    return 1 if missed else 0


def _elements(given: str | None, configured: str, cache_dir: str) -> list[symbol_path.Element]:
    """--symbol-path, else the config's symbol_path, else $_NT_SYMBOL_PATH."""
    text = given if given is not None else configured or os.environ.get(SYMBOL_PATH_ENV, "")
    return symbol_path.parse(text, default_store=CachePaths(cache_dir).pdb_store)
