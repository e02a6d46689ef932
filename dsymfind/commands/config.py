"""`dsymfind config`: the effective configuration and where each value came from.

Secrets are masked: header values (but not the ${VAR} references that keep tokens out
of the file), passwords in URLs and query values (presigned URLs sign there).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import urllib.parse
from typing import TYPE_CHECKING

from dsymfind import debugsymbols, settings

if TYPE_CHECKING:
    from dsymfind.stores.base import Server

_DEBUGSYMBOLS_KEYS = {
    "debugsymbols_file_mapped_paths": debugsymbols.FILE_MAPPED_PATHS,
    "debugsymbols_search_paths": debugsymbols.SEARCH_PATHS,
}
MASK = "****"
# An authorization scheme names no secret; what follows it does.
_SCHEME = re.compile(r"(?i)^(Bearer|Basic|Token|Digest|Bot) +")
_REFERENCE = re.compile(r"(\$\{[A-Za-z_][A-Za-z0-9_]*\})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    return show_config(as_json=args.json)


def show_config(*, as_json: bool) -> int:
    current = settings.load(os.environ)
    current["servers"] = [masked_server(server) for server in current["servers"]]
    current["symbol_path"] = masked_symbol_path(current["symbol_path"])
    if as_json:
        print(json.dumps(current, indent=2))
        return 0
    print(f"config file: {current['config_file']}")
    origins = current["origins"]
    for key, value in current.items():
        if key in ("config_file", "origins", "stores_fingerprint"):
            continue  # said above; origins are per key; the fingerprint is derived, not set
        origin = origins.get(key) or f"DebugSymbols preferences {_DEBUGSYMBOLS_KEYS.get(key, '')}"
        print(f"{key} = {json.dumps(value)}  # {origin}")
    return 0


def masked_server(server: Server) -> Server:
    return {
        **server,
        "url": masked_url(server["url"]),
        "template": masked_url(server["template"]),
        "headers": {name: masked_header(value) for name, value in server["headers"].items()},
    }


def masked_header(value: str) -> str:
    """`Bearer ${TOKEN}` stays as it is; `Bearer abc123` becomes `Bearer ****`."""
    scheme = _SCHEME.match(value)
    head = scheme.group(0) if scheme else ""
    parts = _REFERENCE.split(value[len(head) :])
    # split() with a group: the references are at the odd positions.
    return head + "".join(part if i % 2 else (MASK if part else "") for i, part in enumerate(parts))


def masked_symbol_path(text: str) -> str:
    """Each URL of a Windows symbol path (`srv*DIR*URL;...`) masked."""
    return ";".join(
        "*".join(masked_url(part) if "://" in part else part for part in element.split("*"))
        for element in text.split(";")
    )


def masked_url(url: str) -> str:
    """User information (a token is often the user name) and query values masked."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at:
        netloc = f"{MASK}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
    query = urllib.parse.urlencode(
        [(key, MASK) for key, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)],
        safe="*",
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))
