"""The resident downloader: a debugging session's later misses start their download with a
fork of a process that has the downloader imported, not with an interpreter start.

A cold miss costs mostly the downloader's start-up: the interpreter, then the imports of
the stores, the Mach-O reader and the cache (about three quarters of a miss of a small
dSYM). LLDB asks for one image after another, so a session with thirty missing images
paid that thirty times. So the first downloader of a cache, once its imports are done,
forks a resident that listens on `<cache>/locks/downloader.sock` until it has been idle
for `resident_downloader` seconds. A helper with a miss connects there first; the resident
forks a child, which answers with its pid and runs the same download a spawned downloader
runs (fetch/downloader.py's main, in a session of its own), in the helper's environment.
The connection is the child's `--tell-fd`: it closes once the record is final.

Every promise of the spawned downloader holds, since the child is one: detached from the
helper (LLDB kills only the helper), under the UUID's lock, verifying before it admits.
Whatever goes wrong on this path (no resident, one of another version, a stopped one
that does not answer within ACK_TIMEOUT) costs the helper a spawned downloader, as before.
The socket is in the cache's private folder: only its owner can ask.

A fork without an exec is safe here because nothing before it has started a thread or
called into Apple's frameworks (which refuse to run in a forked child once initialized):
the resident imports modules and waits on a socket; TLS, proxies and the keychain are
first touched in each child.

The resident exits when idle, when its socket is no longer the one in the cache (the cache
removed, another resident in its place), or when asked by a helper of other code
(`stamp`): a dsymfind upgraded since it started answers with new code from the next miss.

A resident forked that way cannot help the first miss of a session: that miss pays the
interpreter and the imports, the very cost the resident saves. So the login agent
(`dsymfind install`, launchd/) runs one from the start, as `dsymForUUID --resident-downloader`:
through the helper's own launcher, so its interpreter and import folders are the helper's
and its stamp matches. It never idles out, takes the socket back when it can, and exits on
a helper of other code only when its own code changed on disk (launchd then starts the
new one); a helper of another installation is just answered `stale`.
"""

from __future__ import annotations

import os
import sys

from dsymfind.atomic import unlink_quietly

TYPE_CHECKING = False  # the helper's miss path imports this module: no typing import
if TYPE_CHECKING:
    import _socket
    import socket
    from collections.abc import Callable, Mapping

    from dsymfind.paths import CachePaths

SOCKET_NAME = "downloader.sock"
# How long a helper waits for the resident's child to say it started; past it, the helper
# spawns a downloader of its own (the per-UUID lock keeps a late child from downloading
# twice, and a child whose helper left never starts: its answer fails to send).
ACK_TIMEOUT = 1.0
# A request's size at most: the downloader's words and the helper's environment.
MAX_REQUEST = 1 << 20
# How long the resident gives a connection to send its request.
REQUEST_TIMEOUT = 1.0
# How often the idle resident looks at its socket and its idle time; and, until the
# downloader that started it has exited, whether it has (then it imports PRELOADED).
TICK = 1.0
PRELOAD_TICK = 0.05
# Longest socket path AF_UNIX takes on macOS (104 bytes with the NUL; Linux takes 108): a
# longer one is reached from its folder (`_connect`).
MAX_SOCKET_PATH = 103
# What the resident answers a helper of other code (then it exits).
STALE = b"stale\n"
# The agent's exit status when a new agent should take over (its code changed on disk).
RESTART = 75
# Modules a download may import lazily, imported by the resident once so that no child
# pays for them: TLS, S3 signing, the log, git for a dSYM's sources, zips.
PRELOADED = (
    "ssl",
    "dsymfind.log",
    "dsymfind.stores.proxied",
    "dsymfind.stores.s3.store",
    "dsymfind.vcs.checkouts",
    "dsymfind.vcs.git",
    "dsymfind.vcs.provenance",
    "dsymfind.apple.bundle",
    "dsymfind.cache.staged",
    "zipfile",
)


def socket_path(cache: CachePaths) -> str:
    return os.path.join(cache.locks, SOCKET_NAME)


