"""Every bad configuration value is named, in the file (or variable) and key, before any
lookup uses it: never an internal error later in the downloader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import HELLO_UUID, write_config
from support.processes import run_cli, run_helper
from support.served import HELLO_DWARF, url_path

SERVER = "[[servers]]\nlayout = 'native'\n"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "download_timeout = nan\n",
            "download_timeout: expected a number of seconds >= 0, got nan",
        ),
        (
            "download_timeout = inf\n",
            "download_timeout: expected a number of seconds >= 0, got inf",
        ),
        ("timeout = nan\n", "timeout: expected a number of seconds, got nan"),
        ("negative_cache_ttl = -inf\n", "negative_cache_ttl: expected a number of seconds"),
        ("server_backoff = inf\n", "server_backoff: expected a number of seconds"),
        ("max_unused_age = inf\n", "max_unused_age: expected a duration"),
        (
            SERVER + "url = 'http://h:99999/'\n",
            "servers[0].url: 'http://h:99999/' is not a valid URL",
        ),
        (SERVER + "url = 'http://h:abc/'\n", "servers[0].url: 'http://h:abc/' is not a valid URL"),
        (SERVER + "url = 'http://[::1/'\n", "servers[0].url: 'http://[::1/' is not a valid URL"),
        (
            SERVER + "url = 'ftp://h/'\n",
            # The kinds sort by scheme: the last of them, whatever kinds come before.
            "s3://BUCKET/PREFIX/ or a folder path), got 'ftp://h/'",
        ),
        (SERVER + "url = 'file://otherhost/x'\n", "a file:// URL names a folder on this machine"),
        ("x = " + "[" * 900 + "]" * 900 + "\n", "not valid TOML: nested too deeply"),
        (
            "[[servers]]\nurl = 'http://h/'\nlayout = 'template'\ntemplate = '{UID}.zip'\n",
            "servers[0].template: '{UID}.zip' has no placeholder",
        ),
        (
            "[[servers]]\nurl = 'http://h/'\nlayout = 'template'\ntemplate = '{UUID}/{UID}'\n",
            "has an unknown placeholder",
        ),
        (
            "[[servers]]\nurl = 'http://h/'\nlayout = 'template'\ntemplate = 'fixed.zip'\n",
            "has no placeholder",
        ),
        (SERVER + "url = 'http://h/'\nheaders = { X-Token = 'é' }\n", "servers[0].headers.X-Token"),
        (SERVER + "url = 'http://h/'\nheaders = { 'Bad Name' = 'x' }\n", "is not a header name"),
        ("symbol_path = 'srv*'\n", "symbol_path: symbol path element 'srv*': names no store"),
        ("symbol_path = 'srv*ftp://x'\n", "ftp: servers are not supported"),
    ],
)
def test_a_bad_value_is_one_line_naming_file_and_key(
    text: str, fragment: str, config_file: Path
) -> None:
    write_config(config_file, text)
    done = run_cli("config")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"dsymfind: error: {config_file}: ")
    assert fragment in line
    assert "internal error" not in line
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert fragment in answer["DBGError"]


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("DSYMFIND_SERVERS", "a=http://h/,b=http://i/", "separate servers with spaces"),
        ("DSYMFIND_SERVERS", "native=http://h:99999/", "is not a valid URL"),
        (
            "DSYMFIND_CACHE_DIR",
            "relative/cache",
            "environment DSYMFIND_CACHE_DIR: 'relative/cache'",
        ),
    ],
)
def test_a_bad_environment_variable_is_named(variable: str, value: str, fragment: str) -> None:
    done = run_cli("config", env={**os.environ, variable: value})
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert variable in line and fragment in line


def test_a_header_value_from_the_environment_that_http_cannot_carry_is_named(
    config_file: Path,
) -> None:
    write_config(
        config_file,
        "timeout = 5\n[[servers]]\nurl = 'http://127.0.0.1:9/'\nlayout = 'native'\n"
        "headers = { Authorization = '${TOKEN}' }\n",
    )
    answer = run_helper(HELLO_UUID, env={**os.environ, "TOKEN": "é"}).entry(HELLO_UUID)
    assert "header Authorization: 'é' cannot be sent in an HTTP header" in answer["DBGError"]


def test_a_folder_is_a_server_too(config_file: Path, tmp_path: Path) -> None:
    write_config(config_file, f"[[servers]]\nurl = 'file://{tmp_path}/'\nlayout = 'native'\n")
    assert run_cli("config").returncode == 0
    write_config(config_file, f"[[servers]]\nurl = '{tmp_path}'\nlayout = 'native'\n")
    assert run_cli("config").returncode == 0


def test_a_config_file_named_by_the_environment_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "typo.toml"
    env = {**os.environ, "DSYMFIND_CONFIG": str(missing)}
    expected = f"environment DSYMFIND_CONFIG: {missing} does not exist"
    # Twice each: the second answer comes from the settings snapshot, which must keep the error.
    for _ in range(2):
        for verb in ("config", "doctor"):
            done = run_cli(verb, env=env)
            assert done.returncode == 1
            assert expected in done.stderr if verb == "config" else expected in done.stdout
        answer = run_helper(HELLO_UUID, env=env).entry(HELLO_UUID)
        assert expected in answer["DBGError"]
    write_config(missing, "timeout = 5\n")
    assert run_cli("config", env=env).returncode == 0


def test_a_misspelt_server_key_stops_every_lookup_before_the_server_is_asked(
    config_file: Path, server: ss.SymbolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`header` for `headers`: ignored, it would send every request without its token, and
    the user would see only the store's 401 (or, worse, another tenant's public answers)."""
    monkeypatch.setenv("SYMBOLS_TOKEN", "s3cr3t")
    server.route(url_path(HELLO_UUID), ss.require_auth("Bearer s3cr3t", ss.body(HELLO_DWARF)))
    write_config(
        config_file,
        f"[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        "header = { Authorization = 'Bearer ${SYMBOLS_TOKEN}' }\n",
    )
    fragment = "servers[0]: unknown key 'header' (known: name, url, layout, casing, headers"

    done = run_cli("fetch", HELLO_UUID)
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert server.requests == []
    assert done.returncode == 1
    assert done.stderr.startswith(f"dsymfind: error: {config_file}: {fragment}"), done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert fragment in answer["DBGError"]
