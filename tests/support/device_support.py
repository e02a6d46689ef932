"""DeviceSupport trees made by clang and lld here, as Xcode leaves them on a Mac.

Each system library is a dylib with a symbol table and no DWARF (what Xcode copies off a
device), linked with its install name, thin or universal (arm64 + arm64e, each slice its
own code and so its own UUID), under
`<OS> DeviceSupport/<version> (<build>)/Symbols/<install path>`. The OS build goes into
the code, so two builds of one library never share a UUID. llvm-nm gives each slice's
functions and their addresses; llvm-symbolizer names addresses from the same symbol
table, as the oracle.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import uuid as uuid_module
from dataclasses import dataclass
from pathlib import Path

from support.fixtures import load_generator

LIBRARIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/System/Library/PrivateFrameworks/UIKitCore.framework/UIKitCore", ("arm64", "arm64e")),
    ("/System/Library/Frameworks/Foundation.framework/Foundation", ("arm64",)),
    ("/usr/lib/system/libsystem_kernel.dylib", ("arm64e",)),
)
NM = "llvm-nm-14"
LC_UUID = 0x1B


@dataclass(frozen=True)
class SystemLibrary:
    install_path: str  # "/System/Library/Frameworks/Foundation.framework/Foundation"
    path: Path  # the file in the DeviceSupport tree
    uuids: dict[str, str]  # arch -> UUID (uppercase, dashed)
    # arch -> [(symbol without the leading underscore, file address)], sorted by address
    functions: dict[str, list[tuple[str, int]]]

    @property
    def name(self) -> str:
        return self.install_path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DeviceSupportTree:
    root: Path  # "<parent>/iOS DeviceSupport"
    build_dir: Path  # root / "17.5.1 (21F90)"
    os: str
    version: str
    build: str
    libraries: list[SystemLibrary]

    @property
    def symbols(self) -> Path:
        return self.build_dir / "Symbols"


def build_device_support(
    parent: Path,
    *,
    os_name: str = "iOS",
    version: str = "17.5.1",
    build: str = "21F90",
    libraries: tuple[tuple[str, tuple[str, ...]], ...] = LIBRARIES,
    functions: int = 8,
    model: str | None = None,
) -> DeviceSupportTree:
    """A DeviceSupport folder under `parent` holding one OS build with `libraries`
    (install path, arches), each exporting `functions` functions that call each other
    (plus one local, non-exported function).

    The same tree asked for again in this process is a copy of the first one built:
    clang and lld take most of a second a tree on a loaded machine, and the same few
    trees are asked for by many test modules."""
    key = (os_name, version, build, libraries, functions, model)
    built = _BUILT.get(key)
    if built is None:
        store = Path(tempfile.mkdtemp(prefix="devicesupport-built-"))
        atexit.register(shutil.rmtree, store, ignore_errors=True)
        built = _BUILT[key] = _build(store, os_name, version, build, libraries, functions, model)
    return copied(built, parent)


# Trees built in this process, by build_device_support's arguments (see there).
_BUILT: dict[tuple[object, ...], DeviceSupportTree] = {}


def _build(
    parent: Path,
    os_name: str,
    version: str,
    build: str,
    libraries: tuple[tuple[str, tuple[str, ...]], ...],
    functions: int,
    model: str | None,
) -> DeviceSupportTree:
    folder_name = f"{model} {version} ({build})" if model else f"{version} ({build})"
    root = parent / f"{os_name} DeviceSupport"
    build_dir = root / folder_name
    made = []
    with tempfile.TemporaryDirectory(prefix="devicesupport-") as work:
        for install_path, arches in libraries:
            target = build_dir / "Symbols" / install_path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            made.append(
                _library(Path(work), target, install_path, arches, functions, f"{os_name}{build}")
            )
    return DeviceSupportTree(root, build_dir, os_name, version, build, made)


def copied(built: DeviceSupportTree, parent: Path) -> DeviceSupportTree:
    """The tree copied under `parent` (links kept as links, files with fresh times and
    inodes, as a build leaves them), its libraries' paths moved. Another OS build already
    under `parent`'s DeviceSupport folder stays."""
    root = parent / built.root.name
    shutil.copytree(built.root, root, symlinks=True, copy_function=shutil.copy, dirs_exist_ok=True)
    libraries = [
        dataclasses.replace(lib, path=root / lib.path.relative_to(built.root))
        for lib in built.libraries
    ]
    return dataclasses.replace(
        built, root=root, build_dir=root / built.build_dir.name, libraries=libraries
    )


def clone_with_uuid(source: Path, target: Path, seed: str) -> dict[str, str]:
    """Copy a (thin or universal) dylib with every slice's LC_UUID replaced by one made from
    `seed`: a cheap stand-in for building thousands of distinct libraries. Returns the
    new UUID of each old one."""
    data = bytearray(source.read_bytes())
    renamed: dict[str, str] = {}
    for offset in _uuid_offsets(bytes(data)):
        old = str(uuid_module.UUID(bytes=bytes(data[offset : offset + 16]))).upper()
        digest = hashlib.sha256(f"{seed}:{offset}".encode()).digest()[:16]
        data[offset : offset + 16] = digest
        renamed[old] = str(uuid_module.UUID(bytes=digest)).upper()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(bytes(data))
    return renamed