def stamp() -> tuple[str, ...]:
    """What a resident must share with a helper to run its downloads: the interpreter, the
    import folders and the code (its version, and the downloader's file, which an editable
    install changes without a version)."""
    from dsymfind import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        code = str(os.stat(os.path.join(here, "downloader.py")).st_mtime_ns)
    except OSError:
        code = ""
    folders = [folder for folder in sys.path if os.path.isabs(folder)]
    return (__version__, sys.executable, code, *folders)


# -- the helper's side ----------------------------------------------------------------


def ask(cache: CachePaths, words: list[str], timeout: float) -> tuple[int, int] | None:
    """(the child's pid, the connection it closes when its record is final), or None when
    no resident took the request within `timeout` (the caller spawns a downloader).

    `_socket` rather than socket: the miss path is timed, and socket's import (enum, its
    classes) costs more than the whole exchange.
    """
    import _socket

    path = socket_path(cache)
    if timeout <= 0:
        return None
    request = _encoded(stamp(), words, os.environ)
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        connection.settimeout(timeout)
        _connect(connection, path)
        connection.sendall(request)
        connection.shutdown(_socket.SHUT_WR)
        answer = b""
        while not answer.endswith(b"\n") and len(answer) < 32:
            got = connection.recv(32)
            if not got:
                break
            answer += got
        pid = int(answer) if answer.endswith(b"\n") and answer[:-1].isdigit() else None
    except (OSError, ValueError):
        pid = None
    if pid is None:
        connection.close()
        return None
    connection.setblocking(True)
    return pid, connection.detach()


# -- the resident -----------------------------------------------------------------------


def start_beside(
    cache: CachePaths,
    idle: float,
    download: Callable[[list[str]], int],
    keep_closed: tuple[int, ...] = (),
) -> None:
    """Fork the resident for `cache` unless one listens there already or `idle` is 0.

    Called by a spawned downloader once its imports are done and before its download, so
    the resident holds nothing of that download; `download(words)`: what each child runs,
    the downloader's main; `keep_closed`: descriptors of the download the resident must
    not hold (the helper's pipe would never close)."""
    path = socket_path(cache)
    if idle <= 0 or listening(path):
        return
    try:
        pid = os.fork()
    except OSError:
        return
    if pid != 0:
        return
    status = 0
    try:
        for fd in keep_closed:
            os.close(fd)
        os.setsid()  # killing the downloader's group must not end the resident
        # From the socket's folder, by name: its path may be too long for AF_UNIX.
        folder = os.path.dirname(path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.chdir(folder)
        _Resident(SOCKET_NAME, idle, download).serve()
    except BaseException:  # noqa: BLE001 - nobody to tell: stdio is /dev/null
        status = 1
    finally:
        os._exit(status)  # never back into the downloader's code, nor its finally blocks


def serve_agent(env: Mapping[str, str], download: Callable[[list[str]], int]) -> int:
    """The login agent's resident for the configured cache, each child running `download`
    (as start_beside's): serves until stopped (SIGTERM, as `launchctl bootout` sends), until
    the config turns it off, or until its code changes on disk; the exit status, which
    launchd reads (KeepAlive, SuccessfulExit false): RESTART asks for a new one, 0 none."""
    import signal
    import time

    from dsymfind import permissions, settings
    from dsymfind.errors import DsymfindError
    from dsymfind.paths import CachePaths

    def wanted_cache() -> str | None:
        """The cache the config wants served now, None when it wants no resident."""
        current = settings.load(env)
        return current["cache_dir"] if current["resident_downloader"] > 0 else None

    try:
        cache_dir = wanted_cache()
    except (DsymfindError, OSError):
        return 1  # the helper answers the same misses with spawned downloaders
    if cache_dir is None:
        return 0
    signal.signal(signal.SIGTERM, _exit_on_signal)
    _preload()

    def still_wanted() -> bool:
        try:
            return wanted_cache() == cache_dir
        except (DsymfindError, OSError):
            return False

    resident = _Resident(SOCKET_NAME, float("inf"), download, still_wanted=still_wanted)
    while True:
        # Each round from the cache's folder as it is now: `rm -rf` of the cache, and the
        # agent serves the one made again; the config changed, and it serves the new one.
        try:
            cache_dir = wanted_cache()
            if cache_dir is None:
                return 0
            root = permissions.secure_cache(cache_dir)
            folder = CachePaths(root).locks
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chdir(folder)
        except (DsymfindError, OSError):
            return 1
        if not resident.serve():
            return RESTART
        # Another resident holds the socket (one a downloader forked before the agent
        # started), or took it, or the config changed: the agent binds again.
        time.sleep(TICK)


def _exit_on_signal(number: int, frame: object) -> None:
    raise SystemExit(0)  # through serve's finally: the socket goes with the agent


def _connect(connection: _socket.socket, path: str) -> None:
    """connect() to the socket at `path`; one too long for AF_UNIX by name from its folder,
    this process's working folder changed for that call alone (helpers have one thread)."""
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        connection.connect(path)
        return
    folder, name = os.path.split(path)
    back = os.open(".", os.O_RDONLY)
    try:
        os.chdir(folder)
        connection.connect(name)
    finally:
        os.fchdir(back)
        os.close(back)


def listening_pid(path: str) -> int | None:
    """The pid of the resident that takes connections on the socket at `path` (0 where the
    platform cannot say whose it is), or None when none does."""
    import _socket

    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        probe.settimeout(REQUEST_TIMEOUT)
        _connect(probe, path)
        if hasattr(_socket, "SO_PEERCRED"):  # Linux: struct ucred, pid first
            return int.from_bytes(
                probe.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)[:4], sys.byteorder
            )
        if sys.platform == "darwin":  # SOL_LOCAL, LOCAL_PEERPID
            return int.from_bytes(probe.getsockopt(0, 2, 4), sys.byteorder)
        return 0
    except OSError:
        return None
    finally:
        probe.close()


