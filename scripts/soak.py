"""A soak of dsymfind under load, with maintenance running, held to every invariant.

Workers look UUIDs up through the real `dsymForUUID`, as many at once as there are
workers, a fixed number of lookups in all: UUIDs indexed into the cache (from a zip, so
`gc` may evict them), UUIDs only a loopback symbol server has, and UUIDs nobody has,
half of them the way LLDB 15+'s crashlog asks (`--ignoreNegativeCache
--copyExecutable`). The server is hostile: it resets, stalls, fails with 5xx, cuts
bodies short and serves wrong bytes (another UUID's dSYM, the executable for the dSYM).
A fixed number of SIGKILLs, spread over the lookups, hit helpers and downloaders, while
`gc --max-size 0`, `check --repair`, `index` and `fetch` loop alongside.

Every answer is judged as soon as its helper exits: one valid XML plist, not a byte on
stderr, exit 0, within the helper's deadline plus a margin, only the UUID asked about,
and every path it names existing and carrying that UUID. Throughout, no two processes
hold one UUID's download lock (two live downloads of one UUID); maintenance runs find
nothing invalid; afterwards `dsymfind check` finds the cache clean. The figures (answers
by kind, answer times, kills, faults served) are printed, and with `--json` written.

Everything is bounded by count; the run's length is what the machine makes of it.
`scripts/soak` runs it (bootstrapping the venv); the suite runs it small
(tests/scenarios/test_soak.py), and scripts/bench at the size below.
"""

from __future__ import annotations

import argparse
import json
import os
import plistlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import bench_fixtures as fixtures

from dsymfind.apple import macho
from dsymfind.uuids import tree_entry, uuid_hex

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import symbol_server as ss  # noqa: E402 - test helpers, not a package
from support.fixtures import FIXTURES, HELLO_UUID, zip_bundles  # noqa: E402
from support.processes import is_resident  # noqa: E402

BIN = Path(sys.executable).parent
HELPER = str(BIN / "dsymForUUID")
CLI = str(BIN / "dsymfind")
# The soak: what scripts/bench runs.
WORKERS, LOOKUPS, KILLS = 8, 3000, 50
# UUIDs of each kind; a few dozen, so that lookups, downloads and evictions meet.
PER_KIND = 24
# The helper's own deadline, and its downloader's (stalls end there).
TIMEOUT = 2.0
DOWNLOAD_TIMEOUT = 6.0
# An answer later than the deadline by more than this is late: process start-up and exit,
# which the helper's deadline does not count, on a machine this run loads.
LATE_MARGIN = 1.0
# Unknown UUIDs asked again soon answer from the negative cache; a failing server is
# skipped for a second only, or the hostile server would leave nothing but backoff errors.
NEGATIVE_CACHE_TTL = 30
SERVER_BACKOFF = 1
# What the server does with a request, and how often (weights).
FAULTS = {"good": 45, "reset": 10, "stall": 8, "5xx": 12, "wrong bytes": 15, "truncated": 10}
CRASHLOG_FLAGS = ("--ignoreNegativeCache", "--copyExecutable")
# Only stops a hung process: a run this long is a failure whatever it was doing.
RUN_LIMIT = 600.0
# How often the lock watcher looks, and how long a maintenance loop pauses between runs:
# back to back, gc --max-size 0 would leave nothing cached to answer from.
WATCH_INTERVAL = 0.05
MAINTENANCE_PAUSE = 1.0
# A bare interpreter's start is timed once every this many seconds.
BARE_START_PAUSE = 1.0
# A kill waits this many looks, WATCH_INTERVAL apart, for a downloader to be alive.
KILL_LOOKS = 20
# UUIDs each `dsymfind fetch` run asks for.
FETCH_BATCH = 3
PATH_KEYS = ("DBGDSYMPath", "DBGSymbolRichExecutable")
KILLED = "killed by the soak"
# `<HEX>.lock`: a UUID's download lock (not its `.spawn.lock` or `.use.lock`).
DOWNLOAD_LOCK_NAME = len("0" * 32 + ".lock")
# What a DBGError says, told apart by a phrase of it (fetch/miss.py, fetch/memory.py).
ERROR_REASONS = (
    ("continues in the background", "download continues at the deadline"),
    ("failed recently", "every server in backoff"),
    ("stopped without a result", "its downloader was killed"),
    ("failed:", "download failed"),
)
# A file as /proc/locks names it: device major and minor numbers, inode.
FileId = tuple[int, int, int]
# Violations printed; the count says how many there were.
MAX_SHOWN = 40


