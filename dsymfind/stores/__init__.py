"""The kinds of remote symbol store, one module each, by the scheme of a server's `url`.

A kind's module owns everything about its stores: the schemes it serves, the server keys it
reads and checks (`read_settings`), whether a transfer cut part-way can be continued, its
Reader and, when its stores can be written, its Writer. config_reader.py, the fetcher,
`dsymfind publish` and `doctor` ask this registry and know no kind by name, so adding a
kind is one module and one line in KINDS. The shape a module follows is `Kind` below; the
vocabulary every kind speaks is stores/base.py.

Only this module and base.py load on paths that merely name a store (`config`,
`status`): a kind's module is imported when a server of that kind is read or used, and
imports its third-party code (botocore) inside its functions.
"""

from __future__ import annotations

import importlib
import os
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

from dsymfind.errors import DsymfindError
from dsymfind.stores.base import Fetched, Options, Reader, Terms, contained, redact

if TYPE_CHECKING:
    from dsymfind.stores.transfer import Session
    from dsymfind.stores.writers import Manager, Writer

# Each scheme's module, imported only when a store of that kind is used.
KINDS: dict[str, str] = {
    "http": "dsymfind.stores.http",
    "https": "dsymfind.stores.http",
    "file": "dsymfind.stores.folder",
    "s3": "dsymfind.stores.s3.store",
    "debuginfod": "dsymfind.stores.debuginfod",
    "command": "dsymfind.stores.command",
}


class Kind(Protocol):
    """A kind of store's module: module-level names, read through `kind_for`. Optional:
    `open_writer` (its stores can be written), `surroundings` (its stores can be listed:
    what lies under a location and beside it, base.Surroundings, or None when the listing
    is refused) and FAILURE_FIX (what `doctor` advises when a probe fails, if not the
    network's fix)."""

    # How a server's url of this kind is written, for messages: "s3://BUCKET/PREFIX/".
    URL_FORMS: tuple[str, ...]
    # The server keys beyond the common ones (name, url, layout, ...) that it reads.
    SETTING_KEYS: tuple[str, ...]
    # Transfers cut part-way are continued by the next attempt (stores/partial.py).
    RESUMABLE: bool
    # The layout of a server that names none; None when a layout must be named.
    DEFAULT_LAYOUT: str | None
    # The fix `doctor` gives when the store refuses our credentials.
    CREDENTIALS_FIX: str

    def check_location(self, where: str, url: str) -> str:
        """The `url` as it is kept, or a ConfigError naming `where`."""
        ...

    def default_name(self, url: str) -> str:
        """A server's name when it has none: never the credentials a URL may carry."""
        ...

    def read_settings(self, where: str, table: Mapping[str, object]) -> dict[str, object]:
        """The kind's own keys of a server's table, checked (ConfigError), marshal-able."""
        ...

    def open_reader(self, location: str, session: Session, options: Options) -> Reader:
        """The Reader that fetches from `location`."""
        ...


def scheme_of(location: str) -> str:
    """The registry key of a store location; an absolute path is a folder."""
    if os.path.isabs(location):
        return "file"
    return urllib.parse.urlsplit(location).scheme.lower()


def known_schemes() -> list[str]:
    return sorted(KINDS)


def url_forms() -> list[str]:
    """Every kind's way of writing a url, each once, for "expected ..." messages."""
    forms = (form for scheme in known_schemes() for form in kind_for(scheme).URL_FORMS)
    return list(dict.fromkeys(forms))


def kind_for(scheme: str) -> Kind:
    """The module of the kind of store `scheme` names; DsymfindError for an unknown one."""
    if scheme not in KINDS:
        raise DsymfindError(f"no kind of store for {scheme or 'this'} locations")
    return cast("Kind", importlib.import_module(KINDS[scheme]))


def kinds_reading(key: str) -> list[str]:
    """How the urls of the kinds that read the server key `key` are written: for "only
    for ..." messages."""
    kinds = {KINDS[s]: kind_for(s) for s in known_schemes()}
    return [kind.URL_FORMS[0] for kind in kinds.values() if key in kind.SETTING_KEYS]


def open_reader(location: str, session: Session, options: Options | None = None) -> Reader:
    """The Reader of a store location, of the kind its scheme names; its get() contains
    any unexpected exception to that one fetch (base.contained)."""
    try:
        kind = kind_for(scheme_of(location))
    except DsymfindError as exc:
        raise DsymfindError(f"{redact(location)}: {exc}") from None
    with contained(redact(location)):
        reader = kind.open_reader(location, session, options or Options())
    return _Contained(reader)


def open_writer(location: str, options: Options) -> Writer:
    """The create-only Writer to `location`; DsymfindError when its kind's
    stores cannot be written (an HTTP server: publish into what it serves)."""
    scheme = scheme_of(location)
    kind = kind_for(scheme)
    opener = getattr(kind, "open_writer", None)
    if opener is None:
        raise DsymfindError(
            f"{redact(location)}: {kind.URL_FORMS[0]} stores cannot be published to; "
            "publish into the folder or bucket the server serves"
        )
    writer: Writer = opener(location, options)
    return writer


def open_manager(location: str, options: Options) -> Manager:
    """The writer to `location` as one that also lists, reads back and removes (its build
    records, retiring); DsymfindError for a store that cannot be written."""
    writer = open_writer(location, options)
    if not hasattr(writer, "listed"):
        raise DsymfindError(f"{redact(location)}: this kind of store cannot be listed")
    return cast("Manager", writer)


class _Contained:
    """A Reader whose get() keeps any unexpected exception to itself (`contained`)."""

    def __init__(self, inner: Reader) -> None:
        self.inner = inner
        self.location = inner.location

    def where(self, key: str) -> str:
        return self.inner.where(key)

    def get(self, key: str, dest: str, terms: Terms) -> Fetched:
        with contained(self.inner.where(key), terms.partial):
            return self.inner.get(key, dest, terms)
