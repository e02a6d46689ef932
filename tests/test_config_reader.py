"""Configuration: the TOML file, the environment, DebugSymbols' preferences, `dsymfind config`."""

from __future__ import annotations

import json
import os
import plistlib
from pathlib import Path

import pytest
from support.fixtures import write_config
from support.plists import POISONS
from support.processes import run_cli

from dsymfind import config_reader, paths, settings
from dsymfind.errors import ConfigError


def test_defaults_without_a_config_file(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(settings.RESIDENT_ENV)  # the suite's own override
    current = settings.load(os.environ)
    assert current["cache_dir"] == str(isolated_home / ".cache" / "dsymfind")
    assert current["timeout"] == 10.0
    assert current["servers"] == []
    assert current["resident_downloader"] == config_reader.DEFAULT_RESIDENT_DOWNLOADER
    assert set(current["origins"].values()) == {"default"}


def test_file_values_and_their_origin(config_file: Path, tmp_path: Path) -> None:
    write_config(config_file, f"timeout = 2.5\nsearch_paths = ['~/syms', '{tmp_path}']\n")
    current = settings.load(os.environ)
    assert current["timeout"] == 2.5
    assert current["search_paths"] == [os.path.expanduser("~/syms"), str(tmp_path)]
    assert current["origins"]["timeout"] == f"config file {config_file}"


def test_environment_overrides_cache_dir(
    config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(config_file, "cache_dir = '/from/file'\n")
    monkeypatch.setenv("DSYMFIND_CACHE_DIR", str(tmp_path / "env-cache"))
    current = settings.load(os.environ)
    assert current["cache_dir"] == str(tmp_path / "env-cache")
    assert "DSYMFIND_CACHE_DIR" in current["origins"]["cache_dir"]


def test_snapshot_follows_edits_of_the_file(config_file: Path) -> None:
    write_config(config_file, "timeout = 3\n")
    assert settings.load(os.environ)["timeout"] == 3.0
    write_config(config_file, "timeout = 4\n")
    os.utime(config_file, ns=(1, 1))  # even with an old mtime: size and ctime differ
    assert settings.load(os.environ)["timeout"] == 4.0


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("timeout = 0\n", "timeout"),
        ("timeout = true\n", "timeout"),
        ("cache_dir = 'relative/path'\n", "not an absolute path"),
        ("search_paths = 5\n", "search_paths"),
        ("unknown_key = 1\n", "unknown key 'unknown_key'"),
        ("max_download_bytes = '12 parsecs'\n", "max_download_bytes"),
        (
            "[[servers]]\nurl = 'ftp://x/'\nlayout = 'ssqp'\n",
            "http://HOST/PATH/, https://HOST/PATH/, s3://BUCKET/PREFIX/",
        ),
        ("[[servers]]\nurl = 'https://x/'\nlayout = 'nope'\n", "expected one of"),
        ("[[servers]]\nurl = 'https://x/'\nlayout = 'template'\n", "template"),
        ("[[servers]]\nurl = 'https://x/'\nlayout = 'ssqp'\ncasing = 'odd'\n", "casing"),
        ("[[servers]]\nurl = 'https://x/'\nlayout = 'ssqp'\ntoken = 'x'\n", "unknown key 'token'"),
        ("= broken\n", "not valid TOML"),
    ],
)
def test_bad_values_name_the_file_and_key(config_file: Path, text: str, fragment: str) -> None:
    write_config(config_file, text)
    with pytest.raises(ConfigError, match=str(config_file)) as caught:
        settings.load(os.environ)
    assert fragment in str(caught.value)


def test_servers_from_the_file(config_file: Path) -> None:
    write_config(
        config_file,
        "max_download_bytes = '512MiB'\n"
        "[[servers]]\nurl = 'https://symbols.example/ssqp'\nlayout = 'ssqp'\ncasing = 'lower'\n"
        "headers = { Authorization = 'Bearer ${TOKEN}' }\n"
        "[[servers]]\nname = 'zips'\nurl = 'https://cdn.example/'\nlayout = 'template'\n"
        "template = 'dsyms/{UUID}.dSYM.zip'\nallow_scripts = true\n",
    )
    current = settings.load(os.environ)
    first, second = current["servers"]
    assert current["max_download_bytes"] == 512 << 20
    assert (first["name"], first["layout"], first["casing"]) == ("symbols.example", "ssqp", "lower")
    assert first["headers"] == {"Authorization": "Bearer ${TOKEN}"}  # expanded only per request
    assert (second["name"], second["template"], second["allow_scripts"]) == (
        "zips",
        "dsyms/{UUID}.dSYM.zip",
        True,
    )