def listening(path: str) -> bool:
    """Whether a resident takes connections on the socket at `path`."""
    return listening_pid(path) is not None


class _Resident:
    def __init__(
        self,
        path: str,
        idle: float,
        download: Callable[[list[str]], int],
        *,
        still_wanted: Callable[[], bool] | None = None,
    ) -> None:
        """`still_wanted`: the login agent's (it alone has one), asked every TICK while
        idle; False makes `serve` return True (to be called again)."""
        self.path, self.idle, self.download = path, idle, download
        self.still_wanted = still_wanted
        self.agent = still_wanted is not None
        self.stamp = stamp()

    def serve(self) -> bool:
        """Serve until idle, stale or displaced; True when it could serve again later (the
        socket was another resident's, or stopped being ours), False when it is done."""
        import time

        bound = self._bound()
        if bound is None:
            return True
        listener, inode = bound
        downloader = os.getppid()
        preloaded = self.agent  # the agent imported everything before it bound
        try:
            last = time.monotonic()
            while True:
                _reap()
                # Not while the downloader that forked us works: on a machine of two cores
                # its first miss would share one with these imports.
                if not preloaded and os.getppid() != downloader:
                    _preload()
                    preloaded = True
                listener.settimeout(TICK if preloaded else PRELOAD_TICK)
                try:
                    connection, _ = listener.accept()
                except TimeoutError:
                    if time.monotonic() - last > self.idle:
                        return False
                    if not _still_ours(self.path, inode):
                        return True
                    if self.still_wanted is not None and not self.still_wanted():
                        return True
                    continue
                except OSError:
                    return False
                with connection:
                    asked = self._answer(connection, listener)
                if asked is None:
                    return False
                if asked:
                    # Only a request counts: probes (a downloader's, or the agent's while
                    # this resident holds the socket) must not keep it from idling out.
                    last = time.monotonic()
        finally:
            if _still_ours(self.path, inode):
                unlink_quietly(self.path)
            listener.close()

    def _bound(self) -> tuple[socket.socket, int] | None:
        """A listening socket under `self.path` and the inode it has there, or None when
        another resident has it.

        Bound under a name of its own, then linked to the shared name: two residents
        starting at once never both take it, and a stale file (a resident killed) is
        replaced."""
        import socket

        own = f"{self.path}.{os.getpid()}"
        unlink_quietly(own)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(own)
            listener.listen(64)
            for _ in range(2):
                try:
                    os.link(own, self.path)
                    return listener, os.stat(self.path).st_ino
                except FileExistsError:
                    if listening(self.path):
                        break
                    unlink_quietly(self.path)  # a killed resident's
        except OSError:
            pass
        finally:
            unlink_quietly(own)
        listener.close()
        return None

    def _answer(self, connection: socket.socket, listener: socket.socket) -> bool | None:
        """Start the download a helper asked for: whether one asked (a request came), None
        when this resident should exit."""
        request = _request(connection)
        if request is None:
            return False
        if request.stamp != self.stamp:
            import contextlib

            with contextlib.suppress(OSError):
                connection.sendall(STALE)
            # The agent stays for the helpers of its own installation, unless its code is
            # no longer what is on disk (an upgrade: launchd starts the new one).
            return True if self.agent and stamp() == self.stamp else None
        try:
            pid = os.fork()
        except OSError:
            return True  # the helper gets no answer and spawns a downloader itself
        if pid == 0:
            status = 1
            try:
                listener.close()
                status = _child(connection, request, self.download)
            finally:
                # Whatever the download raised: never into the resident's loop, whose end
                # would remove the socket the resident still serves.
                os._exit(status)
        return True


