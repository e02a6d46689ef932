"""install / uninstall through stand-in `defaults` and `launchctl` that keep real state.

The stand-ins (tests/fakes) behave like the macOS tools for the verbs dsymfind uses, so
the read-modify-write of DebugSymbols' preferences is exercised for real, in real processes.
"""

from __future__ import annotations

import json
import os
import plistlib
import tomllib
from pathlib import Path

import pytest
from support.chained import TheirHelper, answer
from support.fixtures import FAKES, FIXTURES, HELLO_UUID, write_config
from support.install import DOMAIN, prefs, python_in, set_prefs
from support.plists import POISONS
from support.processes import BIN, run_cli, run_helper

from dsymfind import paths
from dsymfind.macos import registration
from dsymfind.main import main


def calls(state: Path) -> list[list[str]]:
    log = state / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def writes(state: Path) -> list[list[str]]:
    return [c for c in calls(state) if c[0] == "defaults" and c[1] in ("write", "delete")]


def loaded(state: Path) -> dict[str, dict[str, object]]:
    path = state / "launchd.json"
    return json.loads(path.read_text()) if path.exists() else {}


def uuid_tree(home: Path) -> str:
    return str(home / ".cache" / "dsymfind" / "uuids")


def agent_file(home: Path, label: str = "org.dsymfind.gc") -> Path:
    return home / "Library" / "LaunchAgents" / f"{label}.plist"


RESIDENT = "org.dsymfind.resident"


