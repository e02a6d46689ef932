"""The helper's background work, each a process of its own started by processes.py under a
hidden verb: the detached downloader, and the walk of a search path that did not fit a
helper's deadline. Their stdio is /dev/null: the log is the only place they report to."""

from __future__ import annotations

import os

from dsymfind.errors import DsymfindError
from dsymfind.helper import PRIVATE_UMASK


def download(
    uuid: str, *, ignore_negative_cache: bool, copy_executable: bool, answer_by: float | None
) -> int:
    from dsymfind.commands.fetch import normalized
    from dsymfind.fetch.downloader import run_download

    os.umask(PRIVATE_UMASK)  # it writes the cache, as the helper that started it would
    try:
        (checked,) = normalized([uuid])
        return run_download(
            checked,
            os.environ,
            ignore_negative_cache=ignore_negative_cache,
            copy_executable=copy_executable,
            answer_by=answer_by,
        )
    except DsymfindError as exc:
        from dsymfind.log import configured_log_file, get_logger

        get_logger(configured_log_file(os.environ)).error("%s: %s", uuid, exc)
        raise


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
