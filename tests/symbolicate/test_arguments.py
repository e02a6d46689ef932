"""symbolicate/arguments.py reads the words main.py's parser would read the same way,
and leaves every other command line (help, mistakes, abbreviations) to that parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fixtures import folder_with, toml_list, write_config
from support.processes import modules_loaded_running
from support.symbolication import CRASHY_UUIDS, ips_report

from dsymfind import main
from dsymfind.main import main as run_main
from dsymfind.symbolicate import arguments

ARM = CRASHY_UUIDS["arm64"]


@pytest.mark.parametrize(
    "words",
    [
        ["symbolicate", "a.ips"],
        ["symbolicate", "a.ips", "b.ips", "-o", "out"],
        ["symbolicate", "--format", "json", "a.ips"],
        ["symbolicate", "--format=crash", "a.ips"],
        ["symbolicate", "--format", "ips", "--format", "json", "a.ips"],
        ["symbolicate", "a.ips", "--output=x=y"],
        ["symbolicate", "--output", "", "a.ips"],
        ["symbolicate", "--offline", "--all-threads", "a.ips", "--offline"],
        ["symbolicate", "--crashed-only", "a.ips", "--crashed-only"],
        ["symbolicate", "--ignore-negative-cache", "a.ips"],
        ["symbolicate", "--uuid", ARM, "--ignore-negative-cache", "--load-address", "0", "1"],
        ["symbolicate", ""],
        ["symbolicate", "--uuid", ARM, "--load-address", "0x1000", "0x1010", "4128"],
        ["symbolicate", "--uuid", ARM, "--uuid=other", "--load-address=0", "1"],
        ["symbolicate", "--image", "crashy", "--arch", "arm64", "--load-address", "0", "1"],
        ["symbolicate", "--arch=x86_64", "1"],
    ],
)
def test_plain_words_are_read_as_the_parser_reads_them(words: list[str]) -> None:
    read = arguments.read(words)

    assert read is not None
    assert vars(read) == vars(main.build_parser().parse_args(words))


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["status"],
        ["symbolicate"],
        ["symbolicate", "--help"],
        ["symbolicate", "-h", "a.ips"],
        ["symbolicate", "--format", "xml", "a.ips"],
        ["symbolicate", "--format", "xml", "--format", "json", "a.ips"],  # each is checked
        ["symbolicate", "--format="],
        ["symbolicate", "--uuid", ARM, "--image", "crashy", "1"],
        ["symbolicate", "--all-threads", "--crashed-only", "a.ips"],  # argparse refuses both
        ["symbolicate", "a.ips", "--offline", "b.ips"],
        ["symbolicate", "--off", "a.ips"],
        ["symbolicate", "--offline=yes", "a.ips"],
        ["symbolicate", "a.ips", "-o"],
        ["symbolicate", "-o", "-x", "a.ips"],
        ["symbolicate", "-oout", "a.ips"],
        ["symbolicate", "-o=out", "a.ips"],
        ["symbolicate", "--output=", "a.ips"],
        ["symbolicate", "--", "a.ips"],
        ["symbolicate", "-", "a.ips"],
        ["symbolicate", "--bogus", "a.ips"],
        ["symbolicate", "--version"],
        ["symbolicate", "--uuid", ARM, "--load-address", "0", "-16"],
    ],
)
def test_anything_else_is_left_to_the_parser(words: list[str]) -> None:
    assert arguments.read(words) is None


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--arch", "arm64", "a.ips"], "--load-address and --arch go with --uuid or --image"),
        (["--load-address", "0", "a.ips"], "--load-address and --arch go with --uuid or --image"),
        (["--uuid", ARM, "1"], "addresses need --load-address, where the image was loaded"),
    ],
)
def test_what_goes_together_is_checked_as_before(
    words: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert arguments.read(["symbolicate", *words]) is not None

    assert run_main(["symbolicate", *words]) == 1
    assert capsys.readouterr().err == f"dsymfind: error: {message}\n"


def test_a_plain_symbolicate_loads_no_argparse_or_importlib(
    tmp_path: Path, config_file: Path
) -> None:
    write_config(
        config_file,
        f"search_paths = {toml_list([folder_with(tmp_path / 'builds', 'crashy.dSYM')])}\n",
    )
    report = tmp_path / "crashy.ips"
    report.write_text(ips_report(ARM, "arm64", [0x338]))

    argv = ["symbolicate", "--offline", str(report)]
    modules_loaded_running(argv)  # reads the configuration (tomllib, with typing) once
    loaded = modules_loaded_running(argv)

    # importlib.util: bindings.py finds symbolic without it.
    unwanted = {"argparse", "dsymfind.argparsing", "gettext", "importlib.util"}
    assert unwanted & loaded == set()
