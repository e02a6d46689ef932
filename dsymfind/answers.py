"""Remembered answers: the helper's hot path.

Building an answer needs the Mach-O reader and the bundle's per-UUID plist (macholib,
plistlib: more than the interpreter's own start-up). Once built, an answer is kept in
`<cache>/answers/<UUIDHEX>` with the stat of every file it names or was read from, and
is served again only while all of them are unchanged and its source is still
configured. So a repeat lookup costs one small read and a few stats, and still never
names a path that no longer exists.
"""

from __future__ import annotations

import os

from dsymfind import atomic, debugsymbols
from dsymfind.uuids import uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    Answer = dict[str, str]
    # A marshal-able dict: format, source, answer, files (path, stamp) pairs.
    Record = dict[str, object]
    FileStamp = tuple[str, tuple[int, int, int] | None]

_FORMAT = 1
# The answer's values that name local files; DBGBuildSourcePath names the build machine's.
_LOCAL_PATH_KEYS = (
    debugsymbols.DSYM_PATH,
    debugsymbols.SYMBOL_RICH_EXECUTABLE,
    debugsymbols.SOURCE_PATH,
)


def recall(answers_dir: str, uuid: str, sources: Iterable[str]) -> tuple[Answer, str] | None:
    """The remembered answer and its source, if every file behind it is unchanged."""
    return check(atomic.read_marshal(os.path.join(answers_dir, uuid_hex(uuid))), sources)


def check(record: Any, sources: Iterable[str]) -> tuple[Answer, str] | None:
    """A record's answer and source while its source is configured and its files unchanged.

    Anything that is not such a record (missing, damaged, of another format) is None.
    """
    try:
        if record["format"] != _FORMAT or record["source"] not in sources:
            return None
        answer, source = record["answer"], record["source"]
        named = {answer[key] for key in _LOCAL_PATH_KEYS if key in answer}
        for path, stamp in record["files"]:
            # A file the answer names must exist: a record made while it vanished holds
            # None for it, which an unchanged (still missing) file would match.
            if _stamp(path) != stamp or (stamp is None and path in named):
                return None
    except (TypeError, KeyError, ValueError):
        return None
    if not isinstance(answer, dict) or not isinstance(source, str):
        return None
    return answer, source


def remember(
    answers_dir: str, uuid: str, answer: Answer, source: str, inputs: Iterable[str]
) -> None:
    """Keep an answer; `inputs` are the files it was built from besides those it names.

    Best effort: failing to remember only makes the next lookup slower.
    """
    keep(answers_dir, uuid, make_record(answer, source, inputs))


def keep(answers_dir: str, uuid: str, record: Record) -> None:
    """Remember a record made by make_record (best effort, as remember)."""
    atomic.write_marshal(os.path.join(answers_dir, uuid_hex(uuid)), record)


def make_record(answer: Answer, source: str, inputs: Iterable[str]) -> Record:
    """An answer with the stat of every file it names or was read from, as check() takes it."""
    files = [answer[key] for key in _LOCAL_PATH_KEYS if key in answer] + list(inputs)
    return {
        "format": _FORMAT,
        "source": source,
        "answer": answer,
        "files": [(path, _stamp(path)) for path in dict.fromkeys(files)],
    }


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
