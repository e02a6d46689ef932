"""Remembered answers: the helper's hot path.

Building an answer needs the Mach-O reader and the bundle's per-UUID plist (macholib,
plistlib: more than the interpreter's own start-up). Once built, an answer is kept in
`<cache>/answers/<UUIDHEX>` with the stat of every file it names or was read from, and
is served again only while all of them are unchanged and its origin is still
configured. So a repeat lookup costs one small read and a few stats, and still never
names a path that no longer exists. Nor one that lies where no answer may point: which
paths an answer may carry is debugsymbols.py's policy, asked again at every recall.
"""

from dsymfind import _bare_os, atomic, debugsymbols
from dsymfind.debugsymbols import LOCAL_PATH_KEYS, stat_or_none
from dsymfind.uuids import uuid_hex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from dsymfind.debugsymbols import Answer

    # A marshal-able dict: format, source (the answer's origin), answer, files (path,
    # stamp) pairs.
    Record = dict[str, object]

_FORMAT = 1


def recall(answers_dir: str, uuid: str, origins: "Iterable[str]") -> "tuple[Answer, str] | None":
    """The remembered answer and its origin, if every file behind it is unchanged."""
    record = atomic.read_marshal(_bare_os.join(answers_dir, uuid_hex(uuid)))
    # answers/ sits in the cache's root (paths.py).
    return check(record, origins, uuid=uuid, cache_root=_bare_os.dirname(answers_dir))


def check(
    record: "Any",
    origins: "Iterable[str]",
    *,
    uuid: str | None = None,
    cache_root: str | None = None,
) -> "tuple[Answer, str] | None":
    """A record's answer and origin while its origin is configured, its files unchanged,
    and the paths it names where they may be (see debugsymbols.misplaced).

    Anything that is not such a record (missing, damaged, of another format) is None.
    Without `uuid` and `cache_root` only search-path answers can be placed (their shards).
    """
    try:
        if record["format"] != _FORMAT or record["source"] not in origins:
            return None
        answer, origin = record["answer"], record["source"]
        named = {answer[key] for key in LOCAL_PATH_KEYS if key in answer}
        seen: dict[str, _bare_os.stat_result | None] = {}
        for path, stamp in record["files"]:
            seen[path] = stat_or_none(path)
            # A file the answer names must exist: a record made while it vanished holds
            # None for it, which an unchanged (still missing) file would match.
            if _stamp_of(seen[path]) != stamp or (stamp is None and path in named):
                return None
        if not named <= seen.keys():
            return None  # a file it names unstamped: nothing would tell that it changed
    except (TypeError, KeyError, ValueError):
        return None
    if not isinstance(answer, dict) or not isinstance(origin, str):
        return None
    if (
        debugsymbols.misplaced(answer, origin, uuid=uuid, cache_root=cache_root, seen=seen)
        is not None
    ):
        return None  # a poisoned answer is a miss: the lookup behind it answers instead
    return answer, origin


def missing(answer: "Answer") -> str | None:
    """The first local path `answer` names that does not exist now; None when all do.
    A stat each: the check made right before an answer read a while ago is written."""
    for key in LOCAL_PATH_KEYS:
        path = answer.get(key)
        if path is not None and stat_or_none(path) is None:
            return path
    return None


def remember(
    answers_dir: str, uuid: str, answer: "Answer", origin: str, inputs: "Iterable[str]"
) -> None:
    """Keep an answer; `inputs` are the files it was built from besides those it names.

    Best effort: failing to remember only makes the next lookup slower.
    """
    keep(answers_dir, uuid, make_record(answer, origin, inputs))


def keep(answers_dir: str, uuid: str, record: "Record") -> None:
    """Remember a record made by make_record (best effort, as remember)."""
    atomic.write_marshal(_bare_os.join(answers_dir, uuid_hex(uuid)), record)


def make_record(answer: "Answer", origin: str, inputs: "Iterable[str]") -> "Record":
    """An answer with the stat of every file it names or was read from, as check() takes it."""
    files = [answer[key] for key in LOCAL_PATH_KEYS if key in answer] + list(inputs)
    return {
        "format": _FORMAT,
        "source": origin,
        "answer": answer,
        "files": [(path, _stamp(path)) for path in dict.fromkeys(files)],
    }


def _stamp(path: str) -> tuple[int, int, int] | None:
    return _stamp_of(stat_or_none(path))


def _stamp_of(st: _bare_os.stat_result | None) -> tuple[int, int, int] | None:
    return None if st is None else (st.st_mtime_ns, st.st_size, st.st_ino)
