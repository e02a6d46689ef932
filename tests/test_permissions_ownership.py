"""OpenSSH StrictModes for the cache: every folder above it ours or root's and not writable
by others (sticky ones like /tmp excepted), every folder in it ours and private, no symlink
followed where the cache keeps a folder of its own, and no remembered answer naming a dSYM
outside the cache and the configured sources.

The suite runs as root, so "another user" is a folder given to uid 65534 (nobody) with
os.chown; root itself counts as trusted, as it does for OpenSSH.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    dwarf_of,
    link_of,
    make_tree_link,
    toml_list,
    write_config,
    zip_bundles,
)
from support.processes import run_cli, run_helper

from dsymfind import _bare_os, answers, atomic, permissions
from dsymfind.errors import DsymfindError
from dsymfind.uuids import uuid_hex

NOBODY = 65534
HEX = uuid_hex(HELLO_UUID)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def given_away(folder: Path, folder_mode: int = 0o755) -> Path:
    """A folder another user owns."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, NOBODY, -1)
    folder.chmod(folder_mode)
    return folder


def their_hello(tmp_path: Path) -> Path:
    """Another user's copy of hello.dSYM (the same UUID, in a folder of theirs)."""
    theirs = given_away(tmp_path / "theirs")
    shutil.copytree(FIXTURES / "hello.dSYM", theirs / "hello.dSYM")
    for path in [theirs, *theirs.rglob("*")]:
        os.chown(path, NOBODY, -1, follow_symlinks=False)
    return dwarf_of(theirs / "hello.dSYM")


def refused(cache: Path, match: str) -> None:
    assert permissions.unsafe(str(cache)) is not None
    with pytest.raises(DsymfindError, match=match):
        permissions.secure_cache(str(cache))


def indexed_cache(tmp_path: Path, cache_dir: Path) -> Path:
    """A cache holding hello's dSYM in dsyms/<HEX> (an unpacked zip), and its answer."""
    delivery = zip_bundles(tmp_path / "dSYMs.zip", [FIXTURES / "hello.dSYM"])
    done = run_cli("index", str(delivery))
    assert done.returncode == 0, done.stderr
    assert (cache_dir / "dsyms" / HEX).is_dir()
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGDSYMPath"].startswith(str(cache_dir / "dsyms" / HEX))
    assert (cache_dir / "answers" / HEX).is_file()
    return cache_dir


# the folders above the cache


@needs_root
def test_a_parent_another_user_owns_is_refused_even_when_not_writable(tmp_path: Path) -> None:
    parent = given_away(tmp_path / "theirs", 0o755)
    refused(parent / "cache", "belongs to another user")
    assert not (parent / "cache").exists()  # refused before anything was made there
    (parent / "cache").mkdir(mode=0o700)  # made by them for us, say: still theirs to swap
    refused(parent / "cache", rf"{parent}, which holds it, belongs to another user")


def test_our_own_parent_writable_by_everyone_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "mine"
    parent.mkdir()
    parent.chmod(0o777)
    refused(parent / "cache", r"which holds it, is writable by other users.*chmod go-w")


@pytest.mark.parametrize("loose", [0o777, 0o757, 0o775])
def test_a_writable_grandparent_is_refused(tmp_path: Path, loose: int) -> None:
    grandparent = tmp_path / "shared"
    (grandparent / "me").mkdir(parents=True)
    grandparent.chmod(loose)
    refused(grandparent / "me" / "cache", rf"{grandparent}, which holds it, is writable")


def test_a_sticky_world_writable_grandparent_like_tmp_is_accepted(tmp_path: Path) -> None:
    sticky = tmp_path / "tmp"
    (sticky / "me").mkdir(parents=True)
    sticky.chmod(0o1777)
    permissions.secure_cache(str(sticky / "me" / "cache"))
    assert mode(sticky / "me" / "cache") == 0o700
    assert permissions.unsafe(str(sticky / "me" / "cache")) is None


def test_a_sticky_cache_folder_itself_is_still_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o1777)  # sticky keeps others from renaming our names, not from adding theirs
    refused(cache, "writable by other users")


def test_a_writable_folder_reached_through_a_symlink_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (tmp_path / "link").symlink_to(shared)
    refused(tmp_path / "link" / "cache", rf"{shared}, which holds it, is writable")


