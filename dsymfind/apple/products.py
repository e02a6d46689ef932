"""What an Apple product ships: every Mach-O image of an `.xcarchive`, an `.app`, an `.ipa`
or a build folder, each slice with its UUID and arch, and the dSYMs that came with it.

The walk looks at every regular file (a Mach-O is known by its first bytes, not its name:
app executables, frameworks, versioned macOS frameworks, app extensions, App Clips, watch
apps, XPC services, loose dylibs all are) without following a symlink: a versioned
framework's links lead to files the walk meets where they really are, and a link out of the
product is not the product's. A bundle's executable that is no Mach-O, a file that cannot be
read, a symlink loop, a zip member that would land outside its folder: each becomes one
problem line, and the walk goes on.

An `.ipa` is read in place: members are opened inside the zip, never extracted, each
checked first as apple/unpack.py checks the members it extracts.

Xcode 16 with ENABLE_DEBUG_DYLIB builds an executable as a small stub, marked by a
`__TEXT,__debug_dylib` section, that loads the real code from `NAME.debug.dylib` beside it:
the stub needs no dSYM, the debug dylib does.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import zipfile
import zlib
from typing import NamedTuple

from macholib import mach_o

from dsymfind.apple import macho, unpack

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO

DEBUG_DYLIB_SECTION = "__debug_dylib"
DEBUG_DYLIB_SUFFIX = ".debug.dylib"
# A walk stops here: no app ships this many files, and a crafted folder may hold more.
MAX_FILES = 200_000
MAX_DEPTH = 40
# Bundles whose executable is named after the bundle.
BUNDLE_SUFFIXES = (".app", ".appex", ".framework", ".xpc", ".bundle")
# An .ipa's folders that are not the app: Apple's Swift libraries (Apple keeps their
# symbols), and the symbol files App Store Connect reads.
IPA_SKIPPED = ("SwiftSupport", "Symbols", "__MACOSX")
NOT_MACHO = "not a Mach-O file"
UNNAMED_EXECUTABLE = f"{NOT_MACHO}, yet its bundle names it as its executable"
_ZIP_ERRORS = (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError)

APP, ARCHIVE, IPA, FOLDER, DSYM, FILE = "app", "xcarchive", "ipa", "folder", "dsym", "file"

_MACHO_MAGICS = frozenset(
    {mach_o.MH_MAGIC, mach_o.MH_CIGAM, mach_o.MH_MAGIC_64, mach_o.MH_CIGAM_64}
)
_FAT_MAGICS = frozenset({mach_o.FAT_MAGIC, mach_o.FAT_MAGIC_64})
_WORDS = struct.Struct(">II")
_ZIP_MAGIC = b"PK"
_SKIPPED_FILETYPES = frozenset({mach_o.MH_OBJECT, mach_o.MH_DSYM})


class Image(NamedTuple):
    """One slice of a Mach-O file a product ships, or of a dSYM that came with it."""

    path: str  # relative to the product given, "/"-separated
    name: str  # the file's name: a dSYM's DWARF file is named after its binary
    uuid: str | None  # uppercase dashed; None when the slice has no LC_UUID
    arch: str
    stub: bool = False  # a debug-dylib stub: needs no dSYM


class Product(NamedTuple):
    """What one path holds."""

    path: str
    kind: str  # APP, ARCHIVE, IPA, FOLDER, DSYM or FILE
    images: list[Image]  # what ships, in walk order
    dsyms: list[Image]  # the dSYM slices among it (an archive's dSYMs/, dSYMs beside an .app)
    problems: list[str]  # one line each: what could not be read and why


def debug_dylib_name(name: str) -> str:
    """The file holding a stub executable's code."""
    return name + DEBUG_DYLIB_SUFFIX


