"""The metadata a store keeps beside a file: the file's own name and architecture.

A store keys files by UUID, so without it a download would be named by its UUID and lldb
would name the module so. The format is Sentry symsorter's `meta` file, JSON
`{"name", "arch", "file_format"}`, plus `bundle` for a DWARF file: the `.dSYM` folder it
came in (`MyApp.app.dSYM`), which its own name does not tell. Where a layout keeps it is
layouts.metadata_key; `dsymfind publish` writes it, the downloader reads it back.

Everything read from a store is untrusted: a name is used only when it is one plain path
component (`safe_name`), otherwise the file keeps its UUID for a name.
"""

from __future__ import annotations

import json

# A meta file is well under a hundred bytes; anything near this is not one.
META_MAX = 64 * 1024
# NAME_MAX on APFS and Linux, in UTF-8 bytes: a longer name cannot be made.
MAX_NAME_BYTES = 255
# How a dSYM bundle's name ends, as DebugSymbols and lldb look for it.
BUNDLE_SUFFIX = ".dSYM"
MACHO_FORMAT = "macho"


def encode(
    name: str, arch: str, bundle: str | None = None, source: dict[str, str | bool] | None = None
) -> bytes:
    """A Mach-O file's meta, compact and in symsorter's key order, so that every publisher
    of one file writes the same bytes. `source`: where the build was made (vcs/provenance.py)."""
    values: dict[str, object] = {"name": name, "arch": arch, "file_format": MACHO_FORMAT}
    if bundle is not None:
        values["bundle"] = bundle
    if source is not None:
        values["source"] = source
    return json.dumps(values, separators=(",", ":")).encode()


def decode(data: bytes) -> tuple[str | None, str | None]:
    """The file name and bundle name a meta file gives, each None when absent or unsafe."""
    try:
        values = json.loads(data)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(values, dict):
        return None, None
    name = safe_name(values.get("name"))
    bundle = safe_name(values.get("bundle"))
    if name is None or bundle is None or not _is_bundle_name(bundle):
        return name, None  # a bundle describes the named file: none without a name
    return name, bundle


def safe_name(value: object) -> str | None:
    """`value` when it can name a file in a folder of ours as it is: one path component,
    printable, no leading dot (no `..`, no hidden file), at most MAX_NAME_BYTES."""
    if not isinstance(value, str) or not value or value.startswith("."):
        return None
    if "/" in value or "\\" in value or not value.isprintable():
        return None
    try:
        size = len(value.encode())
    except UnicodeEncodeError:  # a lone surrogate from JSON's \ud800
        return None
    return value if size <= MAX_NAME_BYTES else None


def _is_bundle_name(name: str) -> bool:
    return name.endswith(BUNDLE_SUFFIX) and len(name) > len(BUNDLE_SUFFIX)
