"""main.py's parser: usage errors and --help never list the hidden verbs the helper uses,
which still run."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import folder_with, toml_list, write_config
from support.processes import fail_line, run_cli
from support.symbolication import CRASHY_UUIDS, ips_report

from dsymfind import main


def test_an_unknown_verb_lists_no_hidden_verb() -> None:
    line = fail_line(run_cli("frobnicate"))

    assert "invalid choice: 'frobnicate'" in line
    assert "'fetch'" in line
    assert "_download" not in line
    assert "_refresh" not in line


def test_help_lists_no_hidden_verb() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    assert "_download" not in done.stdout
    assert "_refresh" not in done.stdout


def test_the_hidden_verbs_still_run(tmp_path: Path) -> None:
    # What processes.py starts: parsed and dispatched, with the usual error policy.
    line = fail_line(run_cli("_download", "not-a-uuid"))
    assert line == "dsymfind: error: not a UUID: 'not-a-uuid'"
    root = tmp_path / "symbols"
    root.mkdir()
    done = run_cli("_refresh", str(root))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_verb_is_parsed_by_its_own_parser_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # Importing every verb's module costs more than a quick command's own work.
    built: list[str] = []
    monkeypatch.setattr(main, "command", _recording(main.command, built))

    args = main.parse(["status", "--json"])

    assert (args.verb, args.json, built) == ("status", True, ["dsymfind.commands.status"])


def _recording(command: Callable[[str], Any], built: list[str]) -> Callable[[str], Any]:
    def imported(module: str) -> Any:
        built.append(module)
        return command(module)

    return imported


# The modules of dsymfind.commands a fresh interpreter has loaded after `dsymfind ARGV`.
COMMAND_MODULES_LOADED = """
import contextlib, io, sys
from dsymfind.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(out.getvalue())
print(sorted(m for m in sys.modules if m.startswith("dsymfind.commands.")))
"""


def test_help_imports_no_verb_and_lists_each_with_its_summary() -> None:
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_MODULES_LOADED, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    *help_lines, loaded = done.stdout.rstrip("\n").split("\n")
    # stdout.py is the one error policy's part, not a verb.
    assert loaded == "['dsymfind.commands.stdout']", done.stderr
    listed = " ".join(" ".join(help_lines).split())
    for name, (_, summary) in main.COMMANDS.items():
        assert f"{name} {summary}" in listed


@pytest.mark.parametrize("name", [*main.COMMANDS, *main.HIDDEN_COMMANDS])
def test_every_registered_verb_declares_its_arguments_and_its_work(name: str) -> None:
    module, _ = {**main.COMMANDS, **main.HIDDEN_COMMANDS}[name]
    verb = main.command(module)
    assert callable(verb.add_arguments)
    assert callable(verb.run)


def test_the_invalid_choice_list_is_the_public_verbs() -> None:
    line = fail_line(run_cli("frobnicate"))
    listed = line.split("(choose from ")[1].split(")")[0]
    assert listed == ", ".join(f"'{name}'" for name in main.COMMANDS)
    assert not set(main.HIDDEN_COMMANDS) & set(main.COMMANDS)


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--help"],
        ["frobnicate"],
        ["symbolicate", "--help"],
        ["symbolicate"],
        ["symbolicate", "--format", "xml", "report.ips"],
        ["publish", "dsyms", "--bogus"],
        ["status", "extra"],
        ["id", "--help", "--bogus"],
    ],
)
def test_usage_and_help_are_those_of_the_full_parser(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _outcome(lambda: main.build_parser().parse_args(words), capsys)
    assert _outcome(lambda: main.parse(words), capsys) == expected


def _outcome(
    parse: Callable[[], object], capsys: pytest.CaptureFixture[str]
) -> tuple[object, str, str]:
    try:
        result: object = vars(parse())
    except SystemExit as exc:
        result = exc.code
    captured = capsys.readouterr()
    return result, captured.out, captured.err


@pytest.mark.parametrize("columns", ["40", "123", "", "none"])
def test_help_is_as_wide_as_argparse_makes_it(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The width comes from $COLUMNS or the terminal as argparse's own formatter has it
    (80 when neither says), without importing shutil."""
    monkeypatch.setenv("COLUMNS", columns)
    parser = main.build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for each in [parser, *verbs.choices.values()]:
        stock = argparse.ArgumentParser._get_formatter(each)
        stock.add_text(each.description)
        ours = each._get_formatter()
        ours.add_text(each.description)
        assert ours.format_help() == stock.format_help(), each.prog


# Counts the collector's passes while main() runs, and whether it is back on after.
COUNT_COLLECTIONS = """
import contextlib, gc, io, sys
from dsymfind.main import main
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info))
with contextlib.redirect_stdout(io.StringIO()):
    status = main(sys.argv[1:])
print(status, len(passes), gc.isenabled())
"""


def test_symbolicate_runs_without_the_collector_from_its_first_import(
    tmp_path: Path, config_file: Path
) -> None:
    # The verb's imports made passes of their own when only the command turned it off.
    folder = folder_with(tmp_path / "builds", "crashy.dSYM")
    write_config(config_file, f"search_paths = {toml_list([folder])}\n")
    report = tmp_path / "crashy.ips"
    report.write_text(ips_report(CRASHY_UUIDS["arm64"], "arm64", [0x338, 0x380]))
    for argv in (["symbolicate", str(report)], ["symbolicate", "--all-thr", str(report)]):
        done = subprocess.run(
            [sys.executable, "-c", COUNT_COLLECTIONS, *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.stdout == "0 0 True\n", (argv, done.stderr)