def is_debug_dylib_stub(path: str | os.PathLike[str], piece: macho.Slice | None = None) -> bool:
    """Whether the Mach-O file at `path` (only its slice `piece`, when given) is an Xcode
    ENABLE_DEBUG_DYLIB stub. Unreadable files are not stubs."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        pieces = [piece] if piece is not None else macho.read_slices_of_open(fd, os.fspath(path))
        return any(
            DEBUG_DYLIB_SECTION in macho.segment_sections(fd, one, "__TEXT") for one in pieces
        )
    except (OSError, macho.MachOError):
        return False
    finally:
        os.close(fd)


def _stub_in_stream(stream: IO[bytes], size: int, pieces: list[macho.Slice]) -> bool:
    try:
        return any(
            DEBUG_DYLIB_SECTION in macho.stream_segment_sections(stream, size, one, "__TEXT")
            for one in pieces
        )
    except macho.MachOError:
        return False


def looks_like_macho(head: bytes) -> bool:
    """Whether a file's first 8 bytes are a Mach-O or universal header (a Java class file
    shares the universal magic, but its version stands where the arch count would)."""
    if len(head) < 8:
        return False
    magic, count = _WORDS.unpack_from(head)
    if magic in _FAT_MAGICS:
        return bool(0 < count <= macho.MAX_FAT_ARCHS)
    little: int = struct.unpack_from("<I", head)[0]
    return little in _MACHO_MAGICS


def kind_of(path: str) -> str:
    """What `path` is, by its name and, for files, its first bytes."""
    name = os.path.basename(os.path.normpath(path))
    if os.path.isdir(path):
        if name.endswith(".xcarchive"):
            return ARCHIVE
        if name.endswith(".dSYM"):
            return DSYM
        if name.endswith(BUNDLE_SUFFIXES):
            return APP
        return FOLDER
    try:
        with open(path, "rb") as src:
            head = src.read(8)
    except OSError:
        return FILE
    return IPA if head.startswith(_ZIP_MAGIC) else FILE


def is_product(path: str) -> bool:
    """Whether `path` is something that ships (an archive, app, ipa or build folder), as
    against a dSYM or a lone symbol file."""
    return kind_of(path) in (APP, ARCHIVE, IPA, FOLDER)


def walk(path: str) -> Product:
    """Every image the product at `path` ships, and the dSYMs that came with it."""
    kind = kind_of(path)
    found = _Found(path)
    if kind == IPA:
        _walk_zip(path, found)
    elif kind == FILE:
        found.file(path, os.path.basename(path), expected=True)
    elif kind == DSYM:
        found.dsym_bundle(path, os.path.basename(os.path.normpath(path)))
    else:
        found.tree(path, "", depth=0)
        if kind == APP:
            _beside(path, found)
    return Product(path, kind, found.images, found.dsyms, found.problems)


def _beside(app: str, found: _Found) -> None:
    """The dSYM bundles in the folder holding an .app, as Xcode leaves them."""
    folder = os.path.dirname(os.path.abspath(app))
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(".dSYM") and entry.is_dir(follow_symlinks=False):
            found.dsym_bundle(entry.path, "../" + entry.name)


class _Found:
    def __init__(self, root: str) -> None:
        self.root = root
        self.images: list[Image] = []
        self.dsyms: list[Image] = []
        self.problems: list[str] = []
        self.files = 0

    def problem(self, where: str, why: str) -> None:
        self.problems.append(f"{where}: {why}")

    def tree(self, folder: str, relative: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.problem(relative or folder, f"folders nest deeper than {MAX_DEPTH}: not walked")
            return
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.problem(relative or folder, f"cannot list: {exc.strerror or exc}")
            return
        expected = _expected_executable(folder)
        for entry in entries:
            self.files += 1
            if self.files > MAX_FILES:
                self.problem(relative or folder, f"more than {MAX_FILES} files: walk stopped")
                return
            inside = f"{relative}/{entry.name}" if relative else entry.name
            self.entry(entry, inside, expected, depth)

    def entry(
        self, entry: os.DirEntry[str], relative: str, expected: str | None, depth: int
    ) -> None:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as exc:
            self.problem(relative, f"cannot read: {exc.strerror or exc}")
            return
        if stat.S_ISLNK(mode):
            self.link(entry.path, relative)
        elif stat.S_ISDIR(mode):
            if entry.name.endswith(".dSYM"):
                self.dsym_bundle(entry.path, relative)
            else:
                self.tree(entry.path, relative, depth + 1)
        elif stat.S_ISREG(mode):
            self.file(entry.path, relative, expected=entry.name == expected)

    def link(self, path: str, relative: str) -> None:
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.problem(relative, "a symbolic link loop")

    def file(self, path: str, relative: str, *, expected: bool) -> None:
        try:
            with open(path, "rb", buffering=0) as src:
                head = src.read(8)
        except OSError as exc:
            self.problem(relative, f"cannot read: {exc.strerror or exc}")
            return
        if not looks_like_macho(head):
            if expected:
                self.problem(relative, UNNAMED_EXECUTABLE)
            return
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            self.problem(relative, _without_path(str(exc), path))
            return
        stub = any(s.filetype == mach_o.MH_EXECUTE for s in slices) and is_debug_dylib_stub(path)
        self.add(relative, slices, stub)

    def add(self, relative: str, slices: list[macho.Slice], stub: bool) -> None:
        name = relative.rsplit("/", 1)[-1]
        for one in slices:
            if one.filetype in _SKIPPED_FILETYPES:
                continue
            self.images.append(Image(relative, name, one.uuid, one.arch, stub))

    def dsym_bundle(self, bundle: str, relative: str) -> None:
        files = _dwarf_files(bundle)
        if files is None:
            self.problem(relative, "a .dSYM bundle without Contents/Resources/DWARF/")
            return
        for path in files:
            name = os.path.basename(path)
            where = f"{relative}/Contents/Resources/DWARF/{name}"
            try:
                slices = macho.read_slices(path)
            except macho.MachOError as exc:
                self.problem(where, _without_path(str(exc), path))
                continue
            for one in slices:
                self.dsyms.append(Image(where, name, one.uuid, one.arch))


def _dwarf_files(bundle: str) -> list[str] | None:
    folder = os.path.join(bundle, "Contents", "Resources", "DWARF")
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return None
    return [e.path for e in entries if e.is_file(follow_symlinks=False)]


def _expected_executable(folder: str) -> str | None:
    """The executable a bundle folder names after itself, when `folder` is where it sits:
    X.framework/X, X.appex/X, X.app/X, or Contents/MacOS/X and Versions/A/X on macOS."""
    name = os.path.basename(folder)
    parent = os.path.dirname(folder)
    if name.endswith(BUNDLE_SUFFIXES):
        return os.path.splitext(name)[0]
    if name == "MacOS" and os.path.basename(parent) == "Contents":
        return os.path.splitext(os.path.basename(os.path.dirname(parent)))[0]
    if os.path.basename(parent) == "Versions":
        return os.path.splitext(os.path.basename(os.path.dirname(parent)))[0]
    return None


def _without_path(message: str, path: str) -> str:
    """macho's messages start with the path; the caller names the file its own way."""
    prefix = f"{path}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


