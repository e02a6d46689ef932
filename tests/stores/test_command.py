"""A chained `dsymForUUID` (`command:` servers): real helper scripts, run by the real helper
and its detached downloader, the cache checked afterwards."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.chained import TheirHelper, answer
from support.fixtures import GREET_UUID, HELLO_UUID, dwarf_of, link_of, write_config
from support.negative import negative_marker, negative_markers
from support.plists import POISONS, deep_binary_plist
from support.processes import BIN, run_cli, run_helper, settled_record

from dsymfind.errors import DsymfindError
from dsymfind.stores import base, command

HEX = HELLO_UUID.replace("-", "")


def chain(config_file: Path, helper: TheirHelper, *, download_timeout: float = 30) -> None:
    write_config(
        config_file,
        f"timeout = 20\ndownload_timeout = {download_timeout}\n"
        f"[[servers]]\nurl = 'command:{helper.path}'\n",
    )


def test_a_good_answer_is_linked_in_place_and_never_asked_again(
    products: Path, tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")
    helper = TheirHelper(tmp_path / "theirs", answer(HELLO_UUID, DBGDSYMPath=str(dwarf)))
    chain(config_file, helper)

    first = run_helper(HELLO_UUID)
    assert first.entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf)
    assert os.path.realpath(link_of(cache_dir, HELLO_UUID)) == str(dwarf)
    assert not (cache_dir / "dsyms" / HEX).exists(), "linked in place, not copied"
    second = run_helper(HELLO_UUID)
    assert second.entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf)
    assert helper.argvs() == [HELLO_UUID]


def test_a_helper_with_arguments_of_its_own_gets_them_as_lldb_would_pass_them(
    products: Path, tmp_path: Path, config_file: Path
) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")
    helper = TheirHelper(tmp_path / "theirs", answer(HELLO_UUID, DBGDSYMPath=str(dwarf)))
    # LLDB splits the DBGShellCommands string on spaces, without quoting.
    write_config(
        config_file,
        f"timeout = 20\n[[servers]]\nurl = 'command:{helper.path}  --store  team'\n",
    )

    done = run_helper("--ignoreNegativeCache", HELLO_UUID)

    assert done.entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf)
    assert helper.argvs() == [f"--store team --ignoreNegativeCache {HELLO_UUID}"]
    location = command.check_location("servers[0]", f"command:{helper.path}  --store  team")
    assert location == f"command:{helper.path} --store team"


def test_the_executable_is_asked_with_the_callers_flags(
    products: Path, tmp_path: Path, config_file: Path
) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")
    # Not beside the bundle, where the lookup would find it without asking.
    executable = tmp_path / "elsewhere" / "hello"
    executable.parent.mkdir()
    (products / "hello").rename(executable)
    helper = TheirHelper(
        tmp_path / "theirs",
        answer(HELLO_UUID, DBGDSYMPath=str(dwarf), DBGSymbolRichExecutable=str(executable)),
    )
    chain(config_file, helper)

    run = run_helper("--copyExecutable", "--ignoreNegativeCache", HELLO_UUID)

    assert run.entry(HELLO_UUID)["DBGSymbolRichExecutable"] == str(executable)
    assert helper.argvs() == [
        f"--ignoreNegativeCache {HELLO_UUID}",
        f"--copyExecutable --ignoreNegativeCache {HELLO_UUID}",
    ]


@pytest.mark.parametrize(
    "named",
    [
        "libgreet.dylib.dSYM/Contents/Resources/DWARF/libgreet.dylib",  # another UUID
        "hello.dSYM/Contents/Resources/DWARF/missing",
        "hello",  # the executable, where the dSYM belongs
        "loose-hello",  # the dSYM's DWARF file, out of any bundle
    ],
)
def test_a_wrong_answer_is_logged_and_never_linked(
    named: str, products: Path, tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    shutil.copy(dwarf_of(products / "hello.dSYM"), products / "loose-hello")
    helper = TheirHelper(tmp_path / "theirs", answer(HELLO_UUID, DBGDSYMPath=str(products / named)))
    chain(config_file, helper)

    run = run_helper(HELLO_UUID)

    assert "DBGError" in run.entry(HELLO_UUID)
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    record = settled_record(cache_dir, HELLO_UUID, timeout=30)
    assert record["state"] == "failed", record
    assert negative_markers(cache_dir) == []


@pytest.mark.parametrize("said", [b"", b"<key>DBGError</key><string>nobody has it</string>"])
def test_no_entry_or_a_dbgerror_is_remembered_as_absent(
    said: bytes, tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    body = f"<dict><key>{HELLO_UUID.lower()}</key><dict>".encode() + said + b"</dict></dict>"
    plist = b'<?xml version="1.0"?><plist version="1.0">' + (body if said else b"<dict/>")
    helper = TheirHelper(tmp_path / "theirs", plist + b"</plist>")
    chain(config_file, helper)

    run = run_helper(HELLO_UUID)
    assert HELLO_UUID not in run.plist or "DBGError" in run.entry(HELLO_UUID)
    assert settled_record(cache_dir, HELLO_UUID, timeout=30)["state"] == "not-found"
    assert negative_marker(cache_dir, HELLO_UUID).exists()
    # The first lookup asked for the dSYM, then for the executable alone; the second
    # lookup is the negative cache's.
    asked = [HELLO_UUID, f"--copyExecutable {HELLO_UUID}"]
    assert helper.argvs() == asked
    run_helper(HELLO_UUID)
    assert helper.argvs() == asked, "the negative cache answered the second lookup"


def test_stderr_chatter_reaches_no_output(
    products: Path, tmp_path: Path, config_file: Path
) -> None:
    dwarf = dwarf_of(products / "hello.dSYM")
    chatter = "i=0; while [ $i -lt 2000 ]; do echo 'xyzzy from their helper' >&2; i=$((i+1)); done"
    helper = TheirHelper(
        tmp_path / "theirs", answer(HELLO_UUID, DBGDSYMPath=str(dwarf)), before=chatter
    )
    chain(config_file, helper)

    fetched = run_cli("fetch", HELLO_UUID)

    assert "xyzzy" not in fetched.stdout + fetched.stderr
    assert fetched.returncode == 0, fetched.stderr
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf)


def test_a_hanging_helper_is_killed_at_the_deadline_with_its_group(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    # `sleep` is a child in the helper's group: killing only the shell would leave it.
    helper = TheirHelper(tmp_path / "theirs", answer(HELLO_UUID), before="sleep 3600")
    write_config(
        config_file,
        f"timeout = 1\ndownload_timeout = 2\n[[servers]]\nurl = 'command:{helper.path}'\n",
    )
    started = time.monotonic()
    run = run_helper(HELLO_UUID)
    assert time.monotonic() - started < 20
    assert "DBGError" in run.entry(HELLO_UUID)

    record = settled_record(cache_dir, HELLO_UUID, timeout=60)
    assert record["state"] == "failed"
    assert "no answer within 2 s" in str(record["message"])
    assert not group_alive(int(helper.pid.read_text()))


def test_our_own_helper_reached_through_a_wrapper_answers_at_once(
    tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    """A chained wrapper that runs dsymfind's own helper: that helper would wait for the
    download running it, until its deadline; it says so at once and the download goes on."""
    wrapper = tmp_path / "theirs" / "dsymForUUID"
    wrapper.parent.mkdir()
    inner = tmp_path / "theirs" / "inner.plist"
    wrapper.write_text(f'#!/bin/sh\n"{BIN / "dsymForUUID"}" "$@" > "{inner}"\ncat "{inner}"\n')
    wrapper.chmod(0o755)
    write_config(
        config_file,
        f"timeout = 3\ndownload_timeout = 60\n[[servers]]\nurl = 'command:{wrapper}'\n",
    )

    run_helper(HELLO_UUID)

    record = settled_record(cache_dir, HELLO_UUID, timeout=90)
    assert record["state"] == "not-found", record
    said = plistlib.loads(inner.read_bytes())[HELLO_UUID]["DBGError"]
    assert "chains to" in said, said


def test_dsymfinds_own_helper_is_never_chained() -> None:
    with pytest.raises(DsymfindError, match="own helper"):
        command.open_reader(f"command:{BIN / 'dsymForUUID'}", None, base.Options())  # type: ignore[arg-type]


def test_a_fifo_named_as_the_helper_is_not_opened_to_look_inside(tmp_path: Path) -> None:
    """Whether a program is our own helper is read from its first bytes: a FIFO there
    must not block the downloader (it would wait for a writer that never comes)."""
    fifo = tmp_path / "dsymForUUID"
    os.mkfifo(fifo)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from dsymfind.stores import command; print(command.is_own_helper({str(fifo)!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False", done.stderr


def test_the_helpers_key_names_the_uuid_and_what_is_wanted() -> None:
    tree = "/".join(["4C4C", "449A", "5555", "3144", "A19A", "E6E643E6625E"])
    assert command.uuid_of_key(tree) == (HELLO_UUID, False)
    assert command.uuid_of_key(tree + ".app") == (HELLO_UUID, True)
    assert GREET_UUID != HELLO_UUID


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (zombies nobody reaped aside)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def test_an_answer_nested_past_the_interpreters_limit_is_a_wrong_answer() -> None:
    with pytest.raises(command.WrongAnswer, match="unreadable plist: nested deeper than"):
        command.answer_entry(deep_binary_plist(5000), HELLO_UUID, "their helper")


@pytest.mark.parametrize("poison", ["date", "base64", "stray-key", "mismatched-tag", "null"])
def test_an_unreadable_answer_is_refused_with_the_reason(
    poison: str, products: Path, tmp_path: Path, config_file: Path, cache_dir: Path
) -> None:
    """Whatever plistlib raised on it, a chained helper's answer that cannot be read is a
    wrong answer that says why, not an internal error; the next good answer is taken."""
    helper = TheirHelper(tmp_path / "theirs", POISONS[poison])
    chain(config_file, helper)

    refused = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]

    record = settled_record(cache_dir, HELLO_UUID, timeout=30)
    assert record["state"] == "failed", record
    for said in (refused, str(record["message"])):
        assert "answered an unreadable plist: " in said and "internal error" not in said, said
    from dsymfind.apple import plists

    with pytest.raises(plists.UnreadablePlist) as reader:
        plists.loads(POISONS[poison])
    assert f"answered an unreadable plist: {reader.value.reason}" in refused, refused
    assert negative_markers(cache_dir) == []
    (helper.path.parent / "answer.plist").write_bytes(
        answer(HELLO_UUID, DBGDSYMPath=str(dwarf_of(products / "hello.dSYM")))
    )
    run = run_helper("--ignoreNegativeCache", HELLO_UUID)
    assert run.entry(HELLO_UUID)["DBGDSYMPath"] == str(dwarf_of(products / "hello.dSYM"))


def test_an_answer_is_read_once_the_helper_exits_whatever_it_left_running(tmp_path: Path) -> None:
    """A helper that starts a background job holding its stdout (`sleep 120 &`) is done
    when it exits, as LLDB, which reads a file once the helper is gone, sees it."""
    script = tmp_path / "their-dsymForUUID"
    script.write_text(
        "#!/bin/sh\nprintf '<plist version=\"1.0\"><dict/></plist>'\nsleep 120 &\nexit 0\n"
    )
    script.chmod(0o755)
    terms = base.Terms(base.Limits(total_timeout=20))
    output = command.run([str(script), HELLO_UUID], terms, "their helper")
    assert output == b'<plist version="1.0"><dict/></plist>'
