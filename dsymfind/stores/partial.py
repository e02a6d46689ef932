"""A transfer cut part-way, kept on disk so that the next attempt continues it.

The bytes are in the partial file, `tmp/partial-<HEX>/<h>` (paths.py); its sidecar
`<h>.json` says what they are: the identity (redacted location and key, `source` in the
file), a validator (a strong ETag, else Last-Modified), the object's length and how many
bytes were on disk at the last checkpoint, when the writer had fsync'ed them. Only the
holder of the UUID's lock touches either. transfer.py asks for the rest with Range and
If-Range; body.py writes and checkpoints.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from contextlib import suppress

from dsymfind import atomic, paths
from dsymfind.stores.base import Partial, read_partial_meta

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.stores.http11 import Response

# The statuses of a ranged request's answer that say something of the range.
PARTIAL_CONTENT = 206
RANGE_NOT_SATISFIABLE = 416

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
# How a validator's bytes are held as text, in the sidecar and in If-Range: one character
# per byte, so they go back exactly as they came.
SENT_AS = "latin-1"


class StartOver(Exception):
    """The partial file was discarded: make the attempt again at once, from byte 0."""


class Kept:
    """A partial download on disk, as its sidecar describes it."""

    def __init__(
        self, partial: Partial, offset: int, validator: str | None, total: int | None
    ) -> None:
        self.partial = partial
        self.offset, self.validator, self.total = offset, validator, total
        self._meta_validator: str | None = validator
        # Where a body from byte 0 is written, until its first checkpoint makes it the
        # partial file too (see begin).
        self._grows_at: str | None = None

    @classmethod
    def load(cls, partial: Partial) -> Kept:
        """What may be continued; a partial that may not is discarded here."""
        meta = read_partial_meta(partial.path)
        offset, validator, total = 0, None, None
        if meta is not None and meta.get("source") == partial.identity:
            validator = meta.get("validator")
            total = meta.get("total")
            kept_bytes = meta.get("bytes")
            if (
                isinstance(validator, str)
                and validator
                and _sendable(validator)
                and isinstance(total, int)
                and isinstance(kept_bytes, int)
            ):
                # The sidecar's count was written after an fsync of those bytes: past it,
                # a killed run may have left bytes that never reached the disk.
                offset = min(_regular_size(partial.path), kept_bytes)
                if offset >= total > 0:
                    # Every byte is there (killed before the rename): one byte is still
                    # asked for, so that If-Range says whether they are of today's object.
                    offset = total - 1
        if not 0 < offset < (total if isinstance(total, int) else 0):
            kept = cls(partial, 0, None, None)
            kept.discard()
            return kept
        assert isinstance(validator, str) and isinstance(total, int)
        return cls(partial, offset, validator, total)

    @property
    def resumable(self) -> bool:
        """Whether the bytes on disk can be asked to be continued."""
        return self._meta_validator is not None and self.total is not None

    def request_headers(self) -> dict[str, str]:
        """Range and If-Range, in SENT_AS text (the client sends header values in it)."""
        if not self.offset or self.validator is None:
            return {}
        return {"Range": f"bytes={self.offset}-", "If-Range": self.validator}

    def continues(self, response: Response) -> int:
        """Where the answer to a ranged request continues the file: 0 for a whole body
        (a changed object, or no range support). A range that does not fit discards the
        partial file and raises StartOver."""
        status = response.status_code
        if status == RANGE_NOT_SATISFIABLE:
            self.discard()
            raise StartOver
        if status != PARTIAL_CONTENT:
            return 0
        found = _CONTENT_RANGE.fullmatch(response.headers.get("content-range", "").strip())
        length = response.headers.get("content-length")
        fits = (
            found is not None
            and int(found[1]) == self.offset
            and int(found[2]) + 1 == self.total
            and int(found[3]) == self.total
            # The body is framed by Content-Length: one that disagrees with the range
            # would end the body early or splice what follows into the file.
            and (length is None or length.strip() == str(self.total - self.offset))
        )
        # A store that honours Range but ignores If-Range must not splice two objects.
        answered = validator(response)
        if not fits or (answered is not None and answered != self.validator):
            self.discard()
            raise StartOver
        return self.offset

    def begin(self, validator: str | None, total: int | None, dest: str) -> None:
        """A whole body starts, written at the caller's `dest`: the sidecar now describes it
        (no validator: not resumable).

        The body becomes the partial file (a second link to it, in the partial folder) and
        gets its sidecar at its first checkpoint (record), the first time there are bytes
        on disk to count: a small body, whole before any checkpoint, makes no partial file,
        folder or sidecar to create and remove on every download. A killed run leaves at
        most what it left before, a partial file whose sidecar counts no byte (discarded by
        the next attempt). An earlier sidecar is overwritten at once, durably: it must never
        come back after a crash to describe this body's bytes as another object's."""
        self._meta_validator, self.total = validator, total
        self._grows_at = dest
        if os.path.exists(paths.partial_meta(self.partial.path)):
            self.record(0)

    def record(self, kept_bytes: int, *, durable: bool = True) -> None:
        """Say that `kept_bytes` are on disk; the caller has fsync'ed them."""
        if self._grows_at is not None and not self._keep(self._grows_at):
            return  # no second link to the body here: nothing a next attempt could continue
        meta = {
            "source": self.partial.identity,
            "validator": self._meta_validator,
            "total": self.total,
            "bytes": kept_bytes,
            "updated": time.time(),
        }
        atomic.write_bytes(
            paths.partial_meta(self.partial.path),
            json.dumps(meta).encode(),
            fsync=durable,
            mode=0o600,
        )

    def _keep(self, dest: str) -> bool:
        """The body growing at `dest` is the partial file from now on too: the caller's
        staging takes `dest` away with it, the partial name stays for the next attempt.
        Both are under tmp/, on one file system; False where it allows no hard links."""
        self._grows_at = None
        os.makedirs(os.path.dirname(self.partial.path), mode=0o700, exist_ok=True)
        atomic.unlink_quietly(self.partial.path)  # a discarded attempt's
        try:
            os.link(dest, self.partial.path)
        except OSError:
            return False
        return True

    def show_at(self, dest: str) -> None:
        """A continued body: the caller's path names the partial file while it grows, as
        without one (a hard link, which the caller's staging takes away with it while the
        partial name stays for the next attempt)."""
        atomic.unlink_quietly(dest)  # an earlier attempt's link, or its whole body
        with suppress(OSError):  # no hard links here: the body takes the name at the end
            os.link(self.partial.path, dest)

    def finish(self, dest: str) -> None:
        """The whole body is there: the caller's name alone keeps it, and the sidecar goes."""
        if self._grows_at is not None:
            return  # never kept: there is neither a partial file nor a sidecar of ours
        try:
            linked = os.path.samefile(self.partial.path, dest)
        except OSError:
            linked = False
        if linked:
            # rename() between two links of one file does nothing and keeps both.
            os.unlink(self.partial.path)
        else:
            os.replace(self.partial.path, dest)
        atomic.unlink_quietly(paths.partial_meta(self.partial.path))

    def discard(self) -> None:
        self.partial.discard()


def validator(response: Response) -> str | None:
    """What If-Range may name: a strong ETag, else Last-Modified (RFC 9110, 13.1.5).

    Spelt as its bytes read as latin-1 (SENT_AS), which holds any byte 0x00-0xFF one to
    one: RFC 9110 lets an ETag carry 0x80-0xFF, which a UTF-8 reading would turn into text
    that cannot be sent again."""
    etag = _raw_header(response, b"etag")
    if etag and not etag.startswith("W/"):
        return etag
    return _raw_header(response, b"last-modified") or None


def _raw_header(response: Response, name: bytes) -> str | None:
    for key, value in response.headers.raw:
        if key.lower() == name:
            return value.decode(SENT_AS)
    return None


def _sendable(value: str) -> bool:
    """Whether a validator can go back in If-Range: bytes a header may carry (a sidecar
    written by an older version may hold text decoded as UTF-8, which cannot)."""
    try:
        raw = value.encode(SENT_AS)
    except UnicodeEncodeError:
        return False
    return not any(byte < 0x20 or byte == 0x7F for byte in raw)


def _regular_size(path: str) -> int:
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0
