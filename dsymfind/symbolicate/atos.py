"""Addresses of one image, as Apple's `atos` reads and prints them (docs/symbolicate.md,
"atos").

An image is named by a file (a Mach-O binary, a dSYM bundle or its DWARF file) or by a
UUID. A binary's dSYM is found as the helper finds it (symbolicate/dsyms.py): this
machine first, then the servers; without one, its own symbol table names functions.
Addresses are the image's link-time (file) addresses unless told where it was loaded
(`-l`), how far it slid (`-s`), or that they are offsets into it (`-offset`).
"""

from __future__ import annotations

import os

from dsymfind.errors import DsymfindError
from dsymfind.uuids import normalize_uuid

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.apple.macho import Slice
    from dsymfind.paths import CachePaths
    from dsymfind.settings import Settings
    from dsymfind.symbolicate.bindings import SymCache
    from dsymfind.symbolicate.engine import Located

# How addresses are read (Apple's atos options): link-time addresses, or relative to a
# load address, a slide, or the image's start.
FILE, LOAD, SLIDE, OFFSET = "file", "load", "slide", "offset"
# What a -o that is a bundle holds its DWARF under.
DSYM_DWARF = os.path.join("Contents", "Resources", "DWARF")


# Plain classes: a NamedTuple costs a one-address run half a millisecond each to define.
class Image:
    __slots__ = ("dwarf", "name", "own_symbols", "text", "uuid")

    def __init__(
        self, uuid: str, dwarf: str, name: str, text: int, *, own_symbols: bool = False
    ) -> None:
        self.uuid = uuid
        # The file whose SymCache is read: a dSYM's DWARF, else the binary itself.
        self.dwarf = dwarf
        self.name = name  # as the lines name it: the file's name
        self.text = text  # where __TEXT is linked: file addresses less it are image offsets
        # The binary's own symbol table stands in for a dSYM: its table is not kept in the
        # cache, where it would be taken for the dSYM's under the same UUID.
        self.own_symbols = own_symbols


class Where:
    """Where the image lies: `mode` one of FILE, LOAD, SLIDE, OFFSET and its value."""

    __slots__ = ("mode", "value")

    def __init__(self, mode: str = FILE, value: int = 0) -> None:
        self.mode, self.value = mode, value


def image_offset(address: int, where: Where, text: int) -> int:
    """The image offset (as SymCaches are looked up) an input address stands for."""
    if where.mode == LOAD:
        return address - where.value
    if where.mode == SLIDE:
        return address - where.value - text
    if where.mode == OFFSET:
        return address
    return address - text


def parse_address(text: str, *, hex_only: bool = False) -> int:
    """`text` as an address: hex with 0x, else decimal (atos: hex with or without 0x when
    `hex_only`); DsymfindError when it is not one."""
    digits = text[2:] if text[:2].lower() == "0x" else text
    base = 16 if hex_only or digits is not text else 10
    try:
        # int() takes "+5", " 5" and "1_0"; no address is written so.
        value = int(digits, base) if digits.isalnum() and digits.isascii() else -1
    except ValueError:
        value = -1
    if value < 0 or value >= 1 << 64:
        raise DsymfindError(f"not an address: {text!r}")
    return value


def resolve(
    target: str | None,
    uuid: str | None,
    arch: str | None,
    current: Settings,
    *,
    offline: bool,
    ignore_negative_cache: bool = False,
    arch_option: str = "--arch",
) -> Image:
    """The image of a file (`target`) or of a UUID: its DWARF where a dSYM is found, else
    (a file) its own symbol table. `arch_option` names the option in messages."""
    if target is not None:
        path = _dwarf_in_bundle(target) if os.path.isdir(target) else target
        piece = _slice_of(path, arch, arch_option)
        assert piece.uuid is not None
        uuid, text = piece.uuid, _text_of(path, piece)
        if piece.filetype_name == "MH_DSYM":
            return Image(uuid, path, os.path.basename(path), text)
    else:
        given, uuid = uuid, normalize_uuid(uuid or "") or ""
        if not uuid:
            raise DsymfindError(f"not a UUID: {given!r}")
    # Where and how dSYMs are looked for: not needed when the file is one.
    from dsymfind.symbolicate import dsyms

    found = dsyms.locate(
        {uuid: False}, current, offline=offline, ignore_negative_cache=ignore_negative_cache
    )[uuid]
    if found.dwarf is not None:
        name = os.path.basename(target or found.dwarf)
        if target is None:
            piece = _slice_of(found.dwarf, None, arch_option, uuid)
            text = _text_of(found.dwarf, piece)
        return Image(uuid, found.dwarf, name, text)
    if target is not None:
        return Image(uuid, path, os.path.basename(path), text, own_symbols=True)
    raise DsymfindError(f"no dSYM for {uuid}: {found.reason}")


def table(cache: CachePaths, image: Image) -> SymCache:
    """The image's SymCache, from the cache or built (and kept, but for a binary's own)."""
    from dsymfind.symbolicate import symcaches

    return symcaches.load(None if image.own_symbols else cache, image.dwarf, image.uuid)


def _dwarf_in_bundle(bundle: str) -> str:
    """The DWARF file of a .dSYM bundle (the one file of Contents/Resources/DWARF)."""
    folder = os.path.join(bundle, DSYM_DWARF)
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError as exc:
        raise DsymfindError(f"{bundle}: not a dSYM bundle: {exc.strerror or exc}") from None
    if len(names) != 1:
        raise DsymfindError(f"{bundle}: not a dSYM bundle ({len(names)} files in {DSYM_DWARF})")
    return os.path.join(folder, names[0])


def _slice_of(path: str, arch: str | None, option: str, uuid: str | None = None) -> Slice:
    """The slice of `path` that `arch` names (or whose UUID is `uuid`)."""
    from dsymfind.apple import macho

    slices = [s for s in macho.read_slices(path) if s.uuid is not None]
    if uuid is not None:
        chosen = [s for s in slices if s.uuid == uuid]
    else:
        chosen = [s for s in slices if arch is None or s.arch == arch]
    if len(chosen) != 1:
        have = ", ".join(s.arch for s in slices) or "none with a UUID"
        need = f"no slice for {option} {arch}" if arch else f"several slices: give {option}"
        raise DsymfindError(f"{path}: {need} (it has {have})")
    return chosen[0]


def _text_of(path: str, piece: Slice) -> int:
    from dsymfind.apple import macho

    text = macho.segment_vmaddr(path, piece, "__TEXT")
    return 0 if text is None else text


def lines(
    name: str,
    address: int,
    offset: int,
    symbols: list[Located],
    *,
    inlines: bool = True,
    full_path: bool = False,
) -> list[str]:
    """`twice (in crashy) (crashy.c:5)`, one line per frame, innermost first (`+ 20`, the
    offset into the function, without line information); the address itself when
    nothing is known about it. Without `inlines`, the function the code is in alone."""
    if not symbols:
        return [f"{address:#x}"]
    said = []
    for located in symbols if inlines else symbols[-1:]:
        if located.file and located.line:
            file = located.file if full_path else os.path.basename(located.file)
            where = f"({file}:{located.line})"
        else:
            where = "+ 0" if located.start is None else f"+ {offset - located.start}"
        said.append(f"{located.symbol} (in {name}) {where}")
    return said
