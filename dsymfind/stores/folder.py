"""Stores in a folder: a local or mounted symbol store (`file:///srv/symbols/` or a path),
read and written.

Keys are relative paths below the folder and never leave it. Only regular files are
copied, opened without blocking (a FIFO planted in a store must not hang a fetch), and
bounded by the same size limit as a download. Written, a folder is what a static web
server serves: see FolderWriter.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, BinaryIO

from dsymfind import permissions
from dsymfind.atomic import unlink_quietly
from dsymfind.errors import ConfigError
from dsymfind.stores.base import (
    Fetched,
    Limits,
    NotFound,
    Options,
    Surroundings,
    Terms,
    TooLarge,
    TransferError,
    nothing_under,
)
from dsymfind.stores.writers import (
    CONFLICT,
    PUBLISHED,
    SMALL_LIMIT,
    WOULD_PUBLISH,
    Listed,
    Outcome,
    PublishError,
    compared,
    sha256_of,
)

if TYPE_CHECKING:
    from dsymfind.stores.transfer import Session
    from dsymfind.stores.writers import Body

# How a server's url of this kind is written, for messages.
URL_FORMS = ("file:///FOLDER/",)
SETTING_KEYS: tuple[str, ...] = ()
# A copy is quick and local: a cut one starts over.
RESUMABLE = False
DEFAULT_LAYOUT = None
CREDENTIALS_FIX = "check that you may read the folder"

_COPY_CHUNK = 1024**2
# Absent, or a path through something that is not a folder: the store does not have it.
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR})


def check_location(where: str, url: str) -> str:
    if os.path.isabs(url):
        return os.path.normpath(url)
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost") or not parts.path:
        raise ConfigError(f"{where}: a file:// URL names a folder on this machine: {url!r}")
    return url


def default_name(url: str) -> str:
    return folder_of(url)


def read_settings(where: str, table: Mapping[str, object]) -> dict[str, object]:
    return {}


def open_reader(location: str, session: Session, options: Options) -> FolderReader:
    return FolderReader(location)


def open_writer(location: str, options: Options) -> FolderWriter:
    return FolderWriter(folder_of(location))


class FolderReader:
    def __init__(self, location: str) -> None:
        self.location = location
        self.root = os.path.normpath(folder_of(location))

    def path(self, key: str) -> str:
        """The key's file; refused when the key would lead out of the folder."""
        relative = urllib.parse.unquote(key).lstrip("/")
        path = os.path.normpath(os.path.join(self.root, relative))
        if os.path.commonpath([path, self.root]) != self.root or path == self.root:
            raise TransferError(
                f"{self.root}: refused key {key!r}: it leaves the store", retryable=False
            )
        return path

    def where(self, key: str) -> str:
        try:
            return self.path(key)
        except TransferError:
            return f"{self.root}/{key}"

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in _ABSENT:
                raise NotFound(f"{path}: not found") from exc
            raise TransferError(f"{path}: cannot read ({exc.strerror})", retryable=False) from exc
        with open(fd, "rb") as src:
            size = _regular_size(src.fileno(), path, terms.limits)
            _copy(src, dest, path, size, terms)
        return Fetched(path, size, None)


# A listing for `doctor` looks at this many entries of a folder tree at most: a store's
# files lie a few levels down, and a huge empty tree must not hold the check up.
SURVEY_ENTRIES = 10_000


def surroundings(location: str, options: Options) -> Surroundings:
    """Whether the folder holds a file, and which folders beside it do."""
    root = os.path.normpath(folder_of(location))
    if _holds_a_file(root):
        return Surroundings(True)
    parent = os.path.dirname(root)
    try:
        with os.scandir(parent) as scan:
            folders = sorted(e.path for e in scan if e.is_dir(follow_symlinks=False))
    except OSError:
        folders = []
    beside = [p + os.sep for p in folders if p != root and _holds_a_file(p)]
    return nothing_under(parent + os.sep, beside)


