"""dsymfind check: the cache oracle. Each kind of damage is found, and --repair clears it."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, GREET_UUID, HELLO_UUID, dwarf_of
from support.processes import run_cli, run_helper

from dsymfind.cache import check as cache_check
from dsymfind.cache import place
from dsymfind.fetch.downloader import run_download
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry

HEX = HELLO_UUID.replace("-", "")


def native_store(root: Path) -> None:
    """hello's and libgreet's dSYMs in the native layout, as a symbol server serves them."""
    for uuid, bundle in ((HELLO_UUID, "hello.dSYM"), (GREET_UUID, "libgreet.dylib.dSYM")):
        target = Path(tree_entry(str(root), uuid))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dwarf_of(FIXTURES / bundle), target)


@pytest.fixture
def fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> Iterator[Path]:
    """A cache holding hello and libgreet, fetched by the real downloader from a real server."""
    native_store(tmp_path / "store")
    with ss.SymbolServer(tmp_path / "store") as server:
        monkeypatch.setenv("DSYMFIND_SERVERS", f"native={server.url}/")
        for uuid in (HELLO_UUID, GREET_UUID):
            assert (
                run_download(uuid, os.environ, ignore_negative_cache=True, copy_executable=False)
                == 0
            )
        yield cache_dir


def check(*args: str) -> tuple[int, list[str]]:
    done = run_cli("check", *args)
    assert done.stderr == ""
    return done.returncode, done.stdout.splitlines()


def findings(lines: list[str], kind: str) -> list[str]:
    return [line for line in lines if line.startswith(f"{kind}: ")]


def link_of(cache: Path, uuid: str) -> Path:
    return Path(tree_entry(str(cache / "uuids"), uuid))


def test_a_fetched_cache_is_valid(fetched: Path) -> None:
    status, lines = check()
    assert status == 0
    assert lines == [f"{fetched}: 2 entries, 2 links checked; 0 invalid, 0 leftover"]


def test_a_link_to_nothing_is_invalid_and_repaired(fetched: Path) -> None:
    shutil.rmtree(fetched / "dsyms" / HEX)
    status, lines = check()
    assert status == 1
    (bad,) = findings(lines, "invalid")
    assert str(link_of(fetched, HELLO_UUID)) in bad and "does not exist" in bad
    status, lines = check("--repair")
    assert status == 0
    assert findings(lines, "repaired invalid")
    assert not os.path.lexists(link_of(fetched, HELLO_UUID))
    assert check() == (0, [f"{fetched}: 1 entries, 1 links checked; 0 invalid, 0 leftover"])


def test_a_link_to_another_uuid_is_invalid(fetched: Path) -> None:
    link = link_of(fetched, HELLO_UUID)
    other = os.readlink(link_of(fetched, GREET_UUID))
    link.unlink()
    link.symlink_to(
        os.path.relpath(os.path.join(link_of(fetched, GREET_UUID).parent, other), link.parent)
    )
    status, lines = check()
    assert status == 1
    assert any(f"does not carry {HELLO_UUID}" in line for line in findings(lines, "invalid"))


def test_a_damaged_entry_goes_with_its_links_and_is_fetched_again(
    fetched: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dwarf = next((fetched / "dsyms" / HEX).glob("*.dSYM/Contents/Resources/DWARF/*"))
    dwarf.write_bytes(dwarf.read_bytes()[:100])
    status, lines = check()
    assert status == 1
    assert any(str(fetched / "dsyms" / HEX) in line for line in findings(lines, "invalid"))
    assert check("--repair")[0] == 0
    assert not (fetched / "dsyms" / HEX).exists()
    assert not os.path.lexists(link_of(fetched, HELLO_UUID))
    native_store(tmp_path / "store2")
    with ss.SymbolServer(tmp_path / "store2") as server:
        monkeypatch.setenv("DSYMFIND_SERVERS", f"native={server.url}/")
        assert (
            run_download(HELLO_UUID, os.environ, ignore_negative_cache=True, copy_executable=False)
            == 0
        )
    assert check()[0] == 0


def test_an_entry_without_links_is_a_leftover_that_repair_relinks(fetched: Path) -> None:
    link_of(fetched, HELLO_UUID).unlink()
    status, lines = check()
    assert status == 0
    (leftover,) = findings(lines, "leftover")
    assert "not linked yet" in leftover and HELLO_UUID in leftover
    check("--repair")
    assert os.path.exists(link_of(fetched, HELLO_UUID))
    run = run_helper(HELLO_UUID)
    assert run.entry(HELLO_UUID)["DBGDSYMPath"].startswith(str(fetched / "dsyms" / HEX))


def test_debris_of_dead_runs_is_a_leftover_but_a_live_download_is_left_alone(
    fetched: Path,
) -> None:
    cache = CachePaths(str(fetched))
    (fetched / "tmp" / f"{HEX}-dead").mkdir(parents=True)
    greet_hex = GREET_UUID.replace("-", "")
    (fetched / "tmp" / f"{greet_hex}-live").mkdir()
    (fetched / "answers" / f"{HEX}.99999999.tmp").write_bytes(b"half")
    (fetched / "downloads").mkdir(exist_ok=True)
    (fetched / "downloads" / f"{HEX}.json").write_text(
        json.dumps({"state": "running", "pid": 99999999})
    )
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire();"
            "print('held', flush=True); sys.stdin.read()",
            cache.lock_file(greet_hex),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        status, lines = check("--repair")
    finally:
        holder.communicate("")
    assert status == 0
    repaired = "\n".join(findings(lines, "repaired leftover"))
    assert f"{HEX}-dead" in repaired
    assert f"{HEX}.99999999.tmp" in repaired
    assert f"downloads/{HEX}.json" in repaired
    assert f"{greet_hex}-live" not in "\n".join(lines)
    assert (fetched / "tmp" / f"{greet_hex}-live").exists()
    assert not (fetched / "tmp" / f"{HEX}-dead").exists()


def test_what_dsymfind_did_not_make_is_reported_and_never_removed(fetched: Path) -> None:
    foreign = fetched / "dsyms" / "my-notes.txt"
    foreign.write_text("mine")
    status, lines = check("--repair")
    assert status == 0
    assert any("my-notes.txt" in line for line in findings(lines, "foreign"))
    assert foreign.read_text() == "mine"


def test_a_cache_others_can_write_is_invalid(fetched: Path) -> None:
    fetched.chmod(0o777)
    status, lines = check()
    assert status == 1
    assert "writable by other users" in lines[0]


def hold_lock(lock_file: str) -> subprocess.Popen[str]:
    """Another process holding a download lock until its stdin closes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire();"
            "print('held', flush=True); sys.stdin.read()",
            lock_file,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_repair_another_process_stands_in_the_way_of_is_not_reported_done(
    fetched: Path,
) -> None:
    shutil.rmtree(fetched / "dsyms" / HEX)  # the link to it now leads nowhere
    holder = hold_lock(CachePaths(str(fetched)).lock_file(HEX))
    try:
        status, lines = check("--repair")
    finally:
        holder.communicate("")
    assert status == 1
    (bad,) = findings(lines, "invalid")
    assert str(link_of(fetched, HELLO_UUID)) in bad
    assert not findings(lines, "repaired invalid")
    assert "repaired" not in lines[-1]
    assert os.path.lexists(link_of(fetched, HELLO_UUID))  # left to the lock's holder
    status, lines = check("--repair")
    assert status == 0 and findings(lines, "repaired invalid")
    assert lines[-1].endswith("(1 repaired)")


