"""The hidden verb `_download` (processes.DOWNLOAD_VERB): the helper's detached downloader,
a process of its own started by processes.py. Its stdio is /dev/null: the log is the only
place it reports to."""

from __future__ import annotations

import argparse
import contextlib
import os

from dsymfind import processes
from dsymfind.errors import DsymfindError
from dsymfind.helper import PRIVATE_UMASK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("uuid")
    parser.add_argument(processes.IGNORE_NEGATIVE_CACHE_FLAG, action="store_true")
    parser.add_argument(processes.COPY_EXECUTABLE_FLAG, action="store_true")
    parser.add_argument(processes.ANSWER_BY_FLAG, type=float)
    parser.add_argument(processes.TELL_FLAG, type=int)


def run(args: argparse.Namespace) -> int:
    return download(
        args.uuid,
        ignore_negative_cache=args.ignore_negative_cache,
        copy_executable=args.copy_executable,
        answer_by=args.answer_by,
        tell=args.tell_fd,
    )


def download(
    uuid: str,
    *,
    ignore_negative_cache: bool,
    copy_executable: bool,
    answer_by: float | None,
    tell: int | None = None,
) -> int:
    """`tell`: a descriptor closed once the record is final (the helper waiting on it)."""
    from dsymfind.fetch.downloader import run_download
    from dsymfind.uuids import normalize_uuid

    os.umask(PRIVATE_UMASK)  # it writes the cache, as the helper that started it would
    if tell is not None:
        with contextlib.suppress(OSError):  # not a descriptor: nobody to tell
            os.set_inheritable(tell, False)  # git and the like must not hold it open
    try:
        # Not commands/fetch.py's `normalized`: it would load the batch (a thread pool,
        # filelock) before the first request.
        checked = normalize_uuid(uuid)
        if checked is None:
            raise DsymfindError(f"not a UUID: {uuid!r}")
        return run_download(
            checked,
            os.environ,
            ignore_negative_cache=ignore_negative_cache,
            copy_executable=copy_executable,
            answer_by=answer_by,
            tell=tell,
        )
    except DsymfindError as exc:
        from dsymfind.log import configured_log_file, get_logger

        get_logger(configured_log_file(os.environ)).error("%s: %s", uuid, exc)
        raise
