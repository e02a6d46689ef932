"""What `dsymfind publish` publishes: the symbol files under the paths it is given, verified.

Inputs are `.dSYM` bundles, folders (walked without following symlinks, Xcode's
`*.noindex` skipped), `.xcarchive`s (their dSYMs; with `executables` also the Mach-O
files under `Products/`), zips of dSYMs (unpacked into the caller's private folder by
apple/unpack.py), bare DWARF Mach-O files, PE files and PDBs.

A folder walk meets much that is no debug file (an app's executables and resources, Swift
modules, logs): those are skipped and counted, and executables and dylibs are published
only with `executables`. A path named on the command line that cannot be published is
refused.

Every file gets the structural verification a download gets (apple/macho.py,
windows/pe.py, windows/pdb.py) before anything is written anywhere. A universal file
becomes one complete thin Mach-O per UUID, copied out of its slice and read back. A file
that fails is refused with the reason, and nothing of it becomes a Piece.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dsymfind.apple import bundle, macho, unpack
from dsymfind.publish.opened import Stamp, stamp_of
from dsymfind.windows import pdb, pe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dsymfind.vcs.provenance import SourceRecord

DWARF, EXECUTABLE, PDB, PE = "dwarf", "executable", "pdb", "pe"
# Xcode keeps intermediates and its index in *.noindex folders: no dSYM worth publishing.
PRUNED_SUFFIX = ".noindex"
# A zip met while walking a folder is ours only when named like a dSYM delivery
# (appDsyms.zip, X.dSYM.zip), as for `dsymfind index`; a zip named on the command line always is.
ZIP_NAME_HINT = "dsym"
_COPY_CHUNK = 1 << 20
NOT_SYMBOLS = "not a dSYM, zip, Mach-O, PE or PDB file"


@dataclass(frozen=True)
class Piece:
    """One verified file to publish, under keys that keys.py derives from its identity."""

    kind: str  # DWARF, EXECUTABLE, PDB or PE
    path: str  # the bytes to publish: the user's file, or a thin copy of one of its slices
    origin: str  # where it came from, as the user can find it
    name: str  # the file's own name (symstore keys of executables, PEs and PDBs)
    uuid: str | None = None  # Mach-O pieces
    store_id: str | None = None  # PE and PDB: the symbol-store ID folder
    plist: bytes | None = None  # the bundle's per-UUID plist, travelling with its DWARF file
    verified: Stamp | None = None  # the file's stamp once verified: a change stops its upload
    arch: str | None = None  # Mach-O pieces
    bundle: str | None = None  # the `.dSYM` folder a DWARF file came in
    source: SourceRecord | None = None  # where its build was made (vcs/provenance.py)
    install_path: str | None = None  # a system image's path on the device (`--system`)

    @property
    def shown_name(self) -> str:
        """The name a person knows it by: its `.dSYM` bundle's, else the file's own."""
        return self.bundle or self.name

    @property
    def label(self) -> str:
        """How output lines name it: the name, then the UUID and architecture of a Mach-O
        piece, or the store ID of a PE or PDB file."""
        if self.uuid is None:
            return f"{self.shown_name} {self.store_id}"
        return f"{self.shown_name} {self.uuid} {self.arch}"


@dataclass
class Collected:
    pieces: list[Piece] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (where, why) per file
    skipped: list[tuple[str, str]] = field(default_factory=list)  # walked past: no debug file


class Collector:
    """Finds and verifies; thin copies and unpacked zips go under `workdir` (private, temporary)."""

    def __init__(
        self,
        workdir: str,
        *,
        executables: bool,
        max_unpacked_bytes: int,
        skip: str | None = None,
    ) -> None:
        self.workdir = workdir
        # The folder being published into, when it lies below an input: not an input itself.
        self.skipped = _identity(skip) if skip is not None else None
        self.executables = executables
        self.max_unpacked_bytes = max_unpacked_bytes
        self.found = Collected()
        self._copies = 0

    def add(self, path: str) -> None:
        """A path the user named: anything it is not is refused by name."""
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            self._refuse(path, f"cannot read it ({exc.strerror or exc})")
            return
        if stat.S_ISDIR(mode):
            self._add_folder(path)
        elif self._add_file(path, named=True) is not None:
            self._refuse(path, "not a .dSYM, .xcarchive, zip, Mach-O, PE or PDB file")

    def add_system_image(self, path: str, install_path: str) -> None:
        """An image of an OS build (apple/device_support.py found it): each slice an
        executable piece, verified and thinned as any binary's, carrying its install path.
        Needs a collector made with `executables`."""
        before = len(self.found.pieces)
        self._add_macho(path, path)
        self.found.pieces[before:] = [
            replace(piece, install_path=install_path) for piece in self.found.pieces[before:]
        ]

    def refuse(self, where: str, why: str) -> None:
        """An input that cannot be published, for a caller that found it so."""
        self._refuse(where, why)

    def _add_folder(self, folder: str) -> None:
        if folder.rstrip(os.sep).endswith(".dSYM"):
            self._add_bundle(folder, folder)
        elif folder.rstrip(os.sep).endswith(".xcarchive"):
            self._add_archive(folder)
        else:
            self._walk(folder, products=False)

    def _walk(self, root: str, *, products: bool) -> None:
        """Bundles, archives and symbol files below `root`; `products`: executables only."""
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as scan:
                    entries = sorted(scan, key=lambda e: e.name, reverse=True)
            except OSError as exc:
                self._refuse(folder, f"cannot list it ({exc.strerror or exc})")
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name.endswith(PRUNED_SUFFIX) or self._skipped(entry.path):
                        continue
                    if not products and entry.name.endswith((".dSYM", ".xcarchive")):
                        self._add_folder(entry.path)
                    else:
                        stack.append(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    self._skip(entry.path, "not a regular file (symlinks are not followed)")
                elif products:
                    self._add_product(entry.path)
                elif (why := self._add_file(entry.path, named=False)) is not None:
                    self._skip(entry.path, why)

    def _skipped(self, folder: str) -> bool:
        return self.skipped is not None and _identity(folder) == self.skipped

    def _add_archive(self, archive: str) -> None:
        dsyms = os.path.join(archive, "dSYMs")
        if os.path.isdir(dsyms):
            self._walk(dsyms, products=False)
        products = os.path.join(archive, "Products")
        if self.executables and os.path.isdir(products):
            self._walk(products, products=True)

    def _add_product(self, path: str) -> None:
        """An archive's product file: published when it is a Mach-O binary, else skipped
        (Info.plist, resources, code signatures)."""
        if _sniff(path) in ("macho", "fat"):
            self._add_macho(path, path, walked=True)
        else:
            self._skip(path, NOT_SYMBOLS)

    def _add_file(self, path: str, *, named: bool) -> str | None:
        """Publish a file by its content; else why it is none of the symbol kinds."""
        kind = _sniff(path)
        if kind == "zip":
            if not named and ZIP_NAME_HINT not in os.path.basename(path).lower():
                return "a zip not named like a dSYM delivery"
            self._add_zip(path)
        elif kind in ("macho", "fat"):
            self._add_macho(path, path, walked=not named)
        elif kind == PE:
            self._add_pe(path)
        elif kind == PDB:
            self._add_pdb(path)
        else:
            return NOT_SYMBOLS
        return None

    def _add_bundle(self, bundle_dir: str, origin: str) -> None:
        files = bundle.dwarf_files(bundle_dir, follow_symlinks=False)
        if not files:
            self._refuse(origin, f"no DWARF file in {bundle.DWARF_SUBDIR}")
        for dwarf in files:
            where = os.path.join(origin, os.path.relpath(dwarf, bundle_dir))
            self._add_macho(dwarf, where, bundle_dir=bundle_dir)

    def _add_zip(self, path: str) -> None:
        dest = self._new_folder("zip")
        try:
            unpacked = unpack.unpack(path, dest, max_unpacked_bytes=self.max_unpacked_bytes)
        except unpack.ArchiveError as exc:
            self._refuse(path, str(exc))
            return
        if unpacked.kind == "bundles":
            for bundle_dir in unpacked.paths:
                self._add_bundle(bundle_dir, f"{path}: {os.path.relpath(bundle_dir, dest)}")
        else:  # "file": the zip's one Mach-O file
            self._add_macho(unpacked.paths[0], f"{path}: {os.path.basename(unpacked.paths[0])}")

    def _add_macho(
        self,
        path: str,
        origin: str,
        *,
        bundle_dir: str | None = None,
        walked: bool = False,
    ) -> None:
        """The file's dSYM slices (or, with `executables`, a binary's slices). A binary met
        in a folder walk without `executables` is skipped; named, it is refused."""
        try:
            slices = macho.read_slices(path)
        except macho.MachOError as exc:
            self._refuse(origin, _reason(exc, path))
            return
        binary_allowed = bundle_dir is None and self.executables
        kind, chosen = _chosen(slices, binary_allowed=binary_allowed)
        if not chosen:
            why = _no_slices_reason(slices, hint=bundle_dir is None and not self.executables)
            (self._skip if walked else self._refuse)(origin, why)
            return
        try:
            pieces = [
                self._piece(path, origin, kind, piece, len(slices), bundle_dir) for piece in chosen
            ]
        except _Refused as exc:
            self._refuse(origin, str(exc))
            return
        self.found.pieces += pieces

    def _piece(
        self,
        path: str,
        origin: str,
        kind: str,
        piece: macho.Slice,
        count: int,
        bundle_dir: str | None,
    ) -> Piece:
        assert piece.uuid is not None
        thin = path if count == 1 and piece.offset == 0 else self._thin_copy(path, piece)
        plist = _uuid_plist(bundle_dir, piece.uuid) if kind == DWARF else None
        name = os.path.basename(path)
        return Piece(
            kind,
            thin,
            origin,
            name,
            uuid=piece.uuid,
            plist=plist,
            verified=_stamp(thin),
            arch=piece.arch,
            bundle=None if bundle_dir is None else os.path.basename(bundle_dir.rstrip(os.sep)),
        )

    def _thin_copy(self, path: str, piece: macho.Slice) -> str:
        """One slice as a complete Mach-O of its own, read back to prove it is that UUID."""
        self._copies += 1
        copy = os.path.join(self._new_folder("slice"), os.path.basename(path))
        with open(path, "rb") as src, open(copy, "xb") as dst:
            src.seek(piece.offset)
            left = piece.size
            while left:
                chunk = src.read(min(left, _COPY_CHUNK))
                if not chunk:
                    raise _Refused(f"the {piece.arch} slice ends past the file")
                dst.write(chunk)
                left -= len(chunk)
        try:
            again = macho.read_slices(copy)
        except macho.MachOError as exc:
            raise _Refused(
                f"the {piece.arch} slice alone is no Mach-O: {_reason(exc, copy)}"
            ) from None
        if [(s.uuid, s.filetype) for s in again] != [(piece.uuid, piece.filetype)]:
            raise _Refused(f"the {piece.arch} slice alone does not read back as {piece.uuid}")
        return copy

    def _add_pe(self, path: str) -> None:
        self._add_windows(path, PE, lambda: pe.read_identity(path).pe_key)

    def _add_pdb(self, path: str) -> None:
        self._add_windows(path, PDB, lambda: pdb.read_identity(path).key)

    def _add_windows(self, path: str, kind: str, store_id: Callable[[], str]) -> None:
        """A PE or PDB filed under its store key; one that cannot be read is refused."""
        try:
            key = store_id()
            verified = _stamp(path)
        except (pe.PEError, pdb.PdbError, _Refused) as exc:
            self._refuse(path, _reason(exc, path))
            return
        name = os.path.basename(path)
        piece = Piece(kind, path, path, name, store_id=key, verified=verified)
        self.found.pieces.append(piece)

    def _new_folder(self, what: str) -> str:
        self._copies += 1
        folder = os.path.join(self.workdir, f"{what}-{self._copies}")
        os.mkdir(folder, 0o700)
        return folder

    def _refuse(self, where: str, why: str) -> None:
        self.found.refused.append((where, why))

    def _skip(self, where: str, why: str) -> None:
        self.found.skipped.append((where, why))


def _chosen(slices: list[macho.Slice], *, binary_allowed: bool) -> tuple[str, list[macho.Slice]]:
    with_uuid = [s for s in slices if s.uuid is not None]
    dsym = [s for s in with_uuid if s.filetype_name == "MH_DSYM"]
    if dsym or not binary_allowed:
        return DWARF, dsym
    return EXECUTABLE, with_uuid


def still_matches(piece: Piece, fd: int) -> str | None:
    """Why the file open at `fd` is no longer the piece that was verified, or None. The
    structural check again, through the descriptor whose bytes are then hashed and written."""
    try:
        if piece.uuid is not None:
            slices = macho.read_slices_of_open(fd, piece.path)
            wanted = [(piece.uuid, piece.kind == DWARF)]
            if [(s.uuid, s.filetype_name == "MH_DSYM") for s in slices] != wanted:
                return f"no longer the {piece.kind} file of {piece.uuid} alone"
            return None
        if piece.kind == PE:
            key = pe.identity_of_open(fd, piece.path).pe_key
        else:
            key = pdb.identity_of_open(fd, piece.path).key
    except (macho.MachOError, pe.PEError, pdb.PdbError) as exc:
        return _reason(exc, piece.path)
    return None if key == piece.store_id else f"no longer filed under {piece.store_id}"


class _Refused(Exception):
    """One file cannot be published; the message says why (without its name)."""


def _stamp(path: str) -> Stamp:
    """Taken just after the file was read and verified."""
    try:
        return stamp_of(os.stat(path))
    except OSError as exc:
        raise _Refused(f"cannot read it ({exc.strerror or exc})") from None


def _identity(folder: str) -> tuple[int, int] | None:
    """A folder's (device, inode): the same folder, whatever the path reaching it."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _sniff(path: str) -> str:
    """ "zip", "macho", "fat", PE, PDB or "unknown", from the first bytes."""
    try:
        head = bundle.read_small_file(path, pdb.SIGNATURE_BYTES)
    except OSError:
        return "unknown"
    if head.startswith(pe.DOS_SIGNATURE):
        return PE
    if pdb.looks_like_pdb(head):
        return PDB
    try:
        kind = unpack.sniff(path)
    except OSError:
        return "unknown"
    return kind if kind in ("zip", "macho", "fat") else "unknown"