def _library(
    work: Path, target: Path, install_path: str, arches: tuple[str, ...], count: int, tag: str
) -> SystemLibrary:
    generator = load_generator()
    tools = generator.locate_tools(use_fat64_tools=False)
    stem = _identifier(target.name)
    slices: list[Path] = []
    for arch in arches:
        source = work / f"{stem}_{arch}.c"
        source.write_text(_source(stem, count, f"{tag}_{arch}"))
        obj = work / f"{stem}_{arch}.o"
        subprocess.run(
            [
                tools.clang,
                "-target",
                "arm64-apple-ios17",
                "-nostdinc",
                "-O1",
                "-c",
                str(source),
                "-o",
                str(obj),
            ],
            check=True,
            capture_output=True,
        )
        out = work / arch / target.name
        out.parent.mkdir(exist_ok=True)
        subprocess.run(
            [
                *(
                    tools.ld,
                    "-arch",
                    "arm64",
                    "--threads=1",
                    "-platform_version",
                    "ios",
                    "17.0",
                    "17.0",
                ),
                *("-dylib", "-install_name", install_path, "-o", str(out), str(obj)),
            ],
            check=True,
            capture_output=True,
        )
        if arch == "arm64e":
            generator.patch_arm64e(out)
        slices.append(out)
    if len(slices) == 1:
        target.write_bytes(slices[0].read_bytes())
    else:
        subprocess.run(
            [tools.lipo, "-create", *map(str, slices), "-output", str(target)],
            check=True,
            capture_output=True,
        )
    uuids = {arch: _uuid_of(path) for arch, path in zip(arches, slices, strict=True)}
    functions = {arch: _functions(path) for arch, path in zip(arches, slices, strict=True)}
    return SystemLibrary(install_path, target, uuids, functions)


def _source(stem: str, count: int, tag: str) -> str:
    # Each function calls the one before it, so return addresses lie inside functions;
    # the tag makes each OS build's and slice's code (and so its UUID) its own.
    lines = [
        f"static __attribute__((noinline)) int {stem}_local_{tag}(int x) {{ return x ^ 0x5a; }}"
    ]
    lines.append(f"int {stem}_f0(int x) {{ return {stem}_local_{tag}(x) + 1; }}")
    for i in range(1, count):
        lines.append(
            f"__attribute__((noinline)) int {stem}_f{i}(int x) "
            f"{{ return {stem}_f{i - 1}(x * {i + 2}) + {i}; }}"
        )
    return "\n".join(lines) + "\n"


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.removesuffix(".dylib"))


def _uuid_of(path: Path) -> str:
    offsets = _uuid_offsets(path.read_bytes())
    data = path.read_bytes()
    return str(uuid_module.UUID(bytes=data[offsets[0] : offsets[0] + 16])).upper()


def _functions(path: Path) -> list[tuple[str, int]]:
    out = subprocess.run(
        [NM, "--defined-only", str(path)], check=True, capture_output=True, text=True
    ).stdout
    found = []
    for line in out.splitlines():
        address, kind, name = line.split(maxsplit=2)
        if kind in "Tt":
            found.append((name.removeprefix("_"), int(address, 16)))
    return sorted(found, key=lambda item: item[1])


def _uuid_offsets(data: bytes) -> list[int]:
    """The file offsets of the 16 UUID bytes of each slice (thin or fat32)."""
    (magic,) = struct.unpack_from(">I", data, 0)
    if magic == 0xCAFEBABE:
        (count,) = struct.unpack_from(">I", data, 4)
        bases = [struct.unpack_from(">iiIII", data, 8 + 20 * i)[2] for i in range(count)]
    else:
        bases = [0]
    offsets = []
    for base in bases:
        ncmds = struct.unpack_from("<I", data, base + 16)[0]
        position = base + 32  # mach_header_64
        for _ in range(ncmds):
            cmd, size = struct.unpack_from("<II", data, position)
            if cmd == LC_UUID:
                offsets.append(position + 8)
                break
            position += size
    return offsets


def symbolized(path: Path, arch: str, addresses: list[int]) -> list[str]:
    """llvm-symbolizer's function name for each address of the slice (the oracle)."""
    lines = "\n".join(hex(a) for a in addresses) + "\n"
    out = subprocess.run(
        ["llvm-symbolizer-14", f"--obj={path}", "--default-arch", arch, "--functions=linkage"],
        input=lines,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
    ).stdout
    blocks = [block.splitlines() for block in out.strip("\n").split("\n\n")]
    return [block[0] for block in blocks]
