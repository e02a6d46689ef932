"""The negative cache must not hide a late publish.

A crash report that arrives before its build's publish is the normal case in CI: commands
run on purpose (symbolicate, fetch, prefetch, pdb) ask the stores again, the helper keeps
answering `<dict/>` quietly (lldb asks about hundreds of UUIDs nobody has), an entry means
nothing once the store settings change, `dsymfind forget` drops entries, and a UUID is
remembered as absent only when every server said "not found". Real processes throughout,
a real HTTP server on 127.0.0.1 and a real S3 engine (SeaweedFS)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, GREET_UUID, HELLO_UUID, PE_FIXTURES, dwarf_of, write_config
from support.negative import negative_marker, negative_markers
from support.processes import run_cli, run_helper
from support.s3_publish import keys_env, run_publish
from support.seaweed import REGION, SYMBOLS, SeaweedS3
from support.served import HELLO_DWARF, url_path
from support.symbolication import CRASHY_DWARF, CRASHY_UUIDS, ips_report

from dsymfind import helper, main, settings
from dsymfind.windows import pe

ARM = CRASHY_UUIDS["arm64"]
GREET_DWARF = dwarf_of(FIXTURES / "libgreet.dylib.dSYM").read_bytes()
# Where crashy's arm64 slice crashes (its leaf function): what the report's frame names.
LEAF_CRASH = 0x338


# -- every server must say "not found" ---------------------------------------------------


def test_a_server_that_failed_beside_one_that_lacks_it_leaves_nothing_remembered(
    config_file: Path, cache_dir: Path
) -> None:
    with ss.SymbolServer() as lacking, ss.SymbolServer() as failing:
        failing.route(url_path(HELLO_UUID), ss.body(b"", 503))
        write_config(
            config_file,
            "timeout = 10\n"
            f"[[servers]]\nurl = '{lacking.url}/'\nlayout = 'native'\n"
            f"[[servers]]\nurl = '{failing.url}/'\nlayout = 'native'\n",
        )
        answer = run_helper(HELLO_UUID).plist  # not `<dict/>`: one server failed
        assert "503" in answer.get(HELLO_UUID, {}).get("DBGError", ""), answer
        assert negative_markers(cache_dir) == []  # one failed: nobody knows it is absent
        assert lacking.count(url_path(HELLO_UUID)) == 1

        # The next lookup asks the server that answered; the failing one waits out its
        # backoff, which the downloader's message says in the helper's own flag.
        error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
        assert "failed recently; skipped for" in error, error
        assert "(--ignoreNegativeCache asks anyway)" in error, error
        assert negative_markers(cache_dir) == []  # one was skipped: still nobody knows
        assert lacking.count(url_path(HELLO_UUID)) == 2
        lacking.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))
        assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)
        assert lacking.count(url_path(HELLO_UUID)) == 3


# -- a crash report that arrives before its build's publish ------------------------------


@pytest.fixture
def prefix() -> str:
    """A prefix of this test's own in the shared bucket."""
    return f"ci-{uuid.uuid4().hex[:12]}"


def configure_s3(config_file: Path, s3: SeaweedS3, prefix: str) -> None:
    write_config(
        config_file,
        "timeout = 30\n[[servers]]\nname = 'team'\n"
        f"url = 's3://{SYMBOLS}/{prefix}/'\nendpoint_url = '{s3.endpoint_url}'\n"
        f"region = '{REGION}'\n",
    )


def publish(s3: SeaweedS3, prefix: str, bundle: Path) -> None:
    """What CI does once the build is done."""
    done = run_publish(s3, prefix, bundle)
    assert done.returncode == 0, done.stdout + done.stderr


def log_size(env: dict[str, str]) -> int:
    try:
        return Path(settings.load(env)["log_file"]).stat().st_size
    except FileNotFoundError:
        return 0


