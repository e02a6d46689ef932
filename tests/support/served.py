"""The fixture dSYMs as a symbol server holds them: their DWARF files and bytes, a native
UUID tree of them on disk, zips made in memory, and the environment and configuration
that point dsymfind at a SymbolServer."""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from pathlib import Path

from dsymfind.uuids import tree_entry
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    UNIVERSAL_UUIDS,
    dwarf_of,
    write_config,
)

# Each fixture UUID's DWARF file (both slices of the universal one share a file).
DWARF_FILES = {
    HELLO_UUID: dwarf_of(FIXTURES / "hello.dSYM"),
    GREET_UUID: dwarf_of(FIXTURES / "libgreet.dylib.dSYM"),
    **{uuid: dwarf_of(FIXTURES / "universal.dSYM") for uuid in UNIVERSAL_UUIDS.values()},
}
HELLO_DWARF = DWARF_FILES[HELLO_UUID].read_bytes()
GREET_DWARF = DWARF_FILES[GREET_UUID].read_bytes()
UNIVERSAL_DWARF = DWARF_FILES[UNIVERSAL_UUIDS["arm64"]].read_bytes()
ZIP = "application/zip"
# Where serve_universal_zips puts its zips: a `template` layout's template.
ZIP_TEMPLATE = "zips/{UUID}.dSYM.zip"


def url_path(uuid: str) -> str:
    """Where a server in the native layout has `uuid`: /XXXX/XXXX/XXXX/XXXX/XXXX/XXXXXXXXXXXX."""
    return "/" + tree_entry("", uuid).lstrip("/")


def native_tree(root: Path) -> Path:
    """`root` made a native UUID tree of every fixture DWARF file: a server's files."""
    for uuid, dwarf in DWARF_FILES.items():
        target = root / url_path(uuid).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dwarf, target)
    return root


def server_env(server: ss.SymbolServer) -> dict[str, str]:
    """This process's environment with `server` as the one server (native layout)."""
    return dict(os.environ, DSYMFIND_SERVERS=f"native={server.url}/")


def configure_native(config_file: Path, server: ss.SymbolServer, *, timeout: float) -> None:
    """A configuration with `server` as the one server (native layout)."""
    write_config(
        config_file,
        f"timeout = {timeout:g}\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
    )


def zipped(entries: dict[str, bytes]) -> bytes:
    """A zip made in memory, each name holding its bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def zipped_bundle(bundle: Path) -> bytes:
    """A zip made in memory of `bundle`, under its own name."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(bundle.rglob("*")):
            archive.write(path, Path(bundle.name) / path.relative_to(bundle))
    return buffer.getvalue()


def serve_zip(server: ss.SymbolServer, uuid: str, entries: dict[str, bytes]) -> None:
    """`server` answers `uuid`'s native path with a zip of `entries`."""
    server.route(url_path(uuid), ss.body(zipped(entries), content_type=ZIP))


def serve_universal_zips(server: ss.SymbolServer) -> None:
    """universal.dSYM zipped, at ZIP_TEMPLATE's path for each of its UUIDs."""
    data = zipped_bundle(FIXTURES / "universal.dSYM")
    for uuid in UNIVERSAL_UUIDS.values():
        server.route("/" + ZIP_TEMPLATE.format(UUID=uuid), ss.body(data, content_type=ZIP))
