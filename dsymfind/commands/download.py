"""The hidden verb `_download` (processes.DOWNLOAD_VERB): the helper's detached downloader,
a process of its own started by processes.py, which runs fetch/downloader.py's main
rather than this parser; here for the same words typed at the command line."""

from __future__ import annotations

import argparse

from dsymfind import processes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("uuid")
    parser.add_argument(processes.IGNORE_NEGATIVE_CACHE_FLAG, action="store_true")
    parser.add_argument(processes.COPY_EXECUTABLE_FLAG, action="store_true")
    parser.add_argument(processes.ANSWER_BY_FLAG, type=float)
    parser.add_argument(processes.TELL_FLAG, type=int)


def run(args: argparse.Namespace) -> int:
    from dsymfind.fetch.downloader import download_detached

    return download_detached(
        args.uuid,
        ignore_negative_cache=args.ignore_negative_cache,
        copy_executable=args.copy_executable,
        answer_by=args.answer_by,
        tell=args.tell_fd,
    )