def _holds_a_file(folder: str) -> bool:
    """Whether a regular file lies anywhere below `folder` (symlinks not followed)."""
    stack, seen = [folder], 0
    while stack and seen < SURVEY_ENTRIES:
        try:
            with os.scandir(stack.pop()) as scan:
                for entry in scan:
                    seen += 1
                    if entry.is_file(follow_symlinks=False):
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return False


def folder_of(location: str) -> str:
    """The folder a `file:` URL or an absolute path names."""
    if os.path.isabs(location):
        return location
    parts = urllib.parse.urlsplit(location)
    if parts.netloc not in ("", "localhost"):
        raise TransferError(
            f"{location}: a file: URL names a folder on this machine", retryable=False
        )
    return urllib.request.url2pathname(parts.path)


def _regular_size(fd: int, path: str, limits: Limits) -> int:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotFound(f"{path}: not a regular file")
    if st.st_size > limits.max_bytes:
        raise TooLarge(f"{path}: {st.st_size} bytes, over the {limits.max_bytes}-byte limit")
    return st.st_size


def _copy(src: BinaryIO, dest: str, path: str, size: int, terms: Terms) -> None:
    """The file into `dest`, within the download's deadline: a slow network mount must not
    hold the downloader (and the UUID's lock) past it."""
    done = 0
    deadline = time.monotonic() + terms.limits.total_timeout
    try:
        with open(dest, "xb") as out:
            while chunk := src.read(_COPY_CHUNK):
                if terms.cancel is not None and terms.cancel.is_set():
                    raise TransferError("cancelled", retryable=False)
                if time.monotonic() > deadline:
                    raise TransferError(
                        f"{path}: gave up after {terms.limits.total_timeout:g} s", retryable=True
                    )
                done += len(chunk)
                if done > size:
                    raise TransferError(f"{path}: grew while being read", retryable=True)
                out.write(chunk)
                if terms.progress is not None:
                    terms.progress(done, size)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise TransferError(
            f"{path}: cannot copy ({exc.strerror or exc})", retryable=False
        ) from exc


# A static web server (and every developer's account) must be able to read the store.
FILE_MODE = 0o644
FOLDER_MODE = 0o755


