"""The hidden verb `_refresh` (processes.REFRESH_VERB): the walk of a search path that did
not fit a helper's deadline, a process of its own started by processes.py. Its stdio is
/dev/null: the log is the only place it reports to."""

from __future__ import annotations

import argparse
import os

from dsymfind.paths import PRIVATE_UMASK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root")


def run(args: argparse.Namespace) -> int:
    return refresh_search_path(args.root)


def refresh_search_path(root: str) -> int:
    """Walk the search path `root` and keep its answers, unless another walker is at it."""
    from dsymfind import search_paths, settings
    from dsymfind.local_lookup import search_origin
    from dsymfind.paths import CachePaths

    os.umask(PRIVATE_UMASK)
    cache = CachePaths(settings.load(os.environ)["cache_dir"])
    held = search_paths.walker_lock(cache.catalogs, root)
    if held is None:
        return 0
    try:
        catalog = search_paths.SearchCatalog(cache.catalogs, root)
        catalog.refresh()
        catalog.write_answers(search_origin(root))
    finally:
        os.close(held)
    return 0
