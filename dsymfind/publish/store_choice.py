"""Which store a command that writes or manages one means: `--to` of publish, `--store` of
builds, retire, check-build and why. A configured server's name, a store's URL
(s3://BUCKET/PREFIX, ...) or a folder, with the connection flags (--endpoint-url, --region,
--profile) filling what a server's configuration leaves unset. One reading for every verb,
so a STORE means the same store to each."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import NamedTuple

from dsymfind import settings, stores
from dsymfind.errors import DsymfindError
from dsymfind.stores.base import Options, Server
from dsymfind.stores.writers import Manager, Writer

# The kinds of store whose stores can be listed and written: what a verb with no STORE
# looks at among the configured servers.
_MANAGED_SCHEMES = ("file", "s3")


class Location(NamedTuple):
    name: str  # a configured server's name, else the STORE as given
    url: str
    server: Server | None  # the configured server it names, if any
    settings: dict[str, object]  # the kind's settings: configured, then the flags


def add_arguments(
    parser: argparse.ArgumentParser, *, required: bool = False, default: object = None
) -> None:
    """`--store` and the connection flags, as every verb that manages a store spells them;
    `default` is argparse.SUPPRESS on a sub-action's parser, so that it keeps what was
    given before the action's name."""
    parser.add_argument(
        "--store",
        required=required,
        default=default,
        metavar="STORE",
        help="a configured server's name, a folder, or an S3 location"
        + ("" if required else " (default: every configured folder and S3 server)"),
    )
    add_connection_arguments(parser, default=default)


def add_connection_arguments(parser: argparse.ArgumentParser, *, default: object = None) -> None:
    parser.add_argument(
        "--endpoint-url", default=default, metavar="URL", help="S3: the engine's URL (not AWS)"
    )
    parser.add_argument(
        "--region", default=default, metavar="REGION", help="S3: the bucket's region"
    )
    parser.add_argument(
        "--profile", default=default, metavar="PROFILE", help="S3: an AWS configuration profile"
    )


def connection_flags(
    endpoint_url: str | None, region: str | None, profile: str | None
) -> dict[str, str]:
    """The connection flags given, by their server keys."""
    given = {"endpoint_url": endpoint_url, "region": region, "profile": profile}
    return {key: value for key, value in given.items() if value is not None}


def locate(
    store: str, current: settings.Settings, given: Mapping[str, str], flag: str = "--store"
) -> Location:
    """The store `store` names; DsymfindError (its message starting with `flag`) when it
    names none or a flag does not apply to its kind."""
    server = next((s for s in current["servers"] if s["name"] == store), None)
    if server is not None:
        name, url, configured = store, server["url"], server["settings"]
    elif "://" in store:
        name, url, configured = store, store, {}
    elif os.sep not in store and not store.startswith(".") and not os.path.isdir(store):
        names = ", ".join(s["name"] for s in current["servers"]) or "none"
        raise DsymfindError(
            f"{flag} {store}: no server of that name (configured: {names}); "
            f"name a folder as a path (./{store}) or a store's URL (s3://BUCKET/PREFIX)"
        )
    else:
        name, url, configured = store, os.path.abspath(store), {}
    return Location(name, url, server, _settings(url, configured, given, flag))


def _settings(
    url: str, configured: Mapping[str, object], given: Mapping[str, str], flag: str
) -> dict[str, object]:
    scheme = stores.scheme_of(url)
    if scheme not in stores.KINDS:
        raise DsymfindError(f"{flag} {url}: no kind of store for {scheme}:// URLs")
    kind = stores.kind_for(scheme)
    unread = sorted(set(given) - set(kind.SETTING_KEYS))
    if unread:
        option = "--" + unread[0].replace("_", "-")
        raise DsymfindError(f"{option}: not used by {scheme}:// stores")
    filled = {key: value for key, value in configured.items() if value is not None}
    return kind.read_settings(flag, {**given, **filled})


def open_writer(location: Location) -> Writer:
    return stores.open_writer(location.url, Options(settings=location.settings))


def open_store(
    store: str | None,
    given: Mapping[str, str],
    flag: str = "--store",
    current: settings.Settings | None = None,
) -> list[tuple[str, Manager]]:
    """The store `store` names, as a Manager, with the name messages call it by; without
    `store`, every configured server of a kind that can be listed (folders, S3). An empty
    list when there is none; DsymfindError when `store` names no store that can be listed."""
    current = current if current is not None else settings.load(os.environ)
    if store is not None:
        location = locate(store, current, given, flag)
        return [(location.name, _manager(location))]
    chosen = []
    for server in current["servers"]:
        if stores.scheme_of(server["url"]) in _MANAGED_SCHEMES:
            location = locate(server["name"], current, given, flag)
            chosen.append((location.name, _manager(location)))
    return chosen


def _manager(location: Location) -> Manager:
    return stores.open_manager(location.url, Options(settings=location.settings))