class _Request:
    """What a helper asks: its stamp, the downloader's words, its environment."""

    def __init__(self, stamp: tuple[str, ...], words: list[str], env: dict[str, str]) -> None:
        self.stamp, self.words, self.env = stamp, words, env


def _encoded(stamp: tuple[str, ...], words: list[str], env: Mapping[str, str]) -> bytes:
    """A request as bytes: counted lists of NUL-ended strings (neither arguments nor the
    environment can hold a NUL), so reading one needs no parser and trusts nothing."""
    fields = [str(len(stamp)), *stamp, str(len(words)), *words]
    fields += [f"{name}={value}" for name, value in env.items()]
    return b"".join(os.fsencode(field) + b"\0" for field in fields)


def _decoded(data: bytes) -> _Request | None:
    if not data.endswith(b"\0"):
        return None
    fields = [os.fsdecode(field) for field in data[:-1].split(b"\0")]
    parts: list[list[str]] = []
    for _ in range(2):  # the stamp, the words
        if not fields or not fields[0].isdigit() or int(fields[0]) > len(fields) - 1:
            return None
        count = int(fields[0])
        parts.append(fields[1 : 1 + count])
        fields = fields[1 + count :]
    env = {}
    for field in fields:
        name, equals, value = field.partition("=")
        if not equals or not name:
            return None
        env[name] = value
    return _Request(tuple(parts[0]), parts[1], env)


def _request(connection: socket.socket) -> _Request | None:
    """The request a helper sent, checked; None for anything else (it gets no answer)."""
    connection.settimeout(REQUEST_TIMEOUT)
    data = b""
    try:
        while len(data) <= MAX_REQUEST:
            got = connection.recv(65536)
            if not got:
                break
            data += got
    except OSError:
        return None
    return _decoded(data) if len(data) <= MAX_REQUEST else None


def _child(
    connection: socket.socket, request: _Request, download: Callable[[list[str]], int]
) -> int:
    """The forked child: a downloader as processes.py spawns one, in the helper's
    environment, telling the helper through the connection."""
    import signal

    from dsymfind import processes

    try:
        os.chdir("/")  # as a spawned downloader runs; the resident runs in the socket's folder
        os.setsid()
        connection.settimeout(None)
        connection.sendall(b"%d\n" % os.getpid())
        tell = connection.detach()
    except OSError:
        return 1  # the helper is gone, or gave up on us: it started a downloader itself
    # As a spawned downloader starts: the interpreter's own signal dispositions.
    for number in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(request.env)
    status = download([*request.words, processes.TELL_FLAG, str(tell)])
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    return status


def _preload() -> None:
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - an optional dependency: its child imports it
            continue


def _reap() -> None:
    """Collect the finished children, so none lingers as a zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _still_ours(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False