@dataclass(frozen=True)
class Size:
    workers: int = WORKERS
    lookups: int = LOOKUPS
    kills: int = KILLS


@dataclass(frozen=True)
class Lookup:
    kind: str  # indexed, served or unknown
    uuid: str
    flags: tuple[str, ...]


@dataclass(frozen=True)
class HelperRun:
    """One helper process: how it ended, what it printed, how long it took, and the paths
    its answer names that did not exist right after it exited."""

    pid: int
    returncode: int
    stdout: bytes
    stderr: bytes
    seconds: float
    missing: list[str]


@dataclass
class Figures:
    """What the run measured; `violations` empty is the verdict."""

    size: dict[str, int]
    late_margin: float
    seconds: float = 0.0
    answers: Counter[str] = field(default_factory=Counter)
    answer_ms: list[float] = field(default_factory=list)
    kills: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    maintenance: Counter[str] = field(default_factory=Counter)
    downloads_seen: int = 0
    most_holders: int = 0  # of one UUID's download lock at once
    late: int = 0  # answers past the deadline and the margin (violations too)
    bare_start_ms: list[float] = field(default_factory=list)  # `python -I -S -c pass`
    violations: list[str] = field(default_factory=list)
    final_check: str = ""

    def summary(self) -> dict[str, object]:
        """For --json: plain dicts and numbers."""
        times = sorted(self.answer_ms)
        return {
            "size": self.size,
            "deadline_ms": TIMEOUT * 1000,
            "late_margin_ms": self.late_margin * 1000,
            "seconds": round(self.seconds, 1),
            "answers": dict(self.answers),
            "answer_ms": _percentiles(times) if times else None,
            "kills": dict(self.kills),
            "faults": dict(self.faults),
            "maintenance": dict(self.maintenance),
            "downloads_seen": self.downloads_seen,
            "most_holders": self.most_holders,
            "late": self.late,
            "bare_start_ms": _percentiles(sorted(self.bare_start_ms))
            if self.bare_start_ms
            else None,
            "final_check": self.final_check,
            "violations": self.violations,
        }


