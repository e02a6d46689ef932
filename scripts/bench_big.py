"""The big-download figures: resume after a kill, memory, and keeping up with the link.

One dSYM of Scale.big_mb (about 1 GB at full scale), served by the suite's loopback server:
its cold fetch beside curl, the downloader's peak memory for it and for a universal dSYM
twice its size, a download killed at 90 % and continued by the next lookup, and the fetch
over a link shaped to 100 MB/s (in a network namespace) beside curl over the same link.
bench.py runs them after its own figures, or alone with `--only big`; the other figures
keep their 200 MB dSYM, so that the whole run stays short.
"""

from __future__ import annotations

import json
import os
import plistlib
import re
import select
import shutil
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench_fixtures as fixtures
from bench_core import (
    FULL,
    HELPER,
    KIB,
    PYTHON,
    ROOT,
    RUN_TIMEOUT,
    TIME,
    Bench,
    BenchError,
    Figure,
    Pair,
    ms,
    slices,
)
from support.symbol_server import SymbolServer, self_signed

from dsymfind import paths
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

# The configurations of the figures (each with a cache of its own, emptied before a fetch):
# the loopback server, and the server inside the shaped link's namespace.
CONFIG = "big"
LINK_CONFIG = "big-link"
TLS_CONFIG = "big-tls"
# The universal dSYM's second slice (arm64e) carries this UUID; the server has the file
# under it, since the first slice's UUID names the single-slice file already.
ARM64E_UUID = fixtures.fixture_uuid("arm64e")
RSS_GOAL_MB = 80
# The downloader is killed once its partial file holds this share of the file, looked at
# this often; a download that finished first is tried again, up to this many times.
KILL_AT = 0.9
KILL_POLL = 0.002
KILL_ATTEMPTS = 3
RESUME_GOAL = 0.15
# The resumed file is compared with the served one this much at a time.
COMPARE_BYTES = 1024 * 1024
# The killed download's answer is counted by the server once its sendfile fails: so long
# to wait for it.
SERVER_SETTLE = 10.0
# The shaped link: tc's token bucket filter on the loopback of a network namespace.
# 800 mbit/s is 100 MB/s. The bucket must hold more than one packet (lo's MTU is 65536)
# and is spent at the start at full speed: 2 MB is 0.2 % of a 1 GB transfer. `latency`
# bounds the queue (rate x latency = 5 MB past the bucket); with it curl gets about 98 %
# of the rate and tc drops nothing.
LINK_RATE, LINK_BYTES_S = "800mbit", 100e6
LINK_BURST = "2mb"
LINK_LATENCY = "50ms"
LINK_GOAL = 0.95
SHAPING = ["tbf", "rate", LINK_RATE, "burst", LINK_BURST, "latency", LINK_LATENCY]
# The shaped link's server: a SymbolServer in a process of its own inside the namespace.
# argv: the tests folder (for `support`) and the folder to serve. It prints its URL and
# serves until its standard input closes: it cannot outlive the benchmark.
_NAMESPACE_SERVER = (
    "import sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from support.symbol_server import SymbolServer\n"
    "server = SymbolServer(sys.argv[2]).start()\n"
    "print(server.url, flush=True)\n"
    "sys.stdin.read()\n"
    "server.stop()\n"
)
# The reference inside the reference: what httpx alone needs to stream a URL to a file.
_BARE_HTTPX = (
    "import sys, httpx\n"
    "with httpx.stream('GET', sys.argv[1]) as r, open(sys.argv[2], 'wb') as f:\n"
    "    for chunk in r.iter_raw():\n"
    "        f.write(chunk)\n"
)


@dataclass
class Killed:
    """Where a killed download stood: bytes in its partial file, bytes its sidecar vouches
    for (fsynced at its last checkpoint), and body bytes the server had sent."""

    on_disk: int
    kept: int
    total: int
    sent: int


