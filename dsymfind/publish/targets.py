"""Where `dsymfind publish` writes: create-only stores, where the first write of a key wins.

A Target never replaces an object. A key that already holds the same bytes (same
SHA-256) is `exists`; one that holds other bytes is `conflict`, and is left alone. So
any number of publishers of the same build, at once, end with one object per key and
nobody fails. The folder target is here; the S3 target is s3_target.py.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dsymfind import permissions
from dsymfind.atomic import unlink_quietly
from dsymfind.errors import DsymfindError

if TYPE_CHECKING:
    from dsymfind.publish.opened import OpenedFile

PUBLISHED, EXISTS, CONFLICT, FAILED = "published", "exists", "conflict", "failed"
# Dry runs: what would happen.
WOULD_PUBLISH = "would publish"
# A static web server (and every developer's account) must be able to read the store.
FILE_MODE = 0o644
FOLDER_MODE = 0o755
_CHUNK = 1 << 20


class PublishError(DsymfindError):
    """One object could not be written or checked; the message names it and says why."""


class TargetUnusable(PublishError):
    """The target cannot be written at all (access denied, no credentials): the run stops."""


@dataclass(frozen=True)
class Outcome:
    state: str  # PUBLISHED, EXISTS, CONFLICT or WOULD_PUBLISH
    message: str = ""


class Target(Protocol):
    def where(self, key: str) -> str:
        """The key as a person finds it: a path or an s3:// URL."""
        ...

    def check(self, key: str, sha256: str) -> Outcome:
        """What writing would do, writing nothing: EXISTS, CONFLICT or WOULD_PUBLISH."""
        ...

    def put(self, key: str, body: OpenedFile) -> Outcome:
        """Create `key` with the bytes of `body`, unless the key exists. A Changed from the
        body leaves no object behind."""
        ...


def sha256_of(path: str) -> tuple[int, str]:
    """Size and SHA-256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def compared(sha256: str, theirs: str | None, where: str) -> Outcome:
    """The outcome for a key found taken: the same bytes are `exists`, anything else conflicts."""
    if theirs == sha256:
        return Outcome(EXISTS)
    if theirs is None:
        return Outcome(CONFLICT, f"{where} exists and its SHA-256 is unknown; left alone")
    return Outcome(CONFLICT, f"{where} holds other bytes (SHA-256 {theirs}); left alone")


class FolderTarget:
    """A folder a static web server serves: files 0644, folders 0755, each file created by
    a hard link from a complete, fsynced temp file, which fails when the name is taken."""

    def __init__(self, root: str) -> None:
        # Written through its real path only, once no other user can redirect or write it.
        self.root = permissions.refuse_unsafe_store(os.path.abspath(root))
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

    def put(self, key: str, body: OpenedFile) -> Outcome:
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

    def _create(self, final: str, body: OpenedFile) -> Outcome:
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


def _copy_synced(body: OpenedFile, dst: str) -> None:
    """The body into a new file: complete, checked unchanged (Changed ends it) and synced."""
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as out:
        for chunk in body.chunks():
            out.write(chunk)
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
