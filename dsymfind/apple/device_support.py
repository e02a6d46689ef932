"""Apple's own libraries as Xcode keeps them on a Mac: DeviceSupport folders and
simulator runtimes, read as OS builds and the Mach-O files of each.

Xcode copies a device's system libraries the first time it debugs on that device, into
`~/Library/Developer/Xcode/<OS> DeviceSupport/<version> (<build>)/Symbols/`, a tree that
mirrors the device's file system (`Symbols/System/Library/Frameworks/…`). Newer Xcodes
put the device's model first (`iPhone15,2 17.5.1 (21F90)`) and sometimes an architecture
last (`16.0 (20A362) arm64e`). A simulator runtime's `RuntimeRoot` is the same kind of
tree; its `System/Library/CoreServices/SystemVersion.plist` names the OS build.

Those libraries carry symbol tables, not DWARF: what names a system frame. This module
only finds and reads them; the cache (`dsymfind index`), publish (`--system`) and
symbolicate decide what to do with them.

The walk never follows a symbolic link (a framework's `Versions/Current` and top-level
links name files the walk reaches by their real path anyway, and a link loop cannot
trap it), opens regular files only, and reads each file's header alone.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import NamedTuple, NoReturn

from dsymfind.apple import macho, plists
from dsymfind.errors import DsymfindError

# The folder Xcode keeps per platform -> the OS name a build record and a frame carry.
DEVICE_SUPPORT_FOLDERS = {
    "iOS DeviceSupport": "iOS",
    "iPadOS DeviceSupport": "iPadOS",
    "watchOS DeviceSupport": "watchOS",
    "tvOS DeviceSupport": "tvOS",
    "visionOS DeviceSupport": "visionOS",
    "xrOS DeviceSupport": "visionOS",  # visionOS's name in Xcode 15's betas
    "macOS DeviceSupport": "macOS",
}
SYMBOLS = "Symbols"
RUNTIME_ROOT = "RuntimeRoot"
SIMRUNTIME_SUFFIX = ".simruntime"
SYSTEM_VERSION_PLIST = ("System", "Library", "CoreServices", "SystemVersion.plist")
# ProductName in a simulator runtime's SystemVersion.plist -> the OS it simulates.
_PRODUCT_NAMES = {
    "iPhone OS": "iOS",
    "Apple TVOS": "tvOS",
    "Apple Watch OS": "watchOS",
    "xrOS": "visionOS",
}
SIMULATOR_SUFFIX = " Simulator"
# `[model ]version (build)[ arch]`, as Xcode names an OS build's folder.
_BUILD_FOLDER = re.compile(
    r"^(?:(?P<model>\S+) )?(?P<version>\d+(?:\.\d+){0,3})"
    r" \((?P<build>[0-9A-Za-z]+)\)(?: (?P<arch>\S+))?$"
)
_MAX_VERSION_PLIST_BYTES = 64 * 1024
# Slices that are an image a process maps, not debug information or an object file.
_NOT_IMAGES = frozenset({"MH_DSYM", "MH_OBJECT"})


class DeviceSupportError(DsymfindError):
    """A path given as a DeviceSupport folder or runtime that is none."""


class OSBuild(NamedTuple):
    os: str  # "iOS", "watchOS", …, "iOS Simulator"
    version: str  # "17.5.1"
    build: str  # "21F90"
    symbols: str  # the folder that mirrors the device's file system
    model: str | None = None  # "iPhone15,2" when Xcode named the folder after a device

    @property
    def label(self) -> str:
        return f"{self.os} {self.version} ({self.build})"


class SystemFile(NamedTuple):
    os_build: OSBuild
    path: str  # the file on this machine
    install_path: str  # where it lies on the device: "/" + its path under `symbols`
    slices: list[macho.Slice]  # each with a UUID, none of them a dSYM


Invalid = Callable[[str, str], None]  # (path, reason)


def default_roots(home: str) -> list[str]:
    """Xcode's DeviceSupport folders and the simulator runtimes on this Mac (those that
    exist)."""
    xcode = os.path.join(home, "Library", "Developer", "Xcode")
    found = [os.path.join(xcode, name) for name in sorted(DEVICE_SUPPORT_FOLDERS)]
    runtimes = [
        "/Library/Developer/CoreSimulator/Profiles/Runtimes",
        os.path.join(home, "Library", "Developer", "CoreSimulator", "Profiles", "Runtimes"),
    ]
    volumes = "/Library/Developer/CoreSimulator/Volumes"
    for volume in _listed(volumes):
        runtimes.append(
            os.path.join(
                volumes, volume, "Library", "Developer", "CoreSimulator", "Profiles", "Runtimes"
            )
        )
    found += runtimes
    return [path for path in found if os.path.isdir(path)]


def os_builds(path: str) -> list[OSBuild]:
    """The OS builds under `path`: a `<OS> DeviceSupport` folder, one build's folder (or
    its `Symbols`), a folder of simulator runtimes, a `.simruntime` or its `RuntimeRoot`.
    Raises DeviceSupportError when `path` is none of these."""
    path = os.path.normpath(os.path.abspath(path))
    if not os.path.isdir(path):
        raise DeviceSupportError(f"{path}: not a folder")
    name = os.path.basename(path)
    if name == SYMBOLS:
        found = _device_build(os.path.dirname(path))
        return [found] if found else _none(path)
    if name == RUNTIME_ROOT:
        found = _runtime_build(path)
        return [found] if found else _none(path)
    if name.endswith(SIMRUNTIME_SUFFIX):
        found = _runtime_build(_runtime_root(path))
        return [found] if found else _none(path)
    single = _device_build(path)
    if single is not None:
        return [single]
    builds: list[OSBuild] = []
    for child in _listed(path):
        child_path = os.path.join(path, child)
        if child.endswith(SIMRUNTIME_SUFFIX):
            runtime = _runtime_build(_runtime_root(child_path))
            if runtime is not None:
                builds.append(runtime)
            continue
        device = _device_build(child_path)
        if device is not None:
            builds.append(device)
    return builds or _none(path)


def system_files(os_build: OSBuild, on_invalid: Invalid) -> Iterator[SystemFile]:
    """Every Mach-O image under the build's tree, in a stable order. Files that are not
    Mach-O are passed over in silence (a DeviceSupport folder holds plists, caches and
    more); a Mach-O that cannot be read, or whose slices carry no UUID, goes to
    `on_invalid` and the walk goes on."""
    for path in regular_files(os_build.symbols, on_invalid):
        try:
            image = read_system_file(os_build, path).image
        except UnreadableImage as exc:
            on_invalid(path, str(exc))
            continue
        if image is not None:
            yield image


class UnreadableImage(DsymfindError):
    """A file that starts as a Mach-O but cannot be read as an image (the reason alone)."""


class ReadFile(NamedTuple):
    image: SystemFile | None  # None: no Mach-O, or only dSYM and object slices
    info: os.stat_result  # of the descriptor the file was read through


def read_system_file(os_build: OSBuild, path: str) -> ReadFile:
    """One file of the build's tree, read through one descriptor (never through a link):
    its image, if it is one, with the stat of the bytes read. Raises UnreadableImage."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        raise UnreadableImage(f"cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or os.pread(fd, 4, 0) not in macho.MAGIC_BYTES:
            return ReadFile(None, info)
        slices = macho.read_slices_of_open(fd, path)
    except macho.MachOError as exc:
        raise UnreadableImage(str(exc).removeprefix(path + ": ")) from None
    except OSError as exc:
        raise UnreadableImage(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    images = [s for s in slices if is_image(s)]
    if not images:
        if not any(s.filetype_name in _NOT_IMAGES for s in slices):
            raise UnreadableImage("no slice carries a UUID")
        return ReadFile(None, info)
    # `path` lies below `symbols` (regular_files walked it): its tail is the device's path.
    install_path = path[len(os_build.symbols.rstrip(os.sep)) :].replace(os.sep, "/")
    return ReadFile(SystemFile(os_build, path, install_path, images), info)


def is_image(piece: macho.Slice) -> bool:
    """A slice with a UUID that a process maps (not a dSYM's or an object file's)."""
    return piece.uuid is not None and piece.filetype_name not in _NOT_IMAGES


def parse_build_folder(name: str) -> tuple[str, str, str | None] | None:
    """(version, build, model) from an OS build folder's name, or None."""
    match = _BUILD_FOLDER.match(name)
    if match is None:
        return None
    return match["version"], match["build"], match["model"]


def _device_build(folder: str) -> OSBuild | None:
    parsed = parse_build_folder(os.path.basename(folder))
    symbols = os.path.join(folder, SYMBOLS)
    if parsed is None or not os.path.isdir(symbols):
        return None
    os_name = DEVICE_SUPPORT_FOLDERS.get(os.path.basename(os.path.dirname(folder)))
    if os_name is None:
        # A build folder copied out of Xcode's: its parent no longer says which OS.
        os_name = _product_name(symbols) or "unknown OS"
    version, build, model = parsed
    return OSBuild(os_name, version, build, symbols, model)


def _runtime_root(simruntime: str) -> str:
    return os.path.join(simruntime, "Contents", "Resources", RUNTIME_ROOT)


def _runtime_build(root: str) -> OSBuild | None:
    values = _system_version(root)
    if values is None:
        return None
    product, version, build = (
        values.get(key) for key in ("ProductName", "ProductVersion", "ProductBuildVersion")
    )
    if not (isinstance(product, str) and isinstance(version, str) and isinstance(build, str)):
        return None
    return OSBuild(_PRODUCT_NAMES.get(product, product) + SIMULATOR_SUFFIX, version, build, root)


def _product_name(root: str) -> str | None:
    values = _system_version(root)
    product = values.get("ProductName") if values else None
    return _PRODUCT_NAMES.get(product, product) if isinstance(product, str) else None


def _system_version(root: str) -> dict[str, object] | None:
    path = os.path.join(root, *SYSTEM_VERSION_PLIST)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _MAX_VERSION_PLIST_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MAX_VERSION_PLIST_BYTES:
        return None
    try:
        return plists.loads_dict(data)
    except plists.UnreadablePlist:
        return None


def regular_files(root: str, on_invalid: Invalid) -> Iterator[str]:
    """Regular files under `root`, depth first, names sorted; links are not followed (a
    link loop cannot trap the walk). A folder that cannot be listed goes to `on_invalid`."""
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            on_invalid(folder, f"cannot list: {exc.strerror or exc}")
            continue
        folders = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield entry.path
            except OSError:
                continue
        pending.extend(reversed(folders))


def _listed(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _none(path: str) -> NoReturn:
    raise DeviceSupportError(
        f"{path}: no OS build here (expected an '<OS> DeviceSupport' folder, a "
        "'<version> (<build>)' folder with Symbols/, or a simulator runtime)"
    )