class Soak:
    def __init__(self, work: Path, size: Size, *, seed: int, late_margin: float) -> None:
        self.work, self.size, self.late_margin = work, size, late_margin
        self.rng = random.Random(seed)
        self.home = work / "home"
        self.cache = self.home / "cache"
        self.figures = Figures(asdict(size), late_margin)
        self.lock = threading.Lock()
        self.done = threading.Event()  # the workers have finished every lookup
        self.finished = 0
        self.progress = threading.Condition(self.lock)
        self.live_helpers: dict[int, subprocess.Popen[bytes]] = {}
        self.killed: set[int] = set()
        self.uuids: dict[str, list[str]] = {}
        self.zipped = work / "indexed.zip"
        self.server: ss.SymbolServer | None = None

    # -- fixtures --------------------------------------------------------------

    def prepare(self) -> None:
        """Bundles of three kinds of UUID: indexed (a zip), served, and nobody's."""
        tree = fixtures.BundleTree(self.work / "bundles", 2 * PER_KIND)
        tree.build()
        numbers = {"indexed": range(PER_KIND), "served": range(PER_KIND, 2 * PER_KIND)}
        numbers["unknown"] = range(2 * PER_KIND, 3 * PER_KIND)
        self.uuids = {k: [fixtures.bench_uuid(n) for n in r] for k, r in numbers.items()}
        zip_bundles(self.zipped, [tree.bundle(n) for n in numbers["indexed"]])
        served = self.work / "served"
        executable = (FIXTURES / "hello").read_bytes()
        for number in numbers["served"]:
            uuid = fixtures.bench_uuid(number)
            fixtures.serve_native(served, uuid, tree.dwarf(number))
            app = Path(tree_entry(str(served), uuid) + ".app")
            app.write_bytes(_with_uuid(executable, HELLO_UUID, uuid))
        self.server = ss.SymbolServer(served).start()
        self.server.fallback = HostileRoute(served, self.rng.random(), self.figures.faults)
        self._write_config()

    def _write_config(self) -> None:
        assert self.server is not None
        config = self.home / ".config" / "dsymfind" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            f"cache_dir = {json.dumps(str(self.cache))}\ntimeout = {TIMEOUT}\n"
            f"download_timeout = {DOWNLOAD_TIMEOUT}\n"
            f"negative_cache_ttl = {NEGATIVE_CACHE_TTL}\nserver_backoff = {SERVER_BACKOFF}\n"
            f"[[servers]]\nurl = '{self.server.url}/'\nlayout = 'native'\n"
        )

    def env(self) -> dict[str, str]:
        """The environment of every process: a home of its own, no dsymfind overrides."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSYMFIND_")}
        env["HOME"] = str(self.home)
        for var, sub in (
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_STATE_HOME", ".state"),
        ):
            env[var] = str(self.home / sub)
        return env

    def plan(self) -> list[Lookup]:
        kinds = list(self.uuids)
        return [
            Lookup(
                kind,
                self.rng.choice(self.uuids[kind]),
                CRASHLOG_FLAGS if self.rng.random() < 0.5 else (),
            )
            for kind in (self.rng.choice(kinds) for _ in range(self.size.lookups))
        ]

    # -- the run ---------------------------------------------------------------

    def run(self) -> Figures:
        started = time.monotonic()
        assert self.cli(["index", str(self.zipped)]).returncode == 0
        lookups = self.plan()
        queue = iter(lookups)
        actors = [
            threading.Thread(target=self.work_through, args=(queue,))
            for _ in range(self.size.workers)
        ]
        alongside = [
            threading.Thread(target=self.killer),
            threading.Thread(target=self.watch_locks),
            threading.Thread(target=self.time_bare_starts),
            *(
                threading.Thread(target=self.maintain, args=(name, argv))
                for name, argv in self.maintenance()
            ),
        ]
        for thread in actors + alongside:
            thread.start()
        for thread in actors:
            thread.join()
        self.done.set()
        with self.progress:
            self.progress.notify_all()
        for thread in alongside:
            thread.join()
        self.settle()
        self.final_check()
        self.figures.seconds = time.monotonic() - started
        return self.figures

    def work_through(self, queue: Iterator[Lookup]) -> None:
        while True:
            with self.lock:
                lookup = next(queue, None)
            if lookup is None:
                return
            self.judge(lookup, self.ask(lookup))
            with self.progress:
                self.finished += 1
                self.progress.notify_all()

    def ask(self, lookup: Lookup) -> HelperRun:
        began = time.monotonic()
        helper = subprocess.Popen(
            [HELPER, *lookup.flags, lookup.uuid],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env(),
        )
        with self.lock:
            self.live_helpers[helper.pid] = helper
        try:
            out, err = helper.communicate(timeout=RUN_LIMIT)
        except subprocess.TimeoutExpired:
            helper.kill()  # hung: judged late, and by what it printed (nothing, likely)
            out, err = helper.communicate()
        finally:
            with self.lock:
                del self.live_helpers[helper.pid]
        seconds = time.monotonic() - began
        missing = [p for p in _named_paths(out, lookup.uuid) if not os.path.exists(p)]
        return HelperRun(helper.pid, helper.returncode, out, err, seconds, missing)

    def judge(self, lookup: Lookup, run: HelperRun) -> None:
        with self.lock:
            killed = run.returncode == -signal.SIGKILL and run.pid in self.killed
        if killed:
            self.count_answer(KILLED, run.seconds)
            return
        asked = f"{' '.join(lookup.flags)} {lookup.uuid} ({lookup.kind})".strip()
        problems = _contract_problems(run, lookup.uuid)
        answer: dict[str, str] = {}
        if not problems:
            answer = plistlib.loads(run.stdout).get(lookup.uuid, {})
            problems = _answer_problems(answer, lookup, run.missing)
        if run.seconds > TIMEOUT + self.late_margin:
            problems.append(f"late: answered after {run.seconds:.2f} s (deadline {TIMEOUT:g} s)")
            with self.lock:
                self.figures.late += 1
        for problem in problems:
            self.violation(f"{asked}: {problem}")
        self.count_answer(_kind_of(answer), run.seconds)

    def count_answer(self, kind: str, elapsed: float) -> None:
        with self.lock:
            self.figures.answers[kind] += 1
            if kind != KILLED:
                self.figures.answer_ms.append(elapsed * 1000)

    def violation(self, text: str) -> None:
        with self.lock:
            self.figures.violations.append(text)
        self.note(f"VIOLATION {text}")

    def note(self, text: str) -> None:
        """A line in `soak.log`, with the time: what to read beside dsymfind's own log when
        a violation needs explaining (--keep)."""
        with self.lock, open(self.work / "soak.log", "a") as log:
            log.write(f"{time.time():.3f} {text}\n")

    # -- kills -----------------------------------------------------------------

    def killer(self) -> None:
        """Kill i falls due once i/(kills+1) of the lookups are done; downloaders and helpers
        take turns (a helper when no downloader is alive)."""
        for number in range(self.size.kills):
            due = self.size.lookups * (number + 1) // (self.size.kills + 1)
            with self.progress:
                while self.finished < due and not self.done.is_set():
                    self.progress.wait()
            if self.done.is_set():
                return
            if not (number % 2 == 0 and self.kill_downloader()):
                self.kill_helper()

    def kill_downloader(self) -> bool:
        for _ in range(KILL_LOOKS):
            pids = [pid for pid, argv in self.processes() if "_download" in argv]
            if pids:
                try:
                    os.kill(self.rng.choice(pids), signal.SIGKILL)
                except ProcessLookupError:
                    continue  # it ended meanwhile
                with self.lock:
                    self.figures.kills["downloaders"] += 1
                return True
            time.sleep(WATCH_INTERVAL)
        return False

    def kill_helper(self) -> None:
        for _ in range(KILL_LOOKS):
            with self.lock:
                live = [p for p in self.live_helpers.values() if p.returncode is None]
                victim = self.rng.choice(live) if live else None
                if victim is not None:
                    self.killed.add(victim.pid)
            if victim is not None:
                victim.send_signal(signal.SIGKILL)  # a no-op once it has been reaped
                with self.lock:
                    self.figures.kills["helpers"] += 1
                return
            time.sleep(WATCH_INTERVAL)

    def processes(self) -> Iterator[tuple[int, list[str]]]:
        """The processes of this soak (its HOME in their environment) with their argv.

        The command line is read first, and the environment only of dsymfind's own: a scan
        every WATCH_INTERVAL must not load the machine it measures."""
        home = f"HOME={self.home}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes()
                if b"dsymfind" not in argv and b"dsymForUUID" not in argv:
                    continue
                if home not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    continue
            except OSError:
                continue
            yield int(entry), argv.decode(errors="replace").split("\0")

    # -- what the machine gives ------------------------------------------------

    def time_bare_starts(self) -> None:
        """How long a bare interpreter takes to start and exit meanwhile: what the load
        adds to every helper's own time, beside its deadline."""
        while not self.done.is_set():
            began = time.monotonic()
            subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=False)
            with self.lock:
                self.figures.bare_start_ms.append((time.monotonic() - began) * 1000)
            self.done.wait(BARE_START_PAUSE)

    # -- the download lock -----------------------------------------------------

    def watch_locks(self) -> None:
        """Never two live downloads of one UUID: never two holders of its download lock.
        The kernel lets one process at a time hold an flock on one file, so what is watched
        is that the lock stays one file: a lock file unlinked and made again (a new inode
        under its name) would let two processes hold "the" lock at once."""
        inodes: dict[str, FileId] = {}
        downloaders: set[int] = set()
        while not self.done.is_set():
            current = _download_lock_inodes(self.cache / "locks")
            for path, inode in current.items():
                if inodes.setdefault(path, inode) != inode:
                    self.violation(f"{path} was replaced: two processes could hold it at once")
                    inodes[path] = inode
            holders = _holders(set(current.values()))
            downloaders.update(pid for pid, _ in holders if _is_downloader(pid))
            most = self.check_holders(holders, set(current.values()))
            with self.lock:
                self.figures.most_holders = max(self.figures.most_holders, most)
                self.figures.downloads_seen = len(downloaders)
            time.sleep(WATCH_INTERVAL)

    def check_holders(self, holders: list[tuple[int, FileId]], ours: set[FileId]) -> int:
        """The most processes holding one lock file; more than one is a violation once
        confirmed. /proc/locks longer than a page is read in pieces while locks come and
        go, so one read may list a lock twice, or a lock just released beside its next
        holder: a real second holder is listed again by a second read, and still has the
        file open."""
        counts = Counter(file for _, file in set(holders))
        doubled = {file for file, count in counts.items() if count > 1}
        if not doubled:
            return max(counts.values(), default=0)
        again = set(_holders(ours))
        most = 1
        for file in doubled:
            pids = {pid for pid, f in set(holders) & again if f == file and _has_open(pid, f)}
            most = max(most, len(pids))
            if len(pids) > 1:
                self.violation(f"{len(pids)} holders of one download lock: {_argvs(sorted(pids))}")
        return most

    # -- maintenance -----------------------------------------------------------

    def maintenance(self) -> list[tuple[str, Callable[[], list[str]]]]:
        served = self.uuids["served"]
        return [
            ("gc", lambda: ["gc", "--max-size", "0"]),
            ("check --repair", lambda: ["check", "--repair"]),
            ("index", lambda: ["index", str(self.zipped)]),
            ("fetch", lambda: ["fetch", *self.rng.sample(served, FETCH_BATCH)]),
        ]

    def maintain(self, name: str, argv: Callable[[], list[str]]) -> None:
        while not self.done.is_set():
            with self.lock:
                words = argv()
            try:
                done = self.cli(words)
            except subprocess.TimeoutExpired:
                self.violation(f"dsymfind {' '.join(words)}: still running after {RUN_LIMIT:g} s")
                continue
            self.note(
                f"dsymfind {' '.join(words)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
            )
            for problem in _maintenance_problems(name, done):
                self.violation(f"dsymfind {' '.join(words)}: {problem}")
            with self.lock:
                self.figures.maintenance[name] += 1
            self.done.wait(MAINTENANCE_PAUSE)

    def cli(self, words: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, *words],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=self.env(),
            timeout=RUN_LIMIT,
            check=False,
        )

    # -- afterwards ------------------------------------------------------------

    def settle(self) -> None:
        """Every downloader ends by its own deadline; one still at work after it is a fault."""
        limit = time.monotonic() + DOWNLOAD_TIMEOUT + RUN_LIMIT / 10
        while time.monotonic() < limit:
            # A resident downloader waits for work: only the downloads must end.
            at_work = (
                pid
                for pid, argv in self.processes()
                if "_download" in argv and not is_resident(pid)
            )
            if next(at_work, None) is None:
                return
            time.sleep(WATCH_INTERVAL)
        self.violation("downloaders still at work long after their deadline")

    def final_check(self) -> None:
        done = self.cli(["check"])
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        self.figures.final_check = last.split(": ", 1)[-1]  # without the temporary folder
        if done.returncode != 0 or done.stderr or "invalid: " in done.stdout:
            self.violation(f"the final `dsymfind check` is not clean:\n{done.stdout}{done.stderr}")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class HostileRoute:
    """The server's answer to every request: the file (or 404), or one of FAULTS."""

    def __init__(self, root: Path, seed: float, counts: Counter[str]) -> None:
        self.root, self.counts = root, counts
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.wrong = sorted(p for p in root.rglob("*") if p.is_file())

    def __call__(self, exchange: ss.Exchange) -> None:
        with self.lock:
            fault = self.rng.choices(list(FAULTS), weights=list(FAULTS.values()))[0]
            wrong = self.rng.choice(self.wrong)
            self.counts[fault] += 1
        path = self.root / exchange.path.lstrip("/").split("?")[0]
        data = path.read_bytes() if path.is_file() else None
        if fault == "good" or (data is None and fault in ("truncated", "wrong bytes")):
            ss.serve_root(exchange)
        elif fault == "5xx":
            ss.body(b"", self.rng.choice((500, 502, 503)))(exchange)
        elif fault == "stall":
            ss.stall()(exchange)
        elif fault == "reset":
            ss.reset(data or b"x" * 1024, len(data or b"") // 3)(exchange)
        elif fault == "truncated":
            assert data is not None
            ss.truncated(data, len(data) // 2)(exchange)
        else:  # another file's bytes: another UUID's dSYM, or the executable for the dSYM
            ss.body(wrong.read_bytes() if wrong != path else b"\0" * 4096)(exchange)


def _with_uuid(data: bytes, old: str, new: str) -> bytes:
    """A Mach-O file's bytes with its LC_UUID `old` made `new`."""
    raw = bytes.fromhex(uuid_hex(old))
    where = data.find(raw)
    assert where > 0 and data.find(raw, where + 1) == -1, "LC_UUID bytes not unique"
    return data[:where] + bytes.fromhex(uuid_hex(new)) + data[where + len(raw) :]


def _named_paths(out: bytes, uuid: str) -> list[str]:
    """The paths an answer names, read as lldb would; none from what is no plist."""
    try:
        entry = plistlib.loads(out).get(uuid, {})
    except Exception:  # noqa: BLE001 - judged by _contract_problems
        return []
    if not isinstance(entry, dict):
        return []
    return [entry[k] for k in PATH_KEYS if isinstance(entry.get(k), str)]


def _contract_problems(done: HelperRun, uuid: str) -> list[str]:
    """What breaks the helper's contract: exit 0, nothing on stderr, one XML plist of
    dicts of strings, about the UUID asked for only."""
    problems = []
    if done.returncode != 0:
        problems.append(f"exit status {done.returncode}")
    if done.stderr:
        problems.append(f"{len(done.stderr)} bytes on stderr: {done.stderr[:200]!r}")
    try:
        document = plistlib.loads(done.stdout)
    except Exception as exc:  # noqa: BLE001 - any reason the plist does not read
        return [*problems, f"no valid plist ({exc!r}): {done.stdout[:200]!r}"]
    if not done.stdout.startswith(b"<?xml") or not isinstance(document, dict):
        return [*problems, f"not an XML plist of a dict: {done.stdout[:200]!r}"]
    if set(document) - {uuid}:
        problems.append(f"answers about {sorted(set(document) - {uuid})}")
    for value in document.values():
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            problems.append(f"an entry that is not a dict of strings: {value!r}")
    return problems


def _answer_problems(answer: dict[str, str], lookup: Lookup, missing: list[str]) -> list[str]:
    problems = [f"names {path}, which did not exist when it answered" for path in missing]
    if "DBGDSYMPath" in answer and lookup.kind == "unknown":
        problems.append("answers a dSYM for a UUID nobody has")
    for key in PATH_KEYS:
        path = answer.get(key)
        if path is not None and path not in missing and not _carries(path, lookup.uuid):
            problems.append(f"{key} {path} does not carry the UUID")
    return problems


def _carries(path: str, uuid: str) -> bool:
    try:
        return macho.slice_for_uuid(macho.read_slices(path), uuid) is not None
    except (OSError, macho.MachOError):
        return not os.path.exists(path)  # removed since: judged by its existence at answer time


def _kind_of(answer: dict[str, str]) -> str:
    if "DBGError" in answer:
        said = answer["DBGError"]
        reason = next((name for phrase, name in ERROR_REASONS if phrase in said), "other")
        return f"DBGError ({reason})"
    if "DBGSymbolRichExecutable" in answer:
        return "dSYM and executable"
    if "DBGDSYMPath" in answer:
        return "dSYM"
    return "not found"


def _maintenance_problems(name: str, done: subprocess.CompletedProcess[str]) -> list[str]:
    """gc, check --repair and index succeed; fetch may fail a UUID (the server is hostile),
    with a message, never a traceback. Nothing invalid is ever found."""
    problems = []
    allowed = (0, 1) if name == "fetch" else (0,)
    if done.returncode not in allowed:
        problems.append(f"exit status {done.returncode}")
    stray = [line for line in done.stderr.splitlines() if not line.startswith("dsymfind: ")]
    if stray or (done.stderr and name != "fetch"):
        problems.append(f"stderr: {done.stderr[:500]!r}")
    invalid = [line for line in done.stdout.splitlines() if "invalid: " in line]
    if invalid:
        problems.append("found invalid: " + "; ".join(invalid))
    return problems


def _holders(files: set[FileId]) -> list[tuple[int, FileId]]:
    """(pid, file) of every exclusive flock on one of `files`, from /proc/locks."""
    found = []
    for line in Path("/proc/locks").read_text().splitlines():
        words = line.split()
        if len(words) >= 6 and words[1] == "FLOCK" and words[3] == "WRITE":
            major, minor, inode = words[5].split(":")
            file = (int(major, 16), int(minor, 16), int(inode))
            if file in files:
                found.append((int(words[4]), file))
    return found


def _download_lock_inodes(folder: Path) -> dict[str, FileId]:
    """The file (device numbers and inode, as /proc/locks spells it) of each UUID download
    lock (`<HEX>.lock`) in `folder`, by path."""
    found = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    for name in names:
        if len(name) == DOWNLOAD_LOCK_NAME and name.endswith(".lock"):
            try:
                st = os.stat(folder / name)
            except OSError:
                continue
            found[str(folder / name)] = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    return found


def _has_open(pid: int, file: FileId) -> bool:
    """Whether process `pid` has `file` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) == file:
            return True
    return False


def _argvs(pids: list[int]) -> str:
    found = []
    for pid in pids:
        try:
            found.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()[-160:]!r}")
        except OSError:
            found.append(f"{pid} (gone)")
    return "; ".join(found)


def _is_downloader(pid: int) -> bool:
    try:
        return b"_download" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def _percentiles(times: list[float]) -> dict[str, float]:
    quantiles = statistics.quantiles(times, n=100) if len(times) > 1 else times * 99
    return {"p50": quantiles[49], "p95": quantiles[94], "max": times[-1]}


def report(figures: Figures) -> str:
    """The figures, as lines for a person."""
    size = figures.size
    kills = figures.kills
    times = sorted(figures.answer_ms)
    lines = [
        f"soak: {size['workers']} workers, {size['lookups']} lookups, "
        f"{kills['helpers'] + kills['downloaders']} of {size['kills']} SIGKILLs "
        f"({kills['helpers']} helpers, {kills['downloaders']} downloaders), "
        f"in {figures.seconds:.0f} s",
        "answers: " + ", ".join(f"{k} {n}" for k, n in figures.answers.most_common()),
    ]
    if times:
        at = _percentiles(times)
        lines.append(
            f"answer time: p50 {at['p50']:.0f} ms, p95 {at['p95']:.0f} ms, max {at['max']:.0f} ms"
            f" (the helper's deadline {TIMEOUT * 1000:.0f} ms); {figures.late} past it by "
            f"more than {figures.late_margin:g} s"
        )
    if figures.bare_start_ms:
        bare = _percentiles(sorted(figures.bare_start_ms))
        lines.append(
            f"`python -I -S -c pass` meanwhile: p50 {bare['p50']:.0f} ms, p95 "
            f"{bare['p95']:.0f} ms, max {bare['max']:.0f} ms"
        )
    lines += [
        f"downloaders seen holding their lock: {figures.downloads_seen}; most holders of one "
        f"UUID's download lock at once: {figures.most_holders}",
        "server: " + ", ".join(f"{k} {n}" for k, n in figures.faults.most_common()),
        "alongside: " + ", ".join(f"{k} {n} runs" for k, n in figures.maintenance.items()),
        f"final check: {figures.final_check}",
        f"violations: {len(figures.violations)}",
        *(f"  {v}" for v in figures.violations[:MAX_SHOWN]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=WORKERS, help="helpers at once")
    parser.add_argument("--lookups", type=int, default=LOOKUPS, help="helper runs in all")
    parser.add_argument(
        "--kills", type=int, default=KILLS, help="SIGKILLs of helpers and downloaders"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--late-margin",
        type=float,
        default=LATE_MARGIN,
        help=f"seconds past the helper's deadline an answer may take (default {LATE_MARGIN:g})",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the run's folder (cache, dsymfind's log, soak.log) when a violation is found",
    )
    args = parser.parse_args(argv)
    size = Size(args.workers, args.lookups, args.kills)
    # A SIGTERM (a CI job's time limit, the bench stopped) ends the run through the finally
    # clauses too: the server and the temporary folder go with it.
    signal.signal(signal.SIGTERM, _terminated)
    work = Path(tempfile.mkdtemp(prefix="dsymfind-soak-"))
    soak = Soak(work, size, seed=args.seed, late_margin=args.late_margin)
    kept = False
    try:
        soak.prepare()
        figures = soak.run()
        kept = args.keep and bool(figures.violations)
    finally:
        soak.stop()
        if not kept:
            shutil.rmtree(work, ignore_errors=True)
    print(report(figures))
    if kept:
        print(f"kept {work}: soak.log, home/.state/dsymfind/ (the log), home/cache")
    if args.json:
        Path(args.json).write_text(json.dumps(figures.summary(), indent=1) + "\n")
    return 1 if figures.violations else 0


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main())