def ok(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def test_install_registers_a_string_helper_the_tree_and_keeps_spotlight_on(
    macos: Path, isolated_home: Path
) -> None:
    ok("install")
    assert prefs(macos) == {
        "DBGShellCommands": paths.launcher_file(os.environ),
        "DBGFileMappedPaths": [uuid_tree(isolated_home)],
        "DBGSpotlightPaths": [],
    }
    assert os.path.isdir(uuid_tree(isolated_home))
    agent = plistlib.loads(agent_file(isolated_home).read_bytes())
    assert agent["ProgramArguments"] == [str(BIN / "dsymfind"), "gc"]
    assert agent["Label"] == "org.dsymfind.gc"
    # The resident downloader's agent runs the launcher DebugSymbols runs, from login on.
    resident = plistlib.loads(agent_file(isolated_home, RESIDENT).read_bytes())
    assert resident["ProgramArguments"] == [
        paths.launcher_file(os.environ),
        "--resident-downloader",
    ]
    assert resident["RunAtLoad"] is True
    assert resident["KeepAlive"] == {"SuccessfulExit": False}
    assert sorted(loaded(macos)) == [
        f"gui/{os.getuid()}/org.dsymfind.gc",
        f"gui/{os.getuid()}/{RESIDENT}",
    ]


def test_no_resident_agent_where_the_config_turns_the_resident_off(
    macos: Path, isolated_home: Path, config_file: Path
) -> None:
    ok("install")
    assert agent_file(isolated_home, RESIDENT).exists()
    write_config(config_file, "resident_downloader = 0\n")
    out = ok("install")
    assert not agent_file(isolated_home, RESIDENT).exists()
    assert list(loaded(macos)) == [f"gui/{os.getuid()}/org.dsymfind.gc"]
    assert RESIDENT not in out


def test_uninstall_restores_an_empty_domain_and_removes_the_agent(
    macos: Path, isolated_home: Path
) -> None:
    ok("install")
    out = ok("uninstall")
    assert prefs(macos) == {}
    assert not agent_file(isolated_home).exists()
    assert not agent_file(isolated_home, RESIDENT).exists()
    assert f"launchd agent removed: {RESIDENT}" in out
    assert loaded(macos) == {}
    assert not Path(registration.backup_file(os.environ)).exists()
    assert "DBGShellCommands" in out


def test_existing_values_are_kept_and_restored_in_their_own_form(
    macos: Path, isolated_home: Path
) -> None:
    before: dict[str, object] = {
        "DBGShellCommands": ["/usr/local/bin/teamhelper"],  # the array form lldb ignores
        "DBGFileMappedPaths": "/Volumes/Symbols/uuids",  # a string, not an array
        "DBGSpotlightPaths": ["/Users/dev/Builds"],
        "DBGSearchPaths": ["/Users/dev/dSYMs"],
    }
    set_prefs(macos, before)
    ok("install")
    after = prefs(macos)
    assert after["DBGShellCommands"] == paths.launcher_file(os.environ)
    assert after["DBGFileMappedPaths"] == ["/Volumes/Symbols/uuids", uuid_tree(isolated_home)]
    assert after["DBGSpotlightPaths"] == ["/Users/dev/Builds"]
    assert after["DBGSearchPaths"] == ["/Users/dev/dSYMs"]
    ok("uninstall")
    assert prefs(macos) == before


def test_reinstall_changes_nothing_and_keeps_the_first_backup(macos: Path) -> None:
    set_prefs(macos, {"DBGShellCommands": "/opt/old/dsymForUUID"})
    ok("install")
    first_writes = len(writes(macos))
    out = ok("install")
    assert len(writes(macos)) == first_writes
    assert "already pointed at dsymfind" in out
    ok("uninstall")
    assert prefs(macos) == {"DBGShellCommands": "/opt/old/dsymForUUID"}


def test_uninstall_leaves_what_the_user_changed_since(macos: Path, isolated_home: Path) -> None:
    ok("install")
    current = prefs(macos)
    current["DBGShellCommands"] = "/opt/other/dsymForUUID"
    current["DBGFileMappedPaths"] = [uuid_tree(isolated_home), "/Volumes/More/uuids"]
    set_prefs(macos, current)
    out = ok("uninstall")
    assert prefs(macos) == {
        "DBGShellCommands": "/opt/other/dsymForUUID",
        "DBGFileMappedPaths": ["/Volumes/More/uuids"],
    }
    assert "DBGShellCommands: changed since install, left as" in out


def test_dry_run_prints_every_command_and_changes_nothing(macos: Path, isolated_home: Path) -> None:
    set_prefs(macos, {"DBGFileMappedPaths": ["/Volumes/Symbols/uuids"]})
    out = ok("install", "--dry-run")
    tree = uuid_tree(isolated_home)
    assert (
        f"{FAKES}/defaults write {DOMAIN} DBGFileMappedPaths -array /Volumes/Symbols/uuids {tree}"
        in out
    )
    assert f"{FAKES}/defaults write {DOMAIN} DBGSpotlightPaths -array" in out
    assert f"{FAKES}/launchctl bootstrap gui/{os.getuid()} {agent_file(isolated_home)}" in out
    bootstrap = f"{FAKES}/launchctl bootstrap gui/{os.getuid()}"
    assert f"{bootstrap} {agent_file(isolated_home, RESIDENT)}" in out
    assert writes(macos) == []
    assert [c[:2] for c in calls(macos)] == [["defaults", "export"]]
    assert not agent_file(isolated_home).exists()
    assert not Path(registration.backup_file(os.environ)).exists()


def test_without_defaults_a_real_install_is_one_clear_error(isolated_home: Path) -> None:
    env = {**os.environ, "PATH": str(BIN)}
    done = run_cli("install", env=env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "`defaults` not found" in done.stderr
    assert not agent_file(isolated_home).exists()
    dry = run_cli("install", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "defaults write com.apple.DebugSymbols DBGShellCommands -string" in dry.stdout


@pytest.mark.parametrize("poison", ["date", "stray-key", "mismatched-tag"])
def test_preferences_defaults_cannot_read_back_are_one_clear_error(
    poison: str, macos: Path, isolated_home: Path, tmp_path: Path
) -> None:
    """`defaults export` printing what plistlib raises on: nothing is changed, one line."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "poison.plist").write_bytes(POISONS[poison])
    (tools / "defaults").write_text(f"#!/bin/sh\ncat '{tools / 'poison.plist'}'\n")
    (tools / "defaults").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}

    done = run_cli("install", env=env)

    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "com.apple.DebugSymbols -` printed an unreadable plist: " in done.stderr
    assert not agent_file(isolated_home).exists()
    assert calls(macos) == []


def test_a_helper_path_with_a_space_is_refused_before_any_change(
    macos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    python_in(tmp_path / "My Tools" / "bin", monkeypatch)
    assert main(["install"]) == 1
    assert "contains a space" in capsys.readouterr().err
    assert writes(macos) == []


def test_link_puts_the_fixed_path_in_place_and_uninstall_removes_it(
    macos: Path, helper_link: Path
) -> None:
    assert main(["install", "--link"]) == 0
    assert os.readlink(helper_link) == paths.launcher_file(os.environ)
    assert prefs(macos)["DBGShellCommands"] == str(helper_link)
    assert main(["uninstall"]) == 0
    assert not os.path.lexists(helper_link)
    assert prefs(macos) == {}


def test_link_never_replaces_a_file_it_did_not_make(
    macos: Path, helper_link: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    helper_link.parent.mkdir()
    helper_link.write_text("#!/bin/sh\n# someone else's helper\n")
    assert main(["install", "--link"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert helper_link.read_text().endswith("someone else's helper\n")
    assert writes(macos) == []


def test_the_agent_templates_render_escaped_paths() -> None:
    from dsymfind.macos import launch_agent

    values = launch_agent.Values("/opt/a&b <x>/dsymfind", "/h/<dsym&ForUUID>", "/logs/R&D")
    rendered = plistlib.loads(launch_agent.render(launch_agent.GC, values))
    assert rendered["ProgramArguments"] == ["/opt/a&b <x>/dsymfind", "gc"]
    assert rendered["StandardErrorPath"] == "/logs/R&D/gc.out.log"
    assert "StartCalendarInterval" in rendered
    assert not rendered.get("RunAtLoad") and not rendered.get("KeepAlive")
    resident = plistlib.loads(launch_agent.render(launch_agent.RESIDENT, values))
    assert resident["ProgramArguments"] == ["/h/<dsym&ForUUID>", "--resident-downloader"]
    assert resident["StandardErrorPath"] == "/logs/R&D/resident.out.log"


def test_uninstall_after_an_install_that_changed_nothing_changes_nothing(
    macos: Path, isolated_home: Path
) -> None:
    mine = {
        "DBGShellCommands": paths.launcher_file(os.environ),
        "DBGFileMappedPaths": ["/Volumes/S/uuids", uuid_tree(isolated_home)],
        "DBGSpotlightPaths": [],
    }
    set_prefs(macos, mine)
    assert "already pointed at dsymfind" in ok("install")
    ok("uninstall")
    assert prefs(macos) == mine


def test_a_value_set_between_two_installs_is_what_uninstall_restores(macos: Path) -> None:
    set_prefs(macos, {"DBGShellCommands": "/opt/other/dsymForUUID"})
    ok("install")
    current = prefs(macos)
    current["DBGShellCommands"] = "/opt/user-choice/dsymForUUID"
    set_prefs(macos, current)
    ok("install")
    ok("uninstall")
    assert prefs(macos) == {"DBGShellCommands": "/opt/user-choice/dsymForUUID"}


def test_a_link_the_user_made_is_not_removed_by_uninstall(macos: Path, helper_link: Path) -> None:
    helper_link.parent.mkdir()
    helper_link.symlink_to(BIN / "dsymForUUID")
    assert main(["install", "--link"]) == 0
    assert main(["uninstall"]) == 0
    assert os.readlink(helper_link) == str(BIN / "dsymForUUID")


def test_install_makes_the_cache_private(macos: Path, isolated_home: Path) -> None:
    os.umask(0o002)
    try:
        ok("install")
    finally:
        os.umask(0o022)
    cache = Path(uuid_tree(isolated_home)).parent
    assert cache.stat().st_mode & 0o777 == 0o700
    assert run_cli("index", str(FIXTURES / "hello.dSYM")).returncode == 0


def test_install_refuses_settings_only_the_shell_sees(
    macos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSYMFIND_CACHE_DIR", str(tmp_path / "elsewhere"))
    done = run_cli("install")
    assert done.returncode == 1
    assert "DSYMFIND_CACHE_DIR" in done.stderr and "set cache_dir in" in done.stderr
    assert writes(macos) == []


def test_install_chains_each_helper_of_an_array_and_uninstall_gives_all_back(
    macos: Path, tmp_path: Path, config_file: Path
) -> None:
    first = TheirHelper(tmp_path / "first", answer(HELLO_UUID))
    second = TheirHelper(tmp_path / "second", answer(HELLO_UUID))
    before_prefs = {"DBGShellCommands": [str(first.path), f"{second.path} --their-flag"]}
    set_prefs(macos, before_prefs)
    own = "# our team's servers\ntimeout = 20\n"
    write_config(config_file, own)

    out = ok("install")

    assert f"chained: {first.path}" in out
    assert f"chained: {second.path}" in out
    text = config_file.read_text()
    assert text.startswith(own)
    servers = tomllib.loads(text)["servers"]
    assert [s["url"] for s in servers] == [
        f"command:{first.path}",
        f"command:{second.path} --their-flag",
    ]
    assert prefs(macos)["DBGShellCommands"] == paths.launcher_file(os.environ)
    assert ok("config").count("command:") >= 2

    ok("uninstall")
    assert prefs(macos) == before_prefs
    assert config_file.read_text() == own


def test_a_chained_string_helper_answers_through_dsymfind_until_uninstall(
    macos: Path, products: Path, tmp_path: Path, config_file: Path
) -> None:
    dwarf = products / "hello.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    theirs = TheirHelper(tmp_path / "theirs", answer(HELLO_UUID, DBGDSYMPath=str(dwarf)))
    set_prefs(macos, {"DBGShellCommands": str(theirs.path)})

    ok("install")
    ok("install")  # again: nothing chained twice, nothing forgotten
    assert config_file.read_text().count("[[servers]]") == 1
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf)
    assert theirs.argvs() == [HELLO_UUID]

    ok("uninstall")
    assert prefs(macos) == {"DBGShellCommands": str(theirs.path)}
    assert not config_file.exists()


def test_uninstall_takes_out_only_the_chained_servers_of_a_file_edited_since(
    macos: Path, tmp_path: Path, config_file: Path
) -> None:
    theirs = TheirHelper(tmp_path / "theirs", answer(HELLO_UUID))
    set_prefs(macos, {"DBGShellCommands": str(theirs.path)})
    write_config(config_file, "timeout = 20\n")
    ok("install")
    edited = config_file.read_text() + "\n[[servers]]\nurl = 'https://symbols.example/'\n"
    config_file.write_text(edited)

    ok("uninstall")

    assert (
        config_file.read_text() == "timeout = 20\n\n[[servers]]\nurl = 'https://symbols.example/'\n"
    )


def test_dsymfinds_own_helper_is_not_chained(macos: Path, config_file: Path) -> None:
    set_prefs(macos, {"DBGShellCommands": [str(BIN / "dsymForUUID"), "/nonexistent/helper"]})
    out = ok("install")
    assert "chained" not in out
    assert not config_file.exists()