def test_the_helper_refuses_a_cache_under_another_users_folder(
    tmp_path: Path, products: Path, config_file: Path
) -> None:
    parent = given_away(tmp_path / "theirs", 0o755)
    write_config(
        config_file,
        f"cache_dir = '{parent / 'cache'}'\nsearch_paths = {toml_list([products])}\n",
    )
    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert "refusing the cache" in error and "belongs to another user" in error
    assert not (parent / "cache").exists()


# the folders inside the cache


def test_a_writable_dsyms_folder_is_refused_by_helper_doctor_status_and_check(
    tmp_path: Path, cache_dir: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    (cache_dir / "dsyms").chmod(0o777)

    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert "refusing the cache" in error
    assert f"{cache_dir / 'dsyms'} is writable by other users" in error
    assert f"chmod 700 {cache_dir / 'dsyms'}" in error

    doctor = run_cli("doctor")
    cache_lines = [line for line in doctor.stdout.splitlines() if " cache: " in line]
    assert cache_lines and cache_lines[0].startswith("FAIL "), doctor.stdout
    assert f"{cache_dir / 'dsyms'} is writable by other users" in cache_lines[0]
    assert f"fix: chmod 700 {cache_dir / 'dsyms'}" in doctor.stdout
    assert doctor.returncode == 1

    status = run_cli("status")
    assert status.returncode == 0, status.stderr
    assert f"UNSAFE: {cache_dir / 'dsyms'} is writable by other users" in status.stdout
    assert f"chmod 700 {cache_dir / 'dsyms'}" in status.stdout
    report = json.loads(run_cli("status", "--json").stdout)
    assert any("dsyms is writable by other users" in line for line in report["unsafe"])

    check = run_cli("check")
    assert check.returncode == 1
    assert f"invalid: {cache_dir / 'dsyms'} is writable by other users" in check.stdout

    fetch = run_cli("index", str(FIXTURES / "hello.dSYM"))
    assert fetch.returncode == 1 and fetch.stderr.count("\n") == 1
    assert "refusing the cache" in fetch.stderr


def test_a_writable_folder_deep_in_the_cache_is_reported(tmp_path: Path, cache_dir: Path) -> None:
    indexed_cache(tmp_path, cache_dir)
    deep = next((cache_dir / "dsyms" / HEX).glob("*.dSYM/Contents"))
    deep.chmod(0o757)
    check = run_cli("check")
    assert check.returncode == 1
    assert f"invalid: {deep} is writable by other users" in check.stdout
    assert f"UNSAFE: {deep} is writable by other users" in run_cli("status").stdout
    doctor = run_cli("doctor")
    assert f"{deep} is writable by other users" in doctor.stdout and doctor.returncode == 1


@needs_root
def test_a_folder_of_another_user_inside_the_cache_is_refused(
    tmp_path: Path, cache_dir: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    given_away(cache_dir / "answers", 0o700)
    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert f"{cache_dir / 'answers'} belongs to another user (uid {NOBODY})" in error
    assert "chown" in error


def test_a_symlink_in_place_of_a_cache_folder_is_refused(tmp_path: Path, cache_dir: Path) -> None:
    indexed_cache(tmp_path, cache_dir)
    elsewhere = tmp_path / "elsewhere"
    (cache_dir / "answers").rename(elsewhere)
    (cache_dir / "answers").symlink_to(elsewhere)
    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert f"{cache_dir / 'answers'} is a symlink" in error and "never followed" in error
    done = run_cli("check")
    assert done.returncode == 1 and "is a symlink" in done.stdout


# a symlink planted where the cache keeps an entry


@needs_root
def test_a_symlink_planted_at_an_entry_is_never_followed_nor_linked(
    tmp_path: Path, cache_dir: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    link_of(cache_dir, HELLO_UUID).unlink()
    shutil.rmtree(cache_dir / "dsyms" / HEX)
    shutil.rmtree(cache_dir / "answers")
    theirs = their_hello(tmp_path)
    planted = cache_dir / "dsyms" / HEX
    planted.symlink_to(theirs.parents[4])  # their folder holding hello.dSYM

    # The downloader (no servers: it would only relink what it finds) refuses.
    download = run_cli("_download", HELLO_UUID)
    assert download.returncode == 1
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "DBGDSYMPath" not in entry
    assert f"{planted} is a symlink" in entry["DBGError"]
    assert "dsymfind check --repair" in entry["DBGError"]

    index = run_cli("index", str(tmp_path / "dSYMs.zip"))
    assert index.returncode == 1 and f"{planted} is a symlink" in index.stderr
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))

    check = run_cli("check")
    assert check.returncode == 1
    (line,) = [x for x in check.stdout.splitlines() if x.startswith("invalid: ")]
    assert line.startswith(f"invalid: {planted}: ") and "symlink" in line
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))  # check relinked nothing

    repair = run_cli("check", "--repair")
    assert repair.returncode == 0, repair.stdout
    assert f"repaired invalid: {planted}" in repair.stdout
    assert not os.path.lexists(planted)
    assert theirs.exists()  # their files are theirs: only the link went
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert run_helper(HELLO_UUID).plist == {}  # a plain miss now (no servers)