def test_a_crash_report_before_its_publish_is_symbolicated_after_it_without_a_flag(
    s3: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path, tmp_path: Path
) -> None:
    configure_s3(config_file, s3, prefix)
    reader = keys_env(s3, "reader")
    report = tmp_path / "crashy.ips"
    report.write_text(ips_report(ARM, "arm64", [LEAF_CRASH]))

    before = run_cli("symbolicate", str(report), env=reader)
    assert before.returncode == 2  # written, its frames left bare
    assert f"missing (absent)  {ARM}  crashy: not on s3://{SYMBOLS}/{prefix}/" in before.stderr
    assert negative_marker(cache_dir, ARM, env=reader).exists()

    publish(s3, prefix, FIXTURES / "crashy.dSYM")

    # The helper keeps the negative cache: a quiet `<dict/>`, no downloader, no log line.
    record = cache_dir / "downloads" / (ARM.replace("-", "") + ".json")
    recorded, logged = record.stat().st_mtime_ns, log_size(reader)
    assert run_helper(ARM, env=reader).plist == {}
    assert (record.stat().st_mtime_ns, log_size(reader)) == (recorded, logged)

    after = run_cli("symbolicate", str(report), env=reader)
    assert after.returncode == 0, after.stderr
    assert f"found    {ARM}  crashy" in after.stderr
    assert '"leaf"' in after.stdout
    assert not negative_marker(cache_dir, ARM, env=reader).exists()
    # Now in the cache, the helper answers it too.
    answered = Path(run_helper(ARM, env=reader).entry(ARM)["DBGDSYMPath"])
    assert answered.is_file() and answered.is_relative_to(cache_dir / "dsyms")


def test_a_fixed_prefix_typo_makes_the_helper_ask_again(
    s3: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path, tmp_path: Path
) -> None:
    publish(s3, prefix, FIXTURES / "hello.dSYM")
    reader = keys_env(s3, "reader")
    configure_s3(config_file, s3, prefix + "-typo")
    assert run_helper(HELLO_UUID, env=reader).plist == {}
    assert negative_marker(cache_dir, HELLO_UUID, env=reader).exists()

    configure_s3(config_file, s3, prefix)

    answered = Path(run_helper(HELLO_UUID, env=reader).entry(HELLO_UUID)["DBGDSYMPath"])
    assert answered.read_bytes() == HELLO_DWARF


# -- dsymfind forget ---------------------------------------------------------------------


def test_forget_a_uuid_and_the_helper_asks_again(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    assert run_helper(HELLO_UUID).plist == {}
    native_server.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))  # published since
    assert run_helper(HELLO_UUID).plist == {}  # the negative cache still answers

    done = run_cli("forget", HELLO_UUID.lower())

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    # A miss asks for the executable alone too (an Apple library published with
    # `publish --system`): both are forgotten.
    assert f"{HELLO_UUID}: forgot no server has its dSYM (" in done.stdout
    assert f"{HELLO_UUID}: forgot no server has its executable (" in done.stdout
    assert f"not on {native_server.url}{url_path(HELLO_UUID)})" in done.stdout
    assert negative_markers(cache_dir) == []
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)
    again = run_cli("forget", HELLO_UUID)
    assert (again.returncode, again.stdout) == (0, f"{HELLO_UUID}: not in the negative cache\n")


