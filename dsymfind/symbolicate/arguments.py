"""The words of `dsymfind symbolicate ...` read without argparse, when they are plain.

argparse with the gettext and locale modules it loads costs a run of the command more
than its lookups do. This reader takes only what it can read exactly as main.py's parser
does: the options spelled in full (`--format json`, `--format=json`, `-o FILE`), values
that do not begin with `-`, and the reports or addresses in one run. Anything else (help,
`--`, an abbreviation, a mistake) is left to that parser, so the result, every usage
message and --help stay its own; tests/symbolicate/test_arguments.py holds the two to
each other.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

VERB = "symbolicate"
# Each option taking a value, by its spellings, and where the value goes.
VALUE_OPTIONS = {
    "--format": "form",
    "-o": "output",
    "--output": "output",
    "--uuid": "uuid",
    "--image": "image",
    "--arch": "arch",
    "--load-address": "load_address",
}
# The option spellings whose value may follow an `=` in the same word (not `-o`).
LONG_VALUE_OPTIONS = frozenset(name for name in VALUE_OPTIONS if name.startswith("--"))
FLAGS = {
    "--offline": "offline",
    "--all-threads": "all_threads",
    "--crashed-only": "crashed_only",
    "--ignore-negative-cache": "ignore_negative_cache",
}
FORMS = ("ips", "crash", "metrickit", "json")


class SymbolicateWords:
    """What main.py's parser makes of the same words: the same names, the same values."""

    def __init__(self) -> None:
        self.verb = VERB
        self.inputs: list[str] = []
        self.form: str | None = None
        self.output: str | None = None
        self.offline = False
        self.ignore_negative_cache = False
        self.all_threads = False  # the default: still taken, scripts pass it
        self.crashed_only = False
        self.uuid: str | None = None
        self.image: str | None = None
        self.arch: str | None = None
        self.load_address: str | None = None


def read(words: Sequence[str]) -> SymbolicateWords | None:
    """`words` (the verb first) read; None when they are not `symbolicate` with only
    what this reader takes."""
    if not words or words[0] != VERB:
        return None
    found = SymbolicateWords()
    rest = list(words[1:])
    inputs_ended = False
    while rest:
        word = rest.pop(0)
        if not word.startswith("-"):
            if inputs_ended:
                return None  # reports on both sides of an option: argparse refuses them
            found.inputs.append(word)
            continue
        if found.inputs:
            inputs_ended = True
        if not _take_option(found, word, rest):
            return None
    return found if _complete(found) else None


def _take_option(found: SymbolicateWords, word: str, rest: list[str]) -> bool:
    """Whether `word` (and its value from `rest`) is an option read into `found`."""
    if word in FLAGS:
        setattr(found, FLAGS[word], True)
        return True
    name, equals, value = word.partition("=")
    if equals:
        if name not in LONG_VALUE_OPTIONS or not value:
            return False
    elif word in VALUE_OPTIONS and rest and not rest[0].startswith("-"):
        value = rest.pop(0)
    else:
        return False
    if VALUE_OPTIONS[name] == "form" and value not in FORMS:
        return False  # argparse checks each one given, not only the last
    setattr(found, VALUE_OPTIONS[name], value)
    return True


def _complete(found: SymbolicateWords) -> bool:
    """Whether argparse would take these values as they are (its own checks)."""
    both_images = found.uuid is not None and found.image is not None
    both_threads = found.all_threads and found.crashed_only
    return bool(found.inputs) and not both_images and not both_threads
