"""What README.md and docs/ tell a reader to run works with the dsymfind installed here.

Every `dsymfind VERB ...` the documents show (in a shell block or an inline code span) names
a verb and options that `dsymfind VERB --help` has; every `dsymForUUID ...` is answered
without an error; every script named exists and may be run; every relative link leads to a
file, and to a heading there when it names one. The CLI is asked as a process, never through
its modules, so the parsers can be reorganised without touching this file."""

from __future__ import annotations

import functools
import os
import re
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import run_cli, run_helper

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINKED = [*DOCUMENTS, ROOT / "SECURITY.md", ROOT / "BENCHMARKS.md"]

# A front door, not the manual: the manual lives in docs/.
README_MAX_LINES = 250

# What a newcomer runs first, on a fresh Debian machine; CI runs the second.
FIRST_COMMANDS = [
    "scripts/demo    # a demo symbol server on 127.0.0.1 with bundled real dSYMs: real lookups,"
    " a real crash report symbolicated, a build checked, reports grouped",
    "scripts/test    # the whole test suite, with lint and type checks",
]

SHELL_BLOCK = re.compile(r"^ *```(?:sh|bash|console|shell)\n(.*?)^ *```$", re.M | re.S)
INLINE = re.compile(r"`((?:dsymfind|dsymForUUID|scripts/)[^`]*)`")
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def shell_lines(text: str) -> Iterator[str]:
    """The commands of every shell block: `\\` continuations joined, heredoc bodies and
    output skipped (a block with `$ ` prompts holds commands only on those lines)."""
    for match in SHELL_BLOCK.finditer(text):
        lines = [line.strip() for line in match.group(1).splitlines()]
        prompted = any(line.startswith("$ ") for line in lines)
        ending = None
        pending = ""
        for line in lines:
            if ending is not None:
                ending = None if line == ending else ending
                continue
            if prompted and not pending:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            command, pending = pending + line, ""
            heredoc = HEREDOC.search(command)
            ending = heredoc.group(1) if heredoc else None
            yield command


def commands(text: str) -> Iterator[list[str]]:
    """Each simple command of the shell blocks and inline spans, as words, without the
    variable assignments before it."""
    pieces = [piece for line in shell_lines(text) for piece in re.split(r" \| | && |; ", line)]
    # A span with an escape (`dsymfind symc 1\n`, a file's magic) is data, not a command.
    pieces += [span for span in INLINE.findall(text) if "\\" not in span]
    for piece in pieces:
        words = shlex.split(piece, comments=True)
        while words and re.fullmatch(r"[A-Za-z_]\w*=\S*", words[0]):
            words.pop(0)
        if words:
            yield words


def documented() -> list[tuple[str, list[str]]]:
    return [(rel(doc), words) for doc in DOCUMENTS for words in commands(doc.read_text())]


@functools.cache
def help_text(*verb: str) -> str:
    done = run_cli(*verb, "--help")
    assert done.returncode == 0, (verb, done.stderr)
    return done.stdout


@functools.cache
def verbs() -> frozenset[str]:
    """The public verbs, as `dsymfind --help` lists them: an indented word opening its line,
    that has a `--help` of its own (a summary's wrapped last word has none)."""
    words = re.findall(r"^ {2,}([a-z][a-z-]*)(?: {2,}\S.*)?$", help_text(), re.M)
    listed = frozenset(w for w in words if run_cli(w, "--help").returncode == 0)
    assert {"install", "publish", "symbolicate"} <= listed, help_text()
    return listed


def options(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if re.match(r"-{1,2}[A-Za-z]", w)]


def assert_parses(where: str, words: list[str]) -> None:
    """`dsymfind VERB OPTION...`: the verb exists and has every option named."""
    rest = words[1:]
    if not rest or not re.fullmatch(r"[a-z]+", rest[0]):
        return  # `dsymfind --help`, `dsymfind COMMAND --help`
    verb = rest[0]
    assert verb in verbs(), f"{where}: {shlex.join(words)}: no verb {verb!r}"
    text = help_text(verb)
    for option in options(rest[1:]):
        found = re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)
        assert found, f"{where}: {shlex.join(words)}: `dsymfind {verb}` has no {option}"


def test_the_readme_starts_with_the_demo_and_the_whole_suite() -> None:
    text = README.read_text()
    first = SHELL_BLOCK.search(text)
    assert first is not None
    assert text[: first.start()].strip() == "# dsymfind"
    assert first.group(1).splitlines() == FIRST_COMMANDS
    for script in ("scripts/demo", "scripts/test"):
        assert os.access(ROOT / script, os.X_OK), script
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == "exec scripts/test"


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES


def test_every_dsymfind_command_shown_parses() -> None:
    shown = [(where, words) for where, words in documented() if words[0] == "dsymfind"]
    assert len(shown) > 50  # the extraction itself works: README alone shows dozens
    for where, words in shown:
        assert_parses(where, words)


def test_the_command_table_lists_every_verb_with_real_options() -> None:
    table = README.read_text().split("\n| command | what it does |\n", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (`[a-z].*?) \| .* \|$", table, re.M)
    named: set[str] = set()
    for cell in rows:
        for span in re.findall(r"`([^`]+)`", cell):
            words = span.replace("\\|", "|").split()
            named.add(words[0])
            assert_parses("README.md's command table", ["dsymfind", *words])
    assert named == verbs()


def test_every_helper_line_shown_is_answered_without_an_error() -> None:
    shown = {tuple(options(words[1:])) for _, words in documented() if words[0] == "dsymForUUID"}
    assert shown
    for flags in shown:
        run = run_helper(*flags, str(uuid.uuid4()).upper())
        assert run.plist == {}, (flags, run.plist)


def test_every_script_named_exists_and_runs() -> None:
    named = {w for _, words in documented() for w in words if re.match(r"scripts/\w", w)}
    assert {"scripts/demo", "scripts/test"} <= named
    for script in named:
        assert (ROOT / script).is_file() and os.access(ROOT / script, os.X_OK), script


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    text = re.sub(r"^ *```.*?^ *```$", "", document.read_text(), flags=re.M | re.S)
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


@pytest.mark.parametrize("document", LINKED, ids=rel)
def test_every_relative_link_leads_somewhere(document: Path) -> None:
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.is_file(), f"{rel(document)}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{rel(document)}: {target}"
