"""dsymfind as real processes: the helper held to its whole contract, the CLI, and the
detached downloaders (found in /proc, since they are not our children)."""

from __future__ import annotations

import os
import plistlib
import pty
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from dsymfind.cache import locks, records
from dsymfind.macos import launcher
from dsymfind.paths import CachePaths
from support.fixtures import UNIVERSAL_UUIDS

# How xnu's lldb macros read the helper's answer: a regex, not a plist parser.
XNU_PAIR = re.compile(r"<key>(.*?)</key>\s*<string>(.*?)</string>")


BIN = Path(sys.executable).parent


class HelperRun:
    def __init__(self, done: subprocess.CompletedProcess[bytes]) -> None:
        self.stdout, self.stderr, self.returncode = done.stdout, done.stderr, done.returncode
        self.plist = plistlib.loads(done.stdout)

    def entry(self, uuid: str) -> dict[str, str]:
        value = self.plist[uuid]
        assert isinstance(value, dict)
        return value


def run_helper(*args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> HelperRun:
    """The installed `dsymForUUID` as a real process, held to the whole contract."""
    done = subprocess.run(
        [str(BIN / "dsymForUUID"), *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ if env is None else env),
        timeout=timeout,
        check=False,
    )
    assert done.stderr == b"", done.stderr
    assert done.returncode == 0
    assert done.stdout.startswith(b"<?xml"), done.stdout[:80]
    run = HelperRun(done)
    _check_xnu_view(run)
    return run


def assert_universal_answered(run: HelperRun, executable: Path) -> None:
    """Each slice of the universal fixture answered by UUID: its architecture, the executable."""
    assert set(run.plist) == set(UNIVERSAL_UUIDS.values())
    for arch, uuid in UNIVERSAL_UUIDS.items():
        entry = run.entry(uuid)
        assert entry["DBGArchitecture"] == arch
        assert entry["DBGSymbolRichExecutable"] == str(executable)


def _check_xnu_view(run: HelperRun) -> None:
    """Every string the plist holds is also what xnu's regex scrapes, pair by pair."""
    scraped = XNU_PAIR.findall(run.stdout.decode())
    expected = [
        (key, _xml_escaped(value)) for values in run.plist.values() for key, value in values.items()
    ]
    assert scraped == expected


def _xml_escaped(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    )


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dsymfind"), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ if env is None else env),
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is full: the first write to it blocks until it is read."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"\n")
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    return read_end, write_end


def interrupted_mid_copy(
    argv: list[str], folder: Path, store: Path, temp_files: str, *, patience: float
) -> tuple[int, str, str]:
    """`argv` (a long publish into the folder store `store`) run in `folder` with its stderr a
    full pipe (a CI log that stopped reading): its first progress line, at a tenth of its
    bytes, blocks it in the middle of a copy, seen by its temp file (`temp_files`, a glob);
    SIGINT then. Its exit status, the words it said on stderr, and its stdout."""
    read_end, write_end = full_pipe()
    with open(folder / "stdout", "w") as stdout:
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=write_end, cwd=folder
        )
    os.close(write_end)
    try:
        deadline = time.monotonic() + patience
        while not list(store.rglob(temp_files)):
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        with os.fdopen(read_end, "rb") as pipe:
            said = pipe.read().decode().split()  # the filler's newlines fall away
        status = child.wait(timeout=patience)
    finally:
        child.kill()
    return status, " ".join(said), (folder / "stdout").read_text()


def on_a_terminal(
    command: list[str], env: Mapping[str, str] | None = None, timeout: float = 60
) -> tuple[int, str]:
    """`command` run with a terminal (a pty) as its stdout and stderr, as in a shell: its exit
    status and everything it drew there."""
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        command,
        env=dict(os.environ if env is None else env),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    return child.wait(timeout=timeout), shown.decode()


# Imports that cost the helper more than its own start-up (measured with -X importtime).
COSTLY_MODULES = frozenset(
    {
        "httpx",
        "filelock",
        "macholib",
        "tomllib",
        "plistlib",
        "logging",
        "subprocess",
        "argparse",
        "json",
        "threading",
        "dataclasses",
    }
)


