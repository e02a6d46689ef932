"""main.py's parser: usage errors and --help never list the hidden verbs the helper uses,
which still run."""

from __future__ import annotations

from pathlib import Path

from support.processes import fail_line, run_cli


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
    # What spawn.py starts: parsed and dispatched, with the usual error policy.
    line = fail_line(run_cli("_download", "not-a-uuid"))
    assert line == "dsymfind: error: not a UUID: 'not-a-uuid'"
    root = tmp_path / "symbols"
    root.mkdir()
    done = run_cli("_refresh", str(root))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
