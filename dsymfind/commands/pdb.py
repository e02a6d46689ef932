"""`dsymfind pdb`: the matching PDB of each PE file, found locally or fetched from stores."""

from __future__ import annotations

import argparse
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


DETAILS = "Prints one PDB path per FILE. Exit status 0 when all are found, 1 otherwise."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="a PE file (.exe, .dll)")
    parser.add_argument(
        "--symbol-path",
        metavar="PATH",
        help="srv*DOWNSTREAM*URL;cache*DIR;DIR... (default: symbol_path, then _NT_SYMBOL_PATH)",
    )
    parser.add_argument(
        "--ignore-negative-cache",
        action="store_true",
        help="ask the servers again, even those that recently lacked the PDB or failed",
    )


def run(args: argparse.Namespace) -> int:
    return pdb(
        args.files, symbol_path=args.symbol_path, ignore_negative_cache=args.ignore_negative_cache
    )


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