def test_servers_from_the_environment_replace_the_file(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(config_file, "[[servers]]\nurl = 'https://a.example/'\nlayout = 'ssqp'\n")
    monkeypatch.setenv(
        "DSYMFIND_SERVERS", "native=http://127.0.0.1:1/t template=http://127.0.0.1:1/{UUID}.zip"
    )
    servers = settings.load(os.environ)["servers"]
    assert [(s["layout"], s["url"]) for s in servers] == [
        ("native", "http://127.0.0.1:1/t"),
        ("template", "http://127.0.0.1:1/{UUID}.zip"),
    ]
    monkeypatch.setenv("DSYMFIND_SERVERS", "no-equals-sign")
    with pytest.raises(ConfigError, match="LAYOUT=URL"):
        settings.load(os.environ)


def test_debugsymbols_preferences_string_or_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, machine = tmp_path / "user.plist", tmp_path / "machine.plist"
    user.write_bytes(plistlib.dumps({"DBGFileMappedPaths": "~/uuids"}, fmt=plistlib.FMT_BINARY))
    machine.write_bytes(
        plistlib.dumps({"DBGFileMappedPaths": ["/ignored"], "DBGSearchPaths": ["/a", "/b", 7]})
    )
    monkeypatch.setattr(paths, "debugsymbols_prefs", lambda env: [str(user), str(machine)])
    mapped, search = config_reader.read_debugsymbols(os.environ)
    assert mapped == [os.path.expanduser("~/uuids")]
    assert search == ["/a", "/b"]


@pytest.mark.parametrize("poison", ["date", "base64", "not-text-codec", "null"])
def test_unreadable_debugsymbols_preferences_are_a_config_error_naming_them(
    poison: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user.plist"
    user.write_bytes(POISONS[poison])
    monkeypatch.setattr(paths, "debugsymbols_prefs", lambda env: [str(user)])
    with pytest.raises(ConfigError) as refused:
        config_reader.read_debugsymbols(os.environ)
    said = str(refused.value)
    assert said.startswith(f"{user}: unreadable DebugSymbols preferences ("), said
    assert "\n" not in said


def test_config_command_shows_values_and_origins(config_file: Path) -> None:
    write_config(config_file, "timeout = 7\n")
    done = run_cli("config")
    assert done.returncode == 0, done.stderr
    assert f"timeout = 7.0  # config file {config_file}" in done.stdout
    as_json = json.loads(run_cli("config", "--json").stdout)
    assert as_json["timeout"] == 7.0


def test_config_command_bad_file_is_one_stderr_line(config_file: Path) -> None:
    write_config(config_file, "timeout = -1\n")
    done = run_cli("config")
    assert done.returncode == 1
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("dsymfind: error: ")


def test_config_output_masks_secrets_but_shows_references(config_file: Path) -> None:
    write_config(
        config_file,
        "[[servers]]\nurl = 'https://ci:hunter2@symbols.example/store?sig=qwerty'\n"
        "layout = 'ssqp'\n"
        "headers = { Authorization = 'Bearer s3cr3t-t0ken', X-Api-Key = '${API_KEY}' }\n",
    )
    for args in (["config"], ["config", "--json"]):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        for secret in ("hunter2", "qwerty", "s3cr3t-t0ken"):
            assert secret not in done.stdout
        assert "Bearer ****" in done.stdout
        assert "${API_KEY}" in done.stdout
        assert "****:****@symbols.example" in done.stdout


def test_gc_limits_and_symbol_path(config_file: Path) -> None:
    write_config(
        config_file,
        "max_cache_size = '20GiB'\nmax_unused_age = '2w'\nsymbol_path = 'srv*/tmp/s*https://x/'\n",
    )
    current = settings.load(os.environ)
    assert current["max_cache_size"] == 20 << 30
    assert current["max_unused_age"] == 14 * 86400
    assert current["symbol_path"] == "srv*/tmp/s*https://x/"


@pytest.mark.parametrize(
    ("text", "seconds"), [("90d", 90 * 86400), ("12h", 43200), ("30m", 1800), ("45", 45), (7, 7)]
)
def test_durations(text: object, seconds: float) -> None:
    assert config_reader.parse_duration("x", text) == seconds


@pytest.mark.parametrize("text", ["soon", "-1d", "3 fortnights", True, None])
def test_bad_durations_name_the_setting(text: object) -> None:
    with pytest.raises(ConfigError, match="max_unused_age: expected a duration"):
        config_reader.parse_duration("max_unused_age", text)


def test_templates_tokens_in_user_names_and_symbol_paths_are_masked(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(
        config_file,
        "symbol_path = 'srv*/tmp/s*https://user:hunter2@symbols.example/?key=K3Y'\n"
        "[[servers]]\nurl = 'https://TOKEN123@store.example/'\nlayout = 'ssqp'\n",
    )
    monkeypatch.setenv(
        "DSYMFIND_SERVERS", "template=https://ci.example/{UUID}.zip?X-Amz-Signature=SECRETSIG"
    )
    done = run_cli("config", "--json")
    assert done.returncode == 0, done.stderr
    for secret in ("hunter2", "K3Y", "SECRETSIG"):
        assert secret not in done.stdout
    assert "{UUID}.zip?X-Amz-Signature=****" in done.stdout
    monkeypatch.delenv("DSYMFIND_SERVERS")
    done = run_cli("config", "--json")
    assert "TOKEN123" not in done.stdout
    assert "srv*/tmp/s*https://****:****@symbols.example/?key=****" in done.stdout