def test_repairs_happen_under_the_lock_while_checking(fetched: Path) -> None:
    cache = CachePaths(str(fetched))
    entry = fetched / "dsyms" / HEX
    dwarf = next(entry.glob("*.dSYM/Contents/Resources/DWARF/*"))
    dwarf.write_bytes(dwarf.read_bytes()[:100])
    judged = cache_check.Checker(cache, stale_after=3600).run()
    assert entry.exists() and not any(f.repaired for f in judged.findings)
    report = cache_check.Checker(cache, stale_after=3600, repair=True).run()
    (removed,) = [f for f in report.findings if f.kind == cache_check.INVALID]
    assert removed.repaired and removed.path == str(entry)
    assert not entry.exists() and not os.path.lexists(link_of(fetched, HELLO_UUID))
    assert not list((fetched / "tmp").glob("removed-*"))


def test_a_folder_in_a_bundles_dwarf_folder_is_no_dwarf_file(fetched: Path) -> None:
    dwarf_dir = next((fetched / "dsyms" / HEX).glob("*.dSYM/Contents/Resources/DWARF"))
    (dwarf_dir / "notes").mkdir()
    assert check() == (0, [f"{fetched}: 2 entries, 2 links checked; 0 invalid, 0 leftover"])


def uuid_plist(cache: Path) -> Path:
    return next((cache / "dsyms" / HEX).glob(f"*.dSYM/Contents/Resources/{HELLO_UUID}.plist"))


def test_a_plist_naming_an_executable_that_is_gone_is_invalid_and_repair_drops_the_key(
    fetched: Path,
) -> None:
    gone = fetched / "executables" / HEX / HELLO_UUID  # what an evicted executable leaves
    place.set_rich_executable(str(uuid_plist(fetched).parents[2]), HELLO_UUID, str(gone))
    status, lines = check()
    assert status == 1
    (bad,) = findings(lines, "invalid")
    assert bad.startswith(f"invalid: {uuid_plist(fetched)}: ") and f"{gone}" in bad
    status, lines = check("--repair")
    assert status == 0 and findings(lines, "repaired invalid")
    values = plistlib.loads(uuid_plist(fetched).read_bytes())
    assert "DBGSymbolRichExecutable" not in values
    assert Path(str(values["DBGDSYMPath"])).exists()  # the entry itself stays
    assert check() == (0, [f"{fetched}: 2 entries, 2 links checked; 0 invalid, 0 leftover"])


def test_a_plist_naming_a_dwarf_file_that_is_gone_is_invalid_and_repair_removes_the_entry(
    fetched: Path,
) -> None:
    plist = uuid_plist(fetched)
    values = plistlib.loads(plist.read_bytes())
    values["DBGDSYMPath"] = str(fetched / "elsewhere" / "hello")
    plist.write_bytes(plistlib.dumps(values))
    status, lines = check()
    assert status == 1
    (bad,) = findings(lines, "invalid")
    assert str(fetched / "elsewhere" / "hello") in bad
    assert check("--repair")[0] == 0
    assert not (fetched / "dsyms" / HEX).exists()
    assert not os.path.lexists(link_of(fetched, HELLO_UUID))