def modules_loaded_answering(uuid: str, expect: bytes) -> set[str]:
    """The modules a fresh interpreter has loaded after the helper answered `uuid`."""
    probe = (
        "import os, sys, time\n"
        "from dsymfind import helper\n"
        f"out = helper.respond([{uuid!r}], os.environ, started=time.monotonic())\n"
        f"assert {expect!r} in out, out\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def modules_loaded_launched(uuid: str, expect: bytes) -> set[str]:
    """The modules loaded after the helper answered `uuid` as the launcher runs it: an
    interpreter with -I -S, the import folders written in, then the helper's run() (what
    main() runs before it ends the process)."""
    probe = (
        "import sys\n"
        f"sys.path += {launcher.import_folders(sys.executable)!r}\n"
        f"sys.argv = ['dsymForUUID', {uuid!r}]\n"
        "from dsymfind.helper import run\n"
        "run()\n"
        "sys.__stdout__.write('\\0' + ' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, check=True, cwd="/"
    )
    answer, _, modules = done.stdout.partition(b"\0")
    assert expect in answer, answer
    loaded = set(modules.decode().split())
    assert "dsymfind.helper" in loaded, modules  # the listing itself came through
    return loaded


def modules_loaded_running(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter has loaded after `dsymfind ARGV` returned 0."""
    # stdout swapped by hand: contextlib would load functools, collections and types.
    probe = (
        "import io, sys\n"
        "from dsymfind.main import main\n"
        "stdout, sys.stdout = sys.stdout, io.StringIO()\n"
        f"status = main({argv!r})\n"
        "sys.stdout = stdout\n"
        "assert status == 0, status\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def wait_for(predicate: Callable[[], object], timeout: float = 30.0) -> None:
    """Until `predicate()` holds, looked at every 50 ms; fails the test past `timeout` s."""
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def children_of(pid: int) -> list[int]:
    """The live (not zombie) children of `pid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def is_resident(pid: int | str) -> bool:
    """Whether the process is a resident downloader (fetch/resident.py), which keeps the
    words of the downloader that forked it but is not at work: it alone runs in the folder
    of its socket (a downloader, and each child it forks, runs in /)."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/cwd")) == "locks"
    except OSError:
        return False


def started_as_downloader(uuid: str, home: str | None = None) -> list[int]:
    """Live processes started as the downloader of `uuid` whose HOME is `home` (the test's
    own HOME by default, so that other suites running on the machine at the same time are
    not counted), from /proc: downloaders, and a resident downloader and its children,
    which keep the words of the downloader that forked them."""
    wanted = f"HOME={os.environ.get('HOME', '') if home is None else home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            words = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if b"_download" not in words or uuid.encode() not in words:
                continue
            environment = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if wanted in environment and state != "Z":
            found.append(int(entry))
    return found


def downloader_pids(uuid: str, home: str | None = None) -> list[int]:
    """This test's downloaders at work on `uuid` (started_as_downloader): a resident
    downloader is not one at work."""
    return [pid for pid in started_as_downloader(uuid, home) if not is_resident(pid)]


def settled_record(cache: Path, uuid: str, *, timeout: float) -> dict[str, object]:
    """The download's final status record, once no downloader of it is left: the record
    final, the lock free, and no process of this test at work on it (a lookup after a
    failure starts another download, which takes the lock only after its start-up, while
    the former record still reads final; and a downloader logs its result after it lets
    go of the lock)."""
    cache = CachePaths(str(cache))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = records.read(cache, uuid)
        if (
            record
            and record["state"] in records.TERMINAL
            and not locks.is_held(cache, uuid)
            and not downloader_pids(uuid)
        ):
            return record
        time.sleep(0.05)
    raise AssertionError(f"the download of {uuid} did not finish in {timeout:g} s")


def fail_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a refused command (exit 1, nothing on stdout)."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@contextmanager
def lock_held_elsewhere(lock_file: str | os.PathLike[str]) -> Iterator[None]:
    """The flock on `lock_file` held by another live process, as a downloader holds its
    UUID's lock, until the block ends."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import filelock, sys\n"
            "lock = filelock.FileLock(sys.argv[1]); lock.acquire()\n"
            "print('held', flush=True); sys.stdin.read()",
            os.fspath(lock_file),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.communicate("", timeout=30)