def _uuid_plist(bundle_dir: str | None, uuid: str) -> bytes | None:
    """The bundle's `<UUID>.plist`, checked to be a plist dict (lldb would choke on less)."""
    if bundle_dir is None:
        return None
    from dsymfind.apple import plists

    where = bundle.uuid_plist_path(bundle_dir, uuid)
    named = os.path.relpath(where, bundle_dir)
    try:
        if not stat.S_ISREG(os.lstat(where).st_mode):
            raise _Refused(f"{named} is not a regular file")
    except FileNotFoundError:
        return None
    try:
        found = bundle.uuid_plist_data(bundle_dir, uuid)
    except OSError as exc:
        raise _Refused(f"cannot read {named} ({exc.strerror or exc})") from None
    except plists.UnreadablePlist as exc:
        raise _Refused(f"{named}: unreadable plist: {exc.reason}") from None
    return None if found is None else found[0]


def _no_slices_reason(slices: list[macho.Slice], *, hint: bool) -> str:
    kinds = ", ".join(sorted({s.filetype_name for s in slices}))
    binary = hint and any(s.uuid is not None for s in slices)
    tail = "; --executables publishes binaries" if binary else ""
    return f"no dSYM slice with a UUID ({kinds}){tail}"


def _reason(exc: Exception, path: str) -> str:
    """The readers name the file first; the refusal names it already."""
    return str(exc).removeprefix(f"{path}: ")