class FolderWriter:
    """A folder a static web server serves: files 0644, folders 0755, each file created by
    a hard link from a complete, fsynced temp file, which fails when the name is taken."""

    def __init__(self, root: str) -> None:
        # Written through its real path only, once no other user can redirect or write it.
        self.root = permissions.refuse_unsafe_store(os.path.abspath(root))
        self.local_root: str | None = self.root
        try:
            self._make_folders(self.root)
        except OSError as exc:
            raise PublishError(f"{root}: cannot make the folder ({exc.strerror or exc})") from None

    def where(self, key: str) -> str:
        return self._path(key)

    def check(self, key: str, sha256: str) -> Outcome:
        final = self._path(key)
        taken = self._taken(final, sha256)
        return taken if taken is not None else Outcome(WOULD_PUBLISH)

    def put(self, key: str, body: Body) -> Outcome:
        final = self._path(key)
        taken = self._taken(final, body.sha256)
        if taken is not None:
            return taken
        folder = os.path.dirname(final)
        try:
            self._make_folders(folder)
            return self._create(final, body)
        except OSError as exc:
            raise PublishError(f"{final}: cannot write ({exc.strerror or exc})") from None

    def _create(self, final: str, body: Body) -> Outcome:
        folder = os.path.dirname(final)
        tmp = os.path.join(folder, f".{os.path.basename(final)}.{secrets.token_hex(6)}.tmp")
        try:
            _copy_synced(body, tmp)
            try:
                os.link(tmp, final)  # create-only: EEXIST when another publisher won
            except FileExistsError:
                taken = self._taken(final, body.sha256)
                return taken if taken is not None else Outcome(CONFLICT, f"{final} vanished")
        finally:
            unlink_quietly(tmp)
        _fsync_folder(folder)
        return Outcome(PUBLISHED)

    # -- managing what was written (stores/writers.py Manager) ------------------------------

    def listed(self, prefix: str) -> Iterator[Listed]:
        """Hidden names (a writer's temporary files, `.dsymfind-locks/`) are not objects."""
        found = sorted(self._walk(self._deepest_folder(prefix)))
        for key, st in found:
            if key.startswith(prefix):
                yield Listed(key, st.st_size, st.st_mtime)

    def _deepest_folder(self, prefix: str) -> str:
        folder, _, _ = prefix.rpartition("/")
        return folder

    def _walk(self, folder: str) -> Iterator[tuple[str, os.stat_result]]:
        base = os.path.join(self.root, *folder.split("/")) if folder else self.root
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise PublishError(f"{base}: cannot list ({exc.strerror or exc})") from None
        for entry in entries:
            if entry.name.startswith("."):
                continue
            key = f"{folder}/{entry.name}" if folder else entry.name
            if entry.is_dir(follow_symlinks=False):
                yield from self._walk(key)
            elif entry.is_file(follow_symlinks=False):
                yield key, entry.stat(follow_symlinks=False)

    def read_small(self, key: str, limit: int = SMALL_LIMIT) -> bytes | None:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in _ABSENT:
                return None
            raise PublishError(f"{path}: cannot read ({exc.strerror or exc})") from None
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                raise PublishError(f"{path}: not a file of at most {limit} bytes")
            data = f.read(limit + 1)
        if len(data) > limit:  # grown since the fstat
            raise PublishError(f"{path}: not a file of at most {limit} bytes")
        return data

    def create_small(self, key: str, data: bytes) -> bool:
        final = self._path(key)
        folder = os.path.dirname(final)
        tmp = os.path.join(folder, f".{os.path.basename(final)}.{secrets.token_hex(6)}.tmp")
        try:
            self._make_folders(folder)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fchmod(out.fileno(), FILE_MODE)
                os.fsync(out.fileno())
            try:
                os.link(tmp, final)  # create-only, as put
            except FileExistsError:
                return False
            _fsync_folder(folder)
            return True
        except OSError as exc:
            raise PublishError(f"{final}: cannot write ({exc.strerror or exc})") from None
        finally:
            unlink_quietly(tmp)

    def delete(self, keys: Sequence[str]) -> list[tuple[str, str]]:
        """Folders are left, even empty: removing one could pull it from under a publisher
        that has just made it for its next file."""
        failures = []
        touched = set()
        for key in keys:
            path = self._path(key)
            try:
                os.unlink(path)
                touched.add(os.path.dirname(path))
            except OSError as exc:
                if exc.errno not in _ABSENT:
                    failures.append((key, exc.strerror or str(exc)))
        for folder in touched:
            _fsync_folder(folder)
        return failures

    def may_delete(self) -> str | None:
        if os.access(self.root, os.W_OK):
            return None
        return f"{self.root}: this user may not remove files from the store"

    def _taken(self, final: str, sha256: str) -> Outcome | None:
        """None when `final` is free; else EXISTS or CONFLICT."""
        try:
            st = os.lstat(final)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PublishError(f"{final}: cannot read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(st.st_mode):
            return Outcome(CONFLICT, f"{final} exists and is not a file; left alone")
        return compared(sha256, sha256_of(final)[1], final)

    def _path(self, key: str) -> str:
        """The key's file, which must lie in the root (keys carry file names from inputs)."""
        parts = key.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise PublishError(f"{key!r}: not a key that names a file in {self.root}")
        return os.path.join(self.root, *parts)

    @staticmethod
    def _make_folders(folder: str) -> None:
        """Make the missing folders of `folder`, 0755 whatever the umask."""
        missing = []
        while not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for made in reversed(missing):
            try:
                os.mkdir(made)
            except FileExistsError:
                continue  # another publisher made it: theirs is as good
            os.chmod(made, FOLDER_MODE)


def _copy_synced(body: Body, dst: str) -> None:
    """The body into a new file: complete, checked unchanged (Changed ends it) and synced."""
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as out:
        for chunk in body.chunks():
            out.write(chunk)
            body.sent(len(chunk))
        out.flush()
        os.fchmod(out.fileno(), FILE_MODE)
        os.fsync(out.fileno())


def _fsync_folder(folder: str) -> None:
    """The new name survives a crash only once its folder is synced."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