def test_forget_drops_an_earlier_versions_entry_and_another_configurations(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    earlier = cache_dir / "negative" / HELLO_UUID.replace("-", "")
    other = cache_dir / "negative" / ("0" * 16) / HELLO_UUID.replace("-", "")
    for marker in (earlier, other):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    # Neither is read: the helper asks the server.
    assert run_helper(HELLO_UUID).plist == {}
    assert native_server.count(url_path(HELLO_UUID)) == 1

    done = run_cli("forget", str(dwarf_of(FIXTURES / "hello.dSYM")))  # a file: its slices

    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout  # the dSYM's and the executable's of this run too
    assert sum("under other store settings or by an earlier version" in line for line in lines) == 2
    assert negative_markers(cache_dir) == []


def test_forget_all_drops_every_entry_and_every_servers_backoff(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    assert run_helper(HELLO_UUID).plist == {}  # remembered as absent
    native_server.route(url_path(GREET_UUID), ss.body(b"", 503))
    assert "503" in run_helper(GREET_UUID).entry(GREET_UUID)["DBGError"]  # in backoff
    native_server.route(url_path(HELLO_UUID), ss.body(HELLO_DWARF))
    native_server.route(url_path(GREET_UUID), ss.body(GREET_DWARF))
    assert "skipped for" in run_helper(GREET_UUID).entry(GREET_UUID)["DBGError"]

    done = run_cli("forget", "--all")

    assert done.returncode == 0, done.stderr
    host = native_server.url.removeprefix("http://")
    assert done.stdout.splitlines() == [
        "forgot 2 negative entries (1 dSYM, 1 executable)",
        f"forgot the backoff of {host} (http://{host}/)",
    ]
    assert negative_markers(cache_dir) == []
    assert list((cache_dir / "failing-servers").iterdir()) == []
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "DBGDSYMPath" in run_helper(GREET_UUID).entry(GREET_UUID)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["forget", "4C4C4462-5555"], "dsymfind: error: not a UUID: '4C4C4462-5555'"),
        (["forget"], "dsymfind: error: give the UUIDs to forget, or --all (not both)"),
        (["forget", "--all", HELLO_UUID], "give the UUIDs to forget, or --all (not both)"),
    ],
)
def test_forget_refuses_what_it_cannot_read_in_one_line(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_forget_of_a_cache_not_made_yet_makes_none(cache_dir: Path) -> None:
    done = run_cli("forget", "--all")
    assert (done.returncode, done.stdout) == (
        0,
        "nothing to forget: the cache has not been made yet\n",
    )
    assert not cache_dir.exists()


# -- every hint names a flag the command printing it accepts ------------------------------

# `dsymfind VERB ...` in a message names that verb's flags, not the printer's.
_OTHER_COMMAND = re.compile(r"dsymfind ([a-z][\w-]*)([^`;)\n]*)")
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def flags_by_command(printer: str, text: str) -> dict[str, set[str]]:
    named: dict[str, set[str]] = {printer: set()}
    for verb, rest in _OTHER_COMMAND.findall(text):
        named.setdefault(verb, set()).update(_FLAG.findall(rest))
    named[printer].update(_FLAG.findall(_OTHER_COMMAND.sub("", text)))
    return named


def accepted(verb: str) -> set[str]:
    if verb == "dsymForUUID":
        return set(helper.KNOWN_FLAGS)
    parser = main.build_parser(verb)
    (verbs,) = [a for a in parser._actions if a.dest == "verb"]
    return set(verbs.choices[verb]._option_string_actions)  # type: ignore[attr-defined]


def assert_flags_accepted(printer: str, text: str) -> None:
    for verb, flags in flags_by_command(printer, text).items():
        assert flags <= accepted(verb), f"{printer} printed {flags - accepted(verb)}: {text}"


def test_every_hint_names_a_flag_the_command_printing_it_accepts(
    config_file: Path, tmp_path: Path
) -> None:
    report = tmp_path / "crashy.ips"
    report.write_text(ips_report(ARM, "arm64", [LEAF_CRASH]))
    with ss.SymbolServer() as server:
        server.route(url_path(ARM), ss.body(b"", 503))
        write_config(
            config_file,
            f"timeout = 10\nserver_backoff = 600\n[[servers]]\nurl = '{server.url}/'\n"
            "layout = 'native'\n",
        )
        assert run_cli("fetch", ARM).returncode == 1  # the server failed: in backoff
        said = {
            "fetch": run_cli("fetch", ARM),
            "prefetch": run_cli("prefetch", str(report)),
            "symbolicate": run_cli("symbolicate", str(report)),
            "doctor": run_cli("doctor"),
        }
        helper_said = run_helper(ARM).entry(ARM)["DBGError"]
        for verb, done in said.items():
            # symbolicate's stdout is the report it wrote, not a message.
            text = done.stderr if verb == "symbolicate" else done.stdout + done.stderr
            assert "--ignore-negative-cache" in text or verb == "doctor"
            assert_flags_accepted(verb, text)
        assert "forget --all" in said["doctor"].stdout
        assert "--ignoreNegativeCache asks anyway" in helper_said
        assert_flags_accepted("dsymForUUID", helper_said)

        # What symbolicate's hint says works: the server is asked despite its backoff.
        server.route(url_path(ARM), ss.body(CRASHY_DWARF.read_bytes()))
        assert run_cli("symbolicate", str(report)).returncode == 2  # still in backoff: bare
        forced = run_cli("symbolicate", "--ignore-negative-cache", str(report))
        assert forced.returncode == 0, forced.stderr


def test_pdb_hints_name_its_own_flag(tmp_path: Path) -> None:
    exe = tmp_path / "bin" / "hello64.exe"
    exe.parent.mkdir()
    exe.write_bytes((PE_FIXTURES / "hello64.exe").read_bytes())
    key = pe.read_identity(str(exe)).require_codeview().key
    with ss.SymbolServer() as server:
        server.route(f"/hello64.pdb/{key}/hello64.pdb", ss.body(b"", 503))
        symbol_path = f"srv*{tmp_path / 'down'}*{server.url}"
        assert run_cli("pdb", "--symbol-path", symbol_path, str(exe)).returncode == 1
        skipped = run_cli("pdb", "--symbol-path", symbol_path, str(exe))
    assert "--ignore-negative-cache asks anyway" in skipped.stderr
    assert_flags_accepted("pdb", skipped.stderr)


def test_a_flag_of_another_command_is_caught() -> None:
    """The audit above can fail: symbolicate's parser once lacked the flag its hint names."""
    with pytest.raises(AssertionError):
        assert_flags_accepted(
            "status", "skipped for 60 s more (--ignore-negative-cache asks anyway)"
        )
    assert_flags_accepted("status", "run `dsymfind forget --all` to ask it again now")