# --- .ipa: read in place ---------------------------------------------------------------


def _walk_zip(path: str, found: _Found) -> None:
    try:
        with open(path, "rb") as src, zipfile.ZipFile(src) as archive:
            size = os.fstat(src.fileno()).st_size
            infos = archive.infolist()
            if len(infos) > MAX_FILES:
                found.problem(path, f"the zip holds {len(infos)} entries: too many to read")
                return
            for info in infos:
                _zip_member(archive, info, size, found)
    except _ZIP_ERRORS as exc:
        found.problem(os.path.basename(path), f"the zip archive is unreadable: {exc}")


def _zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, size: int, found: _Found) -> None:
    name = info.orig_filename
    problem = unpack.entry_problem(info, size)
    if problem is not None:
        found.problem(repr(name), f"zip entry {problem}: not read")
        return
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if info.is_dir() or not parts or parts[0] in IPA_SKIPPED:
        return
    relative = "/".join(parts)
    if any(p.endswith(".dSYM") for p in parts[:-1]):
        return  # an .ipa ships no dSYM; one zipped beside is publish's to read
    expected = (
        len(parts) >= 2
        and parts[-2].endswith(BUNDLE_SUFFIXES)
        and (parts[-1] == os.path.splitext(parts[-2])[0])
    )
    try:
        with archive.open(info) as member:
            head = member.read(8)
            if not looks_like_macho(head):
                if expected:
                    found.problem(relative, UNNAMED_EXECUTABLE)
                return
            slices = macho.read_slices_of_stream(member, info.file_size, relative)
            stub = any(s.filetype == mach_o.MH_EXECUTE for s in slices) and _stub_in_stream(
                member, info.file_size, slices
            )
    except macho.MachOError as exc:
        found.problem(relative, _without_path(str(exc), relative))
        return
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError, ValueError, RuntimeError) as exc:
        found.problem(relative, f"cannot read from the zip: {exc}")
        return
    found.add(relative, slices, stub)


def images_of(paths: list[str]) -> Iterator[Product]:
    """walk() of each path, in order."""
    for path in paths:
        yield walk(path)
