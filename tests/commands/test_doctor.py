"""dsymfind doctor: real processes, real loopback servers, the stand-in macOS tools."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.chained import TheirHelper, answer
from support.fixtures import HELLO_UUID, write_config
from support.processes import run_cli
from support.seaweed import REGION, SYMBOLS, SeaweedS3


def doctor(env: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """Exit status, each subject's first line, and the whole output."""
    done = run_cli("doctor", env=env)
    assert done.stderr == ""
    lines = {}
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            level, _, rest = line.partition(" ")
            subject, _, text = rest.strip().partition(": ")
            lines.setdefault(subject, f"{level} {text}")
    return done.returncode, lines, done.stdout


def server_config(config_file: Path, *servers: str) -> None:
    tables = "".join(f"[[servers]]\n{server}\n" for server in servers)
    write_config(config_file, tables)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_healthy_server_is_timed_and_a_missing_registration_fails(
    macos: Path, config_file: Path
) -> None:
    with ss.SymbolServer() as server:
        server_config(config_file, f"name = 'good'\nurl = '{server.url}/'\nlayout = 'native'")
        status, lines, out = doctor()
        assert server.requests, "the server was not probed"
    assert lines["server good"].startswith("ok ")
    assert " ms" in lines["server good"]
    assert lines["DBGShellCommands"].startswith("FAIL unset")
    assert "fix: dsymfind install" in out
    assert status == 1


def test_after_install_registration_and_agent_are_ok(macos: Path) -> None:
    assert run_cli("install").returncode == 0
    status, lines, out = doctor()
    assert lines["DBGShellCommands"].startswith("ok ")
    assert lines["DBGFileMappedPaths"].startswith("ok holds ")
    assert lines["launchd agent org.dsymfind.gc"].startswith("ok ")
    assert lines["launchd agent org.dsymfind.resident"].startswith("ok ")
    assert "DBGSpotlightPaths" not in lines
    assert status == 0, out


def test_an_array_helper_and_a_missing_agent_are_reported(macos: Path) -> None:
    assert run_cli("install").returncode == 0
    assert run_cli("uninstall").returncode == 0
    (macos / "com.apple.DebugSymbols.plist").write_bytes(
        b'<?xml version="1.0"?><plist version="1.0"><dict><key>DBGShellCommands</key>'
        b"<array><string>/bin/true</string></array></dict></plist>"
    )
    status, lines, _ = doctor()
    assert "an array, which lldb ignores" in lines["DBGShellCommands"]
    assert lines["launchd agent org.dsymfind.gc"].startswith("warn not installed")
    assert lines["launchd agent org.dsymfind.resident"].startswith("warn not installed")
    assert lines["DBGSpotlightPaths"].startswith("warn ")
    assert status == 1