@needs_root
def test_a_tree_link_through_a_planted_entry_symlink_is_not_answered(
    tmp_path: Path, cache_dir: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    shutil.rmtree(cache_dir / "dsyms" / HEX)
    shutil.rmtree(cache_dir / "answers")
    theirs = their_hello(tmp_path)
    (cache_dir / "dsyms" / HEX).symlink_to(theirs.parents[4])
    # The tree link the cache made still names dsyms/<HEX>/hello.dSYM/...: now theirs.
    assert link_of(cache_dir, HELLO_UUID).resolve() == theirs.resolve()
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "DBGDSYMPath" not in entry and "symlink" in entry["DBGError"]
    check = run_cli("check")
    assert str(link_of(cache_dir, HELLO_UUID)) in check.stdout
    assert check.returncode == 1


@needs_root
def test_a_symlinked_folder_in_the_uuid_tree_is_not_followed(
    tmp_path: Path, cache_dir: Path
) -> None:
    cache_dir.mkdir(parents=True, mode=0o700)
    theirs = their_hello(tmp_path)
    their_tree = given_away(tmp_path / "their-tree")
    make_tree_link(their_tree, HELLO_UUID, theirs, relative=False)
    (cache_dir / "uuids").mkdir(mode=0o700)
    first = HEX[:4]
    (cache_dir / "uuids" / first).symlink_to(their_tree / first)
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "DBGDSYMPath" not in entry
    assert f"{cache_dir / 'uuids' / first} is a symlink" in entry["DBGError"]
    check = run_cli("check")
    assert check.returncode == 1 and f"invalid: {cache_dir / 'uuids' / first}: " in check.stdout
    assert run_cli("check", "--repair").returncode == 0
    assert not os.path.lexists(cache_dir / "uuids" / first)
    assert (their_tree / first).is_dir()


# remembered answers


def poison(cache_dir: Path, dwarf: Path, origin: str = "cache") -> Path:
    """An answers/<HEX> naming `dwarf`, as the swap race left one: every stamp valid."""
    via = str(link_of(cache_dir, HELLO_UUID))  # the cache's tree entry, absent when made
    record = answers.make_record(
        {"DBGDSYMPath": str(dwarf), "DBGArchitecture": "arm64"}, origin, [via]
    )
    answers.keep(str(cache_dir / "answers"), HELLO_UUID, record)
    return cache_dir / "answers" / HEX


@needs_root
def test_a_poisoned_answer_outside_the_cache_and_sources_is_a_miss(
    tmp_path: Path, cache_dir: Path
) -> None:
    cache_dir.mkdir(parents=True, mode=0o700)
    theirs = their_hello(tmp_path)
    poisoned = poison(cache_dir, theirs)
    assert answers.recall(str(cache_dir / "answers"), HELLO_UUID, ["cache"]) is None
    assert run_helper(HELLO_UUID).plist == {}  # a miss (no servers), not their dSYM

    poisoned = poison(cache_dir, theirs)
    check = run_cli("check")
    assert check.returncode == 1
    (line,) = [x for x in check.stdout.splitlines() if x.startswith("invalid: ")]
    assert line.startswith(f"invalid: {poisoned}: ") and str(theirs) in line
    repair = run_cli("check", "--repair")
    assert repair.returncode == 0 and f"repaired invalid: {poisoned}" in repair.stdout
    assert not poisoned.exists()
    assert theirs.exists()


@needs_root
def test_a_poisoned_answer_falls_back_to_the_real_lookup(tmp_path: Path, cache_dir: Path) -> None:
    indexed_cache(tmp_path, cache_dir)
    theirs = their_hello(tmp_path)
    poison(cache_dir, theirs)
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGDSYMPath"].startswith(str(cache_dir / "dsyms" / HEX))
    # ... and the real answer replaced the poisoned one.
    assert run_cli("check").returncode == 0


@needs_root
def test_a_poisoned_answer_claiming_a_search_path_outside_it_is_a_miss(
    tmp_path: Path, cache_dir: Path, products: Path, config_file: Path
) -> None:
    write_config(config_file, f"search_paths = {toml_list([products])}\n")
    cache_dir.mkdir(parents=True, mode=0o700)
    theirs = their_hello(tmp_path)
    poison(cache_dir, theirs, origin=f"search path {products}")
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGDSYMPath"] == str(dwarf_of(products / "hello.dSYM"))


def test_legitimate_answers_are_still_served_from_memory(
    tmp_path: Path, cache_dir: Path, products: Path
) -> None:
    """In the cache, in a user's bundle the tree links in place: both remembered and recalled."""
    indexed_cache(tmp_path, cache_dir)
    assert run_cli("index", str(products / "libgreet.dylib.dSYM")).returncode == 0
    for uuid in (HELLO_UUID, GREET_UUID):
        first = run_helper(uuid).entry(uuid)["DBGDSYMPath"]
        remembered = (cache_dir / "answers" / uuid_hex(uuid)).stat()
        assert run_helper(uuid).entry(uuid)["DBGDSYMPath"] == first
        again = (cache_dir / "answers" / uuid_hex(uuid)).stat()
        assert (again.st_ino, again.st_mtime_ns) == (remembered.st_ino, remembered.st_mtime_ns)
    assert Path(run_helper(GREET_UUID).entry(GREET_UUID)["DBGDSYMPath"]).is_relative_to(products)
    check = run_cli("check")
    assert check.returncode == 0 and " 0 invalid" in check.stdout, check.stdout


def test_the_hot_path_checks_with_a_handful_of_calls(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ancestors and the root: one lstat each; the cache's folders: one fstatat each."""
    indexed_cache(tmp_path, cache_dir)
    calls: list[str] = []
    for name in ("lstat", "stat", "open", "readlink", "listdir", "scandir"):
        real = getattr(os, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            calls.append(_name)
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(os, name, counted)
        monkeypatch.setattr(_bare_os, name, counted)  # what the hot path calls them through
    permissions.refuse_unsafe(str(cache_dir))
    monkeypatch.undo()
    depth = len(cache_dir.parts)
    assert "listdir" not in calls and "scandir" not in calls
    assert calls
    assert len(calls) <= depth + 1 + len(permissions.OWN_FOLDERS) + 1, calls


def test_a_shadow_answer_is_served_from_memory_and_checks_clean(
    products: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """A shadow's DWARF file links to the user's: the one link the cache's entries hold."""
    done = run_cli("index", str(products / "hello.dSYM"), "--source-map", f"/b={tmp_path}")
    assert done.returncode == 0, done.stderr
    first = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert first["DBGDSYMPath"].startswith(str(cache_dir / "dsyms" / HEX))
    remembered = (cache_dir / "answers" / HEX).stat()
    assert run_helper(HELLO_UUID).entry(HELLO_UUID) == first
    assert (cache_dir / "answers" / HEX).stat().st_ino == remembered.st_ino
    check = run_cli("check")
    assert check.returncode == 0 and " 0 invalid" in check.stdout, check.stdout
    assert "UNSAFE" not in run_cli("status").stdout


def test_under_a_loose_umask_the_admin_commands_make_nothing_others_may_write(
    products: Path, cache_dir: Path
) -> None:
    import subprocess

    from support.processes import BIN

    done = subprocess.run(
        ["sh", "-c", f'umask 002; exec "{BIN / "dsymfind"}" index "{products}"'],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for folder in [cache_dir, *(p for p in cache_dir.rglob("*") if p.is_dir())]:
        assert mode(folder) & 0o022 == 0, folder
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)


def test_a_writer_never_links_through_a_symlinked_tree_folder(
    tmp_path: Path, cache_dir: Path
) -> None:
    """index (like the downloader) makes tree links: not inside a folder planted by link."""
    cache_dir.mkdir(parents=True, mode=0o700)
    (cache_dir / "uuids").mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache_dir / "uuids" / HEX[:4]).symlink_to(elsewhere)
    bundle = tmp_path / "mine" / "hello.dSYM"
    shutil.copytree(FIXTURES / "hello.dSYM", bundle)
    done = run_cli("index", str(bundle.parent))
    assert done.returncode == 1
    assert "is a symlink where the UUID tree keeps a folder" in done.stdout + done.stderr
    assert list(elsewhere.iterdir()) == []


# a symlink on the way to the cache


def their_link_to(tmp_path: Path, folder: Path) -> Path:
    """A symlink another user planted in a sticky shared folder (like /tmp), pointing to
    `folder`: every folder on the way is fine, yet they may repoint the link at will."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    link = shared / "symbols"
    link.symlink_to(folder)
    os.chown(link, NOBODY, -1, follow_symlinks=False)
    return link


@needs_root
def test_a_cache_reached_through_another_users_symlink_is_refused_and_named(
    tmp_path: Path, cache_dir: Path, config_file: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    link = their_link_to(tmp_path, cache_dir)
    write_config(config_file, f"cache_dir = '{link}'\n")
    named = f"{link}, a symlink on the way to it, belongs to another user (uid {NOBODY})"

    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert "refusing the cache" in error and named in error
    status = run_cli("status")
    assert status.returncode == 0 and f"UNSAFE: {named}" in status.stdout
    doctor = run_cli("doctor")
    assert doctor.returncode == 1 and named in doctor.stdout
    check = run_cli("check")
    assert check.returncode == 1 and f"invalid: {named}" in check.stdout

    # Ours, but in a folder others may write, as OpenSSH's StrictModes refuses it.
    os.chown(link, os.getuid(), -1, follow_symlinks=False)
    error = run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert f"{link}, a symlink on the way to it, sits in {link.parent}, which others" in error

    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    (own / "symbols").symlink_to(cache_dir)
    write_config(config_file, f"cache_dir = '{own / 'symbols'}'\n")
    assert permissions.refuse_unsafe(str(own / "symbols")) == str(cache_dir)  # used from then on
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGDSYMPath"].startswith(str(cache_dir / "dsyms" / HEX))


def test_a_remembered_answer_with_no_files_behind_it_is_a_miss(
    tmp_path: Path, cache_dir: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    answers_dir = str(cache_dir / "answers")
    assert answers.recall(answers_dir, HELLO_UUID, ["cache"]) is not None
    record = atomic.read_marshal(os.path.join(answers_dir, HEX))
    answers.keep(answers_dir, HELLO_UUID, {**record, "files": []})
    assert answers.recall(answers_dir, HELLO_UUID, ["cache"]) is None
    unstamped = [(p, s) for p, s in record["files"] if p != record["answer"]["DBGDSYMPath"]]
    answers.keep(answers_dir, HELLO_UUID, {**record, "files": unstamped})
    assert answers.recall(answers_dir, HELLO_UUID, ["cache"]) is None


def test_a_remembered_answer_naming_a_cache_path_outside_its_entries_is_a_miss(
    tmp_path: Path, cache_dir: Path
) -> None:
    indexed_cache(tmp_path, cache_dir)
    loose = cache_dir / "hello.dSYM"  # in the root, ours, but in no entry
    shutil.copytree(FIXTURES / "hello.dSYM", loose)
    poisoned = poison(cache_dir, dwarf_of(loose))
    assert answers.recall(str(cache_dir / "answers"), HELLO_UUID, ["cache"]) is None
    answer = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert answer["DBGDSYMPath"].startswith(str(cache_dir / "dsyms" / HEX))

    poison(cache_dir, dwarf_of(loose))
    check = run_cli("check")
    assert check.returncode == 1
    assert f"invalid: {poisoned}: " in check.stdout and "in none of its entries" in check.stdout
