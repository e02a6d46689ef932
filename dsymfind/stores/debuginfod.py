"""A debuginfod federation: the servers `$DEBUGINFOD_URLS` lists, as one store
(`url = "debuginfod:"`), read only.

The variable is read when the Reader is opened, from the environment of the process that
downloads (the helper's detached downloader inherits lldb's), so a change to it needs no
change to the configuration. As elfutils' client reads it: URLs separated by whitespace,
empty entries ignored. Only http:// and https:// entries are asked; any other is refused,
and counts as a server that failed, so a miss is never remembered for a server we could
not ask. The servers are asked in turn, in the order listed, each through the http kind's
Reader (the same transfers, retries and resume), all within one download deadline; the
first that has the key wins. The key is NotFound only when every listed server said so.
"""

from __future__ import annotations

import dataclasses
import os
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dsymfind import paths
from dsymfind.atomic import unlink_quietly
from dsymfind.errors import ConfigError, DsymfindError
from dsymfind.stores import http, layouts
from dsymfind.stores.base import Fetched, NotFound, Options, Partial, Terms, TransferError, redact

if TYPE_CHECKING:
    from dsymfind.stores.base import Reader
    from dsymfind.stores.transfer import Session

# How a server's url of this kind is written, for messages.
URL_FORMS = ("debuginfod:",)
SETTING_KEYS: tuple[str, ...] = ()
# Each listed server is an HTTP store, whose transfers continue where they were cut.
RESUMABLE = True
DEFAULT_LAYOUT = layouts.DEBUGINFOD
CREDENTIALS_FIX = "check the headers this server sends to the servers in DEBUGINFOD_URLS"
VARIABLE = "DEBUGINFOD_URLS"
# How the location is kept: `debuginfod://` names the same federation.
LOCATION = "debuginfod:"
_SCHEMES = ("http", "https")


def check_location(where: str, url: str) -> str:
    if url.lower() not in (LOCATION, LOCATION + "//"):
        raise ConfigError(
            f"{where}: {url!r}: a debuginfod server is {LOCATION!r}, the servers "
            f"${VARIABLE} lists (configure one debuginfod server as an https:// URL)"
        )
    return LOCATION


def default_name(url: str) -> str:
    return VARIABLE


def read_settings(where: str, table: Mapping[str, object]) -> dict[str, object]:
    return {}


def open_reader(location: str, session: Session, options: Options) -> Federation:
    """The servers the variable lists now; DsymfindError when it lists none."""
    listed = os.environ.get(VARIABLE, "").split()
    if not listed:
        raise DsymfindError(f"${VARIABLE} lists no servers (it is unset or empty)")
    return Federation([_member(url, session, options) for url in listed])


def _member(url: str, session: Session, options: Options) -> Reader:
    """The http Reader of one listed server, or a stand-in that refuses every key."""
    try:
        parts = urllib.parse.urlsplit(url)
        ok = parts.scheme.lower() in _SCHEMES and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        return _Refused(redact(url))
    return http.open_reader(url, session, options)


class _Refused:
    """An entry of the variable that is not an http(s) URL with a host."""

    def __init__(self, shown: str) -> None:
        self.location = shown

    def where(self, key: str) -> str:
        return self.location

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        raise TransferError(
            f"{self.location}: refused: ${VARIABLE} entries must be http:// or https:// URLs",
            retryable=False,
        )


class Federation:
    def __init__(self, members: list[Reader]) -> None:
        self.members = members
        self.location = LOCATION

    def where(self, key: str) -> str:
        return f"{LOCATION}{key}"

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        """The first member's file; the first failure when no member had it and one failed,
        NotFound only when every member said not found."""
        deadline = time.monotonic() + terms.limits.total_timeout
        failures: list[TransferError] = []
        for member in self.members:
            if terms.cancel is not None and terms.cancel.is_set():
                raise TransferError("cancelled", retryable=False)  # another store won
            try:
                return member.get(key, dest, _member_terms(terms, member.where(key), deadline))
            except NotFound:
                pass
            except TransferError as exc:
                failures.append(exc)
            unlink_quietly(dest)  # the next member writes a whole file of its own
        if failures:
            raise _failed(failures)
        raise NotFound(f"{self.where(key)}: not found on any of the {len(self.members)} servers")


def _member_terms(terms: Terms, shown: str, deadline: float) -> Terms:
    """The terms for one member: what is left of the one deadline, and a partial file of
    its own beside the federation's (two servers' bytes are never joined)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TransferError(f"{shown}: no time left of the download deadline", retryable=True)
    limits = dataclasses.replace(terms.limits, total_timeout=left)
    partial = terms.partial
    if partial is not None:
        folder = os.path.dirname(partial.path)
        partial = Partial(os.path.join(folder, paths.partial_name(shown)), shown)
    return dataclasses.replace(terms, limits=limits, partial=partial)


def _failed(failures: list[TransferError]) -> TransferError:
    """One error for the members that failed; retryable when any failure may pass."""
    if len(failures) == 1:
        return failures[0]
    retryable = any(exc.retryable for exc in failures)
    return TransferError("; ".join(str(exc) for exc in failures), retryable=retryable)