def test_server_failures_each_get_a_reason_and_a_fix(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SYMBOL_TOKEN", raising=False)
    with ss.SymbolServer() as locked:
        locked.fallback = ss.body(b"no", 401, content_type="text/plain")
        server_config(
            config_file,
            f"name = 'locked'\nurl = '{locked.url}/'\nlayout = 'native'",
            f"name = 'down'\nurl = 'http://127.0.0.1:{closed_port()}/'\nlayout = 'ssqp'",
            f"name = 'tokenless'\nurl = '{locked.url}/'\nlayout = 'native'\n"
            "headers = { Authorization = 'Bearer ${SYMBOL_TOKEN}' }",
        )
        status, lines, out = doctor()
    assert lines["server locked"].startswith("FAIL ")
    assert "401" in lines["server locked"]
    assert "check the token" in out
    assert lines["server down"].startswith("FAIL ")
    assert "SYMBOL_TOKEN" in lines["server tokenless"]
    assert status == 1


def test_a_cache_writable_by_others_fails_with_the_chmod_fix(
    cache_dir: Path, config_file: Path
) -> None:
    write_config(config_file, "")
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(0o777)
    status, lines, out = doctor()
    assert "writable by other users" in lines["cache"]
    assert f"fix: chmod 700 {cache_dir}" in out
    assert status == 1


def test_a_broken_config_is_the_one_finding(config_file: Path) -> None:
    write_config(config_file, "timeout = 'soon'\n")
    status, lines, _ = doctor()
    assert list(lines) == ["config"]
    assert "timeout" in lines["config"]
    assert status == 1


def test_without_macos_registration_is_skipped(config_file: Path) -> None:
    write_config(config_file, "")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    status, lines, _ = doctor(env)
    assert lines["DebugSymbols"].startswith("skip ")
    assert lines["servers"].startswith("warn ")
    assert status == 0


def test_refused_s3_keys_get_an_s3_credentials_fix(s3: SeaweedS3, config_file: Path) -> None:
    server_config(
        config_file,
        f"name = 'bucket'\nurl = 's3://{SYMBOLS}/doctor/'\n"
        f"endpoint_url = '{s3.endpoint_url}'\nregion = '{REGION}'",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=s3.identities["reader"].access_key,
        AWS_SECRET_ACCESS_KEY="not-the-secret",
        NO_PROXY="127.0.0.1",
    )
    status, lines, out = doctor(env)
    assert lines["server bucket"].startswith("FAIL "), out
    assert "fix: check the S3 credentials" in out
    assert "token" not in out
    assert status == 1


def test_each_source_checkout_is_checked_for_a_repository_and_its_remotes(
    config_file: Path, tmp_path: Path
) -> None:
    from support import git_builds

    clone = git_builds.clone(git_builds.origin(tmp_path), tmp_path / "app")
    git_builds.git(clone, "remote", "add", "mirror", "https://user:secret@git.example.com/app.git")
    plain = tmp_path / "plain"
    plain.mkdir()
    write_config(config_file, f"source_checkouts = ['{clone}', '{plain}']\n")
    _, lines, out = doctor()
    assert lines[f"source checkout {clone}"] == (
        f"ok git work tree {clone}; remotes: mirror https://git.example.com/app.git, "
        f"origin {tmp_path / 'origin.git'}"
    )
    assert lines[f"source checkout {plain}"].startswith("warn ")
    assert "not a git repository" in lines[f"source checkout {plain}"]
    assert "secret" not in out


def test_each_chained_helper_is_run_once_and_how_it_answered_reported(
    config_file: Path, products: Path, tmp_path: Path
) -> None:
    dwarf = products / "hello.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    empty = TheirHelper(tmp_path / "empty", answer(HELLO_UUID))
    error = TheirHelper(
        tmp_path / "error",
        b'<?xml version="1.0"?><plist version="1.0"><dict><key>DBGError</key>'
        b"<string>nothing here</string></dict></plist>",
    )
    # Whatever it is asked, it names the same file: a helper that never says "not found".
    liar = TheirHelper(
        tmp_path / "liar",
        b"",
        before=f'printf \'<plist version="1.0"><dict><key>%s</key><dict><key>DBGDSYMPath</key>'
        f'<string>{dwarf}</string></dict></dict></plist>\' "$1"; exit 0',
    )
    server_config(
        config_file,
        *(
            f"name = '{name}'\nurl = 'command:{h.path}'"
            for name, h in (("empty", empty), ("error", error), ("liar", liar))
        ),
    )

    status, lines, out = doctor()

    assert lines["server empty"].startswith("ok "), out
    assert "not found" in lines["server empty"]
    assert lines["server error"].startswith("ok "), out
    assert lines["server liar"].startswith("FAIL "), out
    assert "for a random UUID" in lines["server liar"]
    assert "run the helper by hand" in out
    for helper in (empty, error, liar):
        assert len(helper.argvs()) == 1
    assert status == 1


def test_a_folder_store_with_nothing_in_it_is_healthy_and_named_beside_its_neighbours(
    tmp_path: Path, config_file: Path
) -> None:
    symbols = tmp_path / "symbols"
    published = symbols / "iOS" / "4c" / "4c449a55553144a19ae6e643e6625e"
    published.mkdir(parents=True)
    (published / "debuginfo").write_bytes(b"CI's build")
    (symbols / "ios").mkdir()  # what the developer typed: there, and empty
    (symbols / "android").mkdir()  # empty too: not named
    server_config(config_file, f"name = 'team'\nurl = 'file://{symbols}/ios'\nlayout = 'unified'")
    _, lines, out = doctor()
    assert lines["server team"].startswith(f"ok file://{symbols}/ios answered in ")
    assert (
        f"warn  server team: no symbols under file://{symbols}/ios; one level up, these hold "
        f"some: {symbols}/iOS/\n      fix: correct the url if it names the wrong place" in out
    )
    server_config(config_file, f"name = 'team'\nurl = 'file://{symbols}/iOS'\nlayout = 'unified'")
    _, _, out = doctor()
    assert "warn  server team" not in out