class BigDownloads:
    """The figures, run in order by `steps` (the resume figure compares with the cold one)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.dwarf = Path()
        self.uuid = ""
        self.url_path = ""  # where the loopback server has it
        self.size = 0
        self.cold: float | None = None  # the cold fetch's median helper wall seconds

    def steps(self) -> list[Callable[[], None]]:
        return [
            self.prepare_big,
            self.cold_fetch_figure,
            self.https_figure,
            self.rss_figures,
            self.resume_figure,
            self.link_figure,
        ]

    @property
    def server(self) -> SymbolServer:
        assert self.bench.server is not None
        return self.bench.server

    def prepare_big(self) -> None:
        """The big dSYM, served by the suite's loopback server (started here if `--only`)."""
        bench, started = self.bench, time.monotonic()
        self.dwarf = fixtures.large_dsym(bench.work / "big", bench.scale.big_mb)
        (self.uuid,) = slices(self.dwarf)
        if self.uuid == bench.large_uuid:
            raise BenchError(f"the big and the large dSYM have the same UUID {self.uuid}")
        self.size = self.dwarf.stat().st_size
        served = bench.work / "served"
        self.url_path = fixtures.serve_native(served, self.uuid, self.dwarf)
        if bench.server is None:
            bench.server = SymbolServer(served).start()
        bench.write_config(CONFIG, self.config(CONFIG, self.server.url))
        bench.findings.append(
            f"Big-download figures: a {self.size / 1e6:.0f} MB dSYM, generated in "
            f"{time.monotonic() - started:.0f} s."
        )

    def config(self, name: str, url: str) -> str:
        return (
            f"cache_dir = {json.dumps(str(self.bench.cache(name)))}\ntimeout = 600\n"
            f'[[servers]]\nurl = "{url}/"\nlayout = "native"\n'
        )

    def clear(self, name: str = CONFIG) -> None:
        self.bench.clear_fetch_cache(name)

    def fetch(
        self, env: dict[str, str], name: str = CONFIG, prefix: list[str] | None = None
    ) -> float:
        """Wall seconds of a helper's cold fetch (run after `prefix`, as in a namespace); its
        detached downloader is waited for after."""
        self.clear(name)
        seconds = self.bench.timed([*(prefix or []), HELPER, self.uuid], env, found=True)
        self.bench.wait_for_downloaders(name, self.uuid)
        return seconds

    # -- cold fetch ----------------------------------------------------------------

    def cold_fetch_figure(self) -> None:
        bench = self.bench
        env, url = bench.env(CONFIG), self.server.url + self.url_path
        helper_times, curl_times, httpx_times, ratios = [], [], [], []
        download = bench.work / "big-curl.out"
        for _ in range(bench.scale.fetch_rounds):
            helper_times.append(self.fetch(env))
            curl_times.append(bench.timed(["curl", "-sS", "-o", str(download), url], env))
            download.unlink()
            httpx_times.append(bench.timed([PYTHON, "-c", _BARE_HTTPX, url, str(download)], env))
            download.unlink()
            ratios.append(helper_times[-1] / curl_times[-1])
        self.clear()
        pair = Pair.of_rounds(helper_times, curl_times, ratios)
        self.cold = pair.subject
        figure = Figure(
            f"cold fetch of a {self.size / 1e6:.0f} MB dSYM from a loopback server, verified "
            "and published",
            "`curl -o` of the same URL",
            "≤ 2x wall",
        )
        figure.notes.append(
            "The helper starts the detached downloader and answers once the bundle is "
            f"published; the cache is emptied before each of {len(ratios)} rounds. "
            f"Throughput: helper {self.size / pair.subject / 1e6:.0f} MB/s, curl "
            f"{self.size / pair.reference / 1e6:.0f} MB/s."
        )
        bare = statistics.median(httpx_times)
        figure.notes.append(
            f"The HTTP client alone (a bare httpx stream of the same URL into a file, "
            f"`iter_raw` on one thread, in a fresh interpreter, no dsymfind) takes {ms(bare)}: "
            f"{bare / pair.reference:.2f}x curl, {bare / pair.subject:.2f}x the helper's whole "
            "lookup; "
            + (
                f"{ms(pair.subject - bare)} of the helper's time is dsymfind's own (two "
                "interpreters' start-up, verification, publication), the rest the HTTP "
                "library's."
                if bare < pair.subject
                else "the helper's whole lookup takes no longer than httpx's own iterator alone, "
                "so what it takes beyond curl is not the HTTP library's."
            )
        )
        bench.judge(figure, pair, 2.0)

    def https_figure(self) -> None:
        """The same fetch over HTTPS: a TLS stream yields 16 KiB records, whose handling
        once cost three times httpx's own pace (body.py, TLS_READ_BYTES)."""
        bench = self.bench
        figure = Figure(
            f"cold fetch of the {self.size / 1e6:.0f} MB dSYM over HTTPS from a loopback server",
            "`curl -o` of the same URL",
            "≤ 2x wall",
        )
        if shutil.which("openssl") is None:
            figure.notes.append(
                "not measured: openssl, which makes the test certificate, is missing"
            )
            bench.figures.append(figure)
            return
        folder = bench.work / "tls"
        folder.mkdir(exist_ok=True)
        context, cert = self_signed(folder)
        with SymbolServer(bench.work / "served", tls=context) as server:
            bench.write_config(TLS_CONFIG, self.config(TLS_CONFIG, server.url))
            env = {**bench.env(TLS_CONFIG), "SSL_CERT_FILE": cert}
            url, download = server.url + self.url_path, bench.work / "tls-curl.out"
            helper_times, curl_times, httpx_times, ratios = [], [], [], []
            curl = ["curl", "-sS", "--cacert", cert, "-o", str(download), url]
            for _ in range(bench.scale.link_rounds):
                helper_times.append(self.fetch(env, TLS_CONFIG))
                curl_times.append(bench.timed(curl, env))
                download.unlink()
                httpx_times.append(
                    bench.timed([PYTHON, "-c", _BARE_HTTPX, url, str(download)], env)
                )
                download.unlink()
                ratios.append(helper_times[-1] / curl_times[-1])
        self.clear(TLS_CONFIG)
        pair = Pair.of_rounds(helper_times, curl_times, ratios)
        bare = statistics.median(httpx_times)
        figure.notes.append(
            f"A second SymbolServer on the same folder, over TLS with a self-signed certificate "
            f"the clients trust (SSL_CERT_FILE, `--cacert`); {len(ratios)} alternating rounds. "
            f"Throughput: helper {self.size / pair.subject / 1e6:.0f} MB/s, curl "
            f"{self.size / pair.reference / 1e6:.0f} MB/s; the test server encrypts in Python, "
            f"which sets the pace for both. A bare httpx stream of the same URL takes "
            f"{ms(bare)}, {bare / pair.subject:.2f}x the helper's whole lookup."
        )
        bench.judge(figure, pair, 2.0)

    # -- memory --------------------------------------------------------------------

    def rss_figures(self) -> None:
        bench = self.bench
        figures = [
            Figure(
                f"peak RSS of that fetch, the downloader alone ({self.size / 1e6:.0f} MB dSYM)",
                "—",
                f"≤ {RSS_GOAL_MB} MB",
            ),
            Figure(
                f"peak RSS of the downloader fetching a {2 * self.size / 1e6:.0f} MB universal "
                "dSYM (2 slices)",
                "—",
                f"≤ {RSS_GOAL_MB} MB",
            ),
        ]
        lipo = fixtures.LLVM_BIN / "llvm-lipo"
        if not os.access(TIME, os.X_OK):
            for figure in figures:
                figure.notes.append(f"not measured: {TIME} is missing (Debian package `time`)")
            bench.figures += figures
            return
        env = bench.env(CONFIG)
        self.clear()
        downloader = bench.peak_rss(self.downloader(self.uuid), env)
        self.clear()
        helper = bench.peak_rss([HELPER, self.uuid], env)
        bench.wait_for_downloaders(CONFIG, self.uuid)
        self.clear()
        self.judge_rss(figures[0], downloader)
        figures[0].notes.append(
            f"`python -m dsymfind _download UUID` run directly under `{TIME} -v` (Maximum "
            "resident set size), in the cold fetch's configuration; it exits once the dSYM is "
            f"published. The helper, measured apart since `{TIME}` does not see the downloader "
            f"it starts detached, peaked at {helper / KIB:.1f} MB while it waited."
        )
        if shutil.which(str(lipo)) is None:
            figures[1].notes.append(f"not measured: {lipo} is missing")
            bench.figures.append(figures[1])
            return
        self.universal_rss(figures[1], env)

    def universal_rss(self, figure: Figure, env: dict[str, str]) -> None:
        """The downloader's peak for a universal file made from the big dSYM, which is
        served under its second slice's UUID, then deleted with every copy of it."""
        bench = self.bench
        folder = bench.work / "universal"
        fat = fixtures.universal_dsym(self.dwarf, folder, ARM64E_UUID)
        size = fat.stat().st_size
        served = bench.work / "served"
        url_path = fixtures.serve_native(served, ARM64E_UUID, fat)
        try:
            self.clear()
            peak = bench.peak_rss(self.downloader(ARM64E_UUID), env)
            bench.wait_for_downloaders(CONFIG, ARM64E_UUID)
            sent = self.server.bytes_sent(url_path)
        finally:
            self.clear()
            (served / url_path.lstrip("/")).unlink(missing_ok=True)
            shutil.rmtree(folder, ignore_errors=True)
        if sent != size:
            raise BenchError(f"the server sent {sent} bytes of the {size}-byte universal dSYM")
        self.judge_rss(figure, peak)
        figure.notes.append(
            f"{size / 1e6:.0f} MB: the big dSYM (arm64) and a copy made arm64e with another "
            "UUID, joined by llvm-lipo; served under the arm64e slice's UUID and fetched by "
            f"`python -m dsymfind _download` under `{TIME} -v`, as above."
        )

    def judge_rss(self, figure: Figure, peak_kib: int) -> None:
        figure.measured = f"{peak_kib / KIB:.1f} MB"
        figure.met = peak_kib / KIB <= RSS_GOAL_MB if self.bench.scale is FULL else None
        self.bench.figures.append(figure)

    def downloader(self, uuid: str) -> list[str]:
        return [PYTHON, "-m", "dsymfind", "_download", uuid]

    # -- resume --------------------------------------------------------------------

    def resume_figure(self) -> None:
        bench = self.bench
        figure = Figure(
            f"a {self.size / 1e6:.0f} MB download killed at ≥ {KILL_AT:.0%}, resumed by the "
            "next lookup",
            "the file's size",
            f"≤ {RESUME_GOAL:.0%} sent again",
        )
        env = bench.env(CONFIG)
        killed = None
        for attempt in range(1, KILL_ATTEMPTS + 1):
            self.clear()
            killed = self.kill_download(env)
            if killed is not None:
                break
            figure.notes.append(f"attempt {attempt}: the download finished before it was killed")
        if killed is None:
            self.clear()
            figure.notes.append(f"not measured: {KILL_ATTEMPTS} downloads finished first")
            bench.figures.append(figure)
            return
        mark, before = len(self.server.requests), self.server.bytes_sent(self.url_path)
        resumed, out = bench.timed_run([HELPER, self.uuid], env, expect=b"DBGDSYMPath")
        bench.wait_for_downloaders(CONFIG, self.uuid)
        again = self.server.bytes_sent(self.url_path) - before
        intact = _same_bytes(plistlib.loads(out)[self.uuid]["DBGDSYMPath"], self.dwarf)
        asked = [
            r.headers
            for r in self.server.requests[mark:]
            if r.method == "GET" and r.path == self.url_path
        ]
        self.clear()
        cold = self.cold if self.cold is not None else self.fetch(env)
        self.clear()
        figure.measured = f"{again / 1e6:.1f} MB sent again ({again / self.size:.1%})"
        figure.reference_measured = f"{self.size / 1e6:.0f} MB"
        figure.ratio = again / self.size
        figure.met = figure.ratio <= RESUME_GOAL if bench.scale is FULL else None
        if not intact:  # judged at any scale: not a timing
            figure.met = False
            figure.notes.append("**the published DWARF file differs from the served one**")

        def share(count: int) -> str:
            return f"{count / self.size:.1%}"

        figure.notes.append(
            f"A downloader (`python -m dsymfind _download`) was SIGKILLed when its partial "
            f"file held {share(killed.on_disk)} of the file ({killed.on_disk} bytes); its "
            f"sidecar vouched for {share(killed.kept)} ({killed.kept} bytes, fsynced at the "
            f"last checkpoint); the server had sent {share(killed.sent)} (sendfile in 4 MiB "
            "pieces, socket buffers included)."
        )
        figure.notes.append(
            "The next lookup's requests: "
            + "; ".join(_range_asked(h, self.size) for h in asked)
            + f". It took {ms(resumed)} against {ms(cold)} for a cold lookup"
            + (" (the cold fetch's median)." if self.cold is not None else ".")
            + (" The published DWARF file is byte for byte the served one." if intact else "")
        )
        bench.figures.append(figure)

    def kill_download(self, env: dict[str, str]) -> Killed | None:
        """A downloader SIGKILLed once its partial file holds KILL_AT of the file; None if
        it finished first."""
        cache, sent = CachePaths(str(self.bench.cache(CONFIG))), self.server.bytes_sent
        before = sent(self.url_path)
        downloader = subprocess.Popen(
            self.downloader(self.uuid),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        partial: tuple[str, int] | None = None
        try:
            while downloader.poll() is None:
                partial = partial or self.partial_download(cache)
                if partial is not None and _size(partial[0]) >= KILL_AT * partial[1]:
                    downloader.kill()
                    break
                time.sleep(KILL_POLL)
        finally:
            if downloader.poll() is None:
                downloader.kill()
            downloader.wait(timeout=RUN_TIMEOUT)
        if downloader.returncode != -signal.SIGKILL:
            if downloader.returncode != 0:
                raise BenchError(f"the downloader failed with status {downloader.returncode}")
            return None
        assert partial is not None
        meta = _sidecar(partial[0]) or {}
        deadline = time.monotonic() + SERVER_SETTLE
        while sent(self.url_path) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        return Killed(
            _size(partial[0]), meta.get("bytes", 0), partial[1], sent(self.url_path) - before
        )

    def partial_download(self, cache: CachePaths) -> tuple[str, int] | None:
        """The big dSYM's partial file and its total length, once its sidecar says it."""
        mine = uuid_hex(self.uuid)
        for owner, path in cache.partial_files():
            meta = _sidecar(path) if owner == mine else None
            if meta is not None and isinstance(meta.get("total"), int):
                return path, meta["total"]
        return None

    # -- the shaped link -----------------------------------------------------------

    def link_figure(self) -> None:
        bench = self.bench
        figure = Figure(
            f"fetch of a {self.size / 1e6:.0f} MB dSYM over a link shaped to "
            f"{LINK_BYTES_S / 1e6:.0f} MB/s",
            "`curl -o` of the same URL over the same link",
            f"≥ {LINK_GOAL}x curl's throughput",
        )
        reason = _link_unavailable()
        if reason is not None:
            figure.notes.append(f"skipped: {reason}")
            bench.figures.append(figure)
            return
        namespace, created, server = f"dsymfind-bench-{os.getpid()}", False, None
        made = subprocess.run(
            ["ip", "netns", "add", namespace], capture_output=True, text=True, check=False
        )
        if made.returncode != 0:  # a container without the right to make namespaces
            figure.notes.append(f"skipped: `ip netns add` failed: {made.stderr.strip()[-200:]}")
            bench.figures.append(figure)
            return
        try:
            created = True
            inside = ["ip", "netns", "exec", namespace]
            _run(["ip", "-n", namespace, "link", "set", "lo", "up"])
            _run([*inside, "tc", "qdisc", "add", "dev", "lo", "root", *SHAPING])
            server, url = self.start_namespace_server(inside)
            self.shaped_rounds(figure, inside, url)
            figure.notes.append(
                "A network namespace whose loopback is shaped by `tc qdisc add dev lo root "
                f"{' '.join(SHAPING)}`: the bucket "
                "holds more than one 64 KiB loopback packet and its head start is a fraction of "
                "a percent of the file; the latency bounds the queue. tc says: "
                + _qdisc_counters(inside)
                + ". A second SymbolServer serves the same folder in a process inside the "
                "namespace; curl, the helper and the downloader it starts run there too (`ip "
                "netns exec`); the cache is emptied before each round."
            )
        finally:
            if server is not None:
                _stop(server)
            if created:
                subprocess.run(["ip", "netns", "del", namespace], check=False)
            self.clear(LINK_CONFIG)
        bench.figures.append(figure)

    def start_namespace_server(self, inside: list[str]) -> tuple[subprocess.Popen[str], str]:
        tests, served = str(ROOT / "tests"), str(self.bench.work / "served")
        server = subprocess.Popen(
            [*inside, PYTHON, "-c", _NAMESPACE_SERVER, tests, served],
            env=self.bench.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 30)
        url = server.stdout.readline().strip() if ready else ""
        if not url.startswith("http://"):
            _stop(server)
            raise BenchError(f"the namespace's symbol server did not start: {url!r}")
        return server, url

    def shaped_rounds(self, figure: Figure, inside: list[str], url: str) -> None:
        bench = self.bench
        bench.write_config(LINK_CONFIG, self.config(LINK_CONFIG, url))
        env, download = bench.env(LINK_CONFIG), bench.work / "link-curl.out"
        helper_times, curl_times, ratios = [], [], []
        for _ in range(bench.scale.link_rounds):
            helper_times.append(self.fetch(env, LINK_CONFIG, inside))
            curl = [*inside, "curl", "-sS", "-o", str(download), url + self.url_path]
            curl_times.append(bench.timed(curl, env))
            download.unlink()
            ratios.append(curl_times[-1] / helper_times[-1])  # of throughputs
        helper, curl_wall = statistics.median(helper_times), statistics.median(curl_times)
        figure.measured = f"{self.size / helper / 1e6:.1f} MB/s ({ms(helper)})"
        figure.reference_measured = f"{self.size / curl_wall / 1e6:.1f} MB/s ({ms(curl_wall)})"
        figure.ratio = statistics.median(ratios)
        figure.met = figure.ratio >= LINK_GOAL if bench.scale is FULL else None
        if bench.scale is FULL and abs(self.size / curl_wall / LINK_BYTES_S - 1) > 0.1:
            figure.notes.append("**curl's throughput is not within 10 % of the shaped rate**")
        figure.notes.append(
            f"Throughput is the file's size over the wall time, {len(ratios)} alternating "
            "rounds; the ratio is the median of the per-round ratios of throughputs (helper "
            "over curl)."
        )


def _same_bytes(a: str | Path, b: str | Path) -> bool:
    with open(a, "rb") as left, open(b, "rb") as right:
        while True:
            block = left.read(COMPARE_BYTES)
            if block != right.read(COMPARE_BYTES):
                return False
            if not block:
                return True


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _sidecar(partial_file: str) -> dict[str, object] | None:
    try:
        with open(paths.partial_meta(partial_file), "rb") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _range_asked(headers: dict[str, str], size: int) -> str:
    asked = headers.get("range")
    if asked is None:
        return "GET without Range (the whole file)"
    found = re.fullmatch(r"bytes=(\d+)-", asked)
    where = f", from {int(found[1]) / size:.1%} of the file" if found else ""
    return f"`Range: {asked}`{where}, If-Range {headers.get('if-range', 'absent')}"


def _link_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "not running as root (a network namespace and its qdisc need CAP_NET_ADMIN)"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} missing (Debian package `iproute2`)"
    return None


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed: {done.stderr.strip()[-300:]}")


def _qdisc_counters(inside: list[str]) -> str:
    """tc's own account of the shaped loopback: what went through, what it dropped."""
    done = subprocess.run(
        [*inside, "tc", "-s", "qdisc", "show", "dev", "lo"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Sent (\d+) bytes \d+ pkt \(dropped (\d+), overlimits (\d+)", done.stdout)
    if found is None:
        return "(no counters)"
    return (
        f"{int(found[1]) / 1e6:.0f} MB sent, {found[2]} packets dropped, {found[3]} "
        "overlimits (packets held back)"
    )


def _stop(server: subprocess.Popen[str]) -> None:
    """The namespace's server ends when its standard input closes; killed if it does not."""
    try:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    finally:
        if server.stdout is not None:
            server.stdout.close()
