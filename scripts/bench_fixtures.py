"""Benchmark fixtures, generated in a temporary folder by scripts/bench.

- a large dSYM: generated C (many structs with long member names, in several units
  compiled in parallel) through the real toolchain recipe of the test fixtures;
- a universal dSYM twice its size: the large one and a copy of it as another slice;
- a tree of many dSYM bundles: copies of the small committed hello.dSYM, each with its
  own UUID (the LC_UUID bytes rewritten), grouped 100 to a folder like DerivedData;
- images to symbolicate: generated C (chains of calls, an always-inlined helper in
  each), one program per image, each with its own code and so its own UUID, and a
  `.ips` report over them whose frames are their real instructions and return addresses;
- objects in the S3 engine's bucket, emptied by prefix between rounds.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import random
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dsymfind.apple import macho
from dsymfind.uuids import dashed, tree_entry

ROOT = Path(__file__).resolve().parent.parent
SMALL_BUNDLE = ROOT / "tests" / "fixtures" / "macho" / "hello.dSYM"
LLVM_BIN = Path("/usr/lib/llvm-14/bin")
CLANG = "clang-14"
LD64 = "ld64.lld-14"
# One generated unit holds this many structs of MEMBERS members: about 14 MB of DWARF.
STRUCTS_PER_UNIT = 2500
MEMBERS = 60
UNIT_BYTES = 14_000_000
# Long member names make the DWARF string table, not the C source, carry the size.
NAME_PAD = "x" * 60
BUNDLES_PER_FOLDER = 100
# A 64-bit Mach-O header (little-endian): its magic, and where its cpusubtype is.
MH_MAGIC_64 = b"\xcf\xfa\xed\xfe"
CPUSUBTYPE_OFFSET = 8
CPU_SUBTYPE_ARM64E = 2


def toolchain_missing() -> list[str]:
    """The fixture recipe's tools that are not installed."""
    tools = [CLANG, LD64, str(LLVM_BIN / "dsymutil")]
    return [t for t in tools if shutil.which(t) is None]


def large_dsym(folder: Path, megabytes: int) -> Path:
    """A single-arch arm64 dSYM bundle of about `megabytes` MB; returns its DWARF file."""
    folder.mkdir(parents=True)
    units = max(1, round(megabytes * 1_000_000 / UNIT_BYTES))
    structs = min(STRUCTS_PER_UNIT, max(1, megabytes * 1_000_000 * STRUCTS_PER_UNIT // UNIT_BYTES))
    sources = [_write_unit(folder, unit, structs) for unit in range(units)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objects = list(pool.map(_compile, sources))
    _link_with_dsym(folder, "big", objects)
    for leftover in [*sources, *objects]:
        leftover.unlink()
    return folder / "big.dSYM" / "Contents" / "Resources" / "DWARF" / "big"


def _link_with_dsym(folder: Path, name: str, objects: list[Path]) -> None:
    """Link `objects` (in `folder`) into the arm64 executable `name` and make `name.dSYM`."""
    _run(
        [
            LD64,
            "-arch",
            "arm64",
            "--threads=1",
            "-platform_version",
            "macos",
            "11.0",
            "11.0",
            "-oso_prefix",
            ".",
            "-o",
            name,
            *[o.name for o in objects],
        ],
        cwd=folder,
    )
    _run([str(LLVM_BIN / "dsymutil"), name, "-o", f"{name}.dSYM"], cwd=folder)


def universal_dsym(dwarf: Path, folder: Path, uuid: str) -> Path:
    """A universal DWARF file in `folder`: `dwarf` (a single arm64 slice) and a copy of it
    made arm64e and carrying `uuid`, joined by llvm-lipo; returns its path. Twice the size
    of `dwarf` without compiling anything again."""
    (original,) = macho.read_slices(dwarf)
    assert original.uuid is not None and original.arch == "arm64", original
    folder.mkdir(parents=True, exist_ok=True)
    second = folder / "arm64e"
    shutil.copyfile(dwarf, second)
    raw = bytes.fromhex(original.uuid.replace("-", ""))
    try:
        with open(second, "r+b") as f, mmap.mmap(f.fileno(), 0) as data:
            assert data[:4] == MH_MAGIC_64, "not a little-endian 64-bit Mach-O file"
            where = data.find(raw)
            assert where > 0 and data.find(raw, where + 1) == -1, "LC_UUID bytes not unique"
            data[where : where + len(raw)] = bytes.fromhex(uuid.replace("-", ""))
            # lipo takes one slice per architecture: this one becomes arm64e.
            struct.pack_into("<I", data, CPUSUBTYPE_OFFSET, CPU_SUBTYPE_ARM64E)
        fat = folder / "universal"
        _run(
            [str(LLVM_BIN / "llvm-lipo"), "-create", str(dwarf), second.name, "-output", fat.name],
            cwd=folder,
        )
    finally:
        second.unlink()
    slices = {s.uuid: s.arch for s in macho.read_slices(fat)}
    assert slices == {original.uuid: "arm64", uuid: "arm64e"}, slices
    return fat


class Image:
    """One generated program to symbolicate: where its dSYM is and what a backtrace of it
    can hold (image offsets)."""

    def __init__(self, folder: Path, number: int) -> None:
        self.name = f"image{number:02d}"
        self.executable = folder / self.name
        self.dwarf = folder / f"{self.name}.dSYM" / "Contents" / "Resources" / "DWARF" / self.name
        self.uuid = ""
        self.pcs: list[int] = []  # every instruction: what frame 0 can be
        self.returns: list[int] = []  # the address after every call: the other frames

    def read_addresses(self) -> None:
        from support.symbolication import TEXT_VMADDR, instructions, return_addresses

        (self.uuid,) = [s.uuid for s in macho.read_slices(self.dwarf) if s.uuid]
        self.pcs = [a - TEXT_VMADDR for a, _, _ in instructions(self.executable, "arm64")]
        self.returns = [a - TEXT_VMADDR for a in return_addresses(self.executable, "arm64")]


def symbolication_images(folder: Path, count: int, functions: int) -> list[Image]:
    """`count` programs of `functions` functions each, with dSYMs, built in parallel."""
    folder.mkdir(parents=True)
    images = [Image(folder / f"image{n:02d}", n) for n in range(count)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda image: _build_image(image, functions), images))
    for image in images:
        image.read_addresses()
    return images


def _build_image(image: Image, functions: int) -> None:
    image.executable.parent.mkdir()
    source = image.executable.parent / f"{image.name}.c"
    source.write_text(_image_source(image.name, functions))
    _link_with_dsym(source.parent, image.name, [_compile(source)])


def _image_source(name: str, functions: int) -> str:
    """C whose every function calls the next (a call whose return address a backtrace
    holds) through an always-inlined helper (a two-frame inline chain)."""
    lines = [f"int {name}_step{k}(int x);" for k in range(functions + 1)]
    for k in range(functions):
        lines += [
            f"static inline __attribute__((always_inline)) int {name}_mix{k}(int x) "
            f"{{ return (x * {k + 3}) ^ (x >> {k % 7 + 1}); }}",
            f"__attribute__((noinline)) int {name}_step{k}(int x) "
            f"{{ return {name}_mix{k}(x) + {name}_step{k + 1}(x + 1) * 3 + {k}; }}",
        ]
    lines.append(f"__attribute__((noinline)) int {name}_step{functions}(int x) {{ return x; }}")
    lines.append(f"int main(void) {{ return {name}_step0(1); }}")
    return "\n".join(lines) + "\n"


def symbolication_report(images: list[Image], frames: int, per_thread: int, seed: int) -> str:
    """A bug type 309 `.ips` of `frames` frames, `per_thread` to a thread, each frame in an
    image chosen at random: frame 0 of a thread any instruction, the others return
    addresses. The first thread is the crashed one."""
    from support.symbolication import TEXT_VMADDR

    chosen = random.Random(seed)
    threads = []
    for first in range(0, frames, per_thread):
        stack = []
        for position in range(min(per_thread, frames - first)):
            index = chosen.randrange(len(images))
            offsets = images[index].returns if position else images[index].pcs
            stack.append({"imageOffset": chosen.choice(offsets), "imageIndex": index})
        threads.append({"frames": stack})
    threads[0]["triggered"] = True
    used = [
        {"arch": "arm64", "base": TEXT_VMADDR, "uuid": i.uuid.lower(), "name": i.name}
        for i in images
    ]
    body = {"cpuType": "ARM-64", "faultingThread": 0, "threads": threads, "usedImages": used}
    header = {"app_name": "image00", "bug_type": "309", "name": "image00"}
    return json.dumps(header) + "\n" + json.dumps(body) + "\n"


def _write_unit(folder: Path, unit: int, structs: int) -> Path:
    lines = []
    for s in range(structs):
        lines.append(f"struct generated_{unit}_{s} {{")
        lines += [f"  long member_{NAME_PAD}_{unit}_{s}_{m};" for m in range(MEMBERS)]
        lines.append(f"}} instance_{unit}_{s};")
    if unit == 0:
        lines.append("int main(void) { return 0; }")
    path = folder / f"unit{unit}.c"
    path.write_text("\n".join(lines) + "\n")
    return path


def _compile(source: Path) -> Path:
    target = source.with_suffix(".o")
    _run(
        [
            CLANG,
            "-target",
            "arm64-apple-macos11",
            "-nostdinc",
            "-g",
            "-O1",
            "-ffile-compilation-dir=.",
            "-c",
            source.name,
            "-o",
            target.name,
        ],
        cwd=source.parent,
    )
    return target


def _run(argv: list[str], *, cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=_reproducible_env())


def _reproducible_env() -> dict[str, str]:
    return {**os.environ, "ZERO_AR_DATE": "1"}


def bench_uuid(number: int) -> str:
    """A stable, random-looking UUID for the `number`th generated bundle."""
    return fixture_uuid(str(number))


def fixture_uuid(name: str) -> str:
    """A stable, random-looking UUID for the fixture called `name`."""
    return dashed(hashlib.md5(f"dsymfind-bench-{name}".encode()).hexdigest().upper())


class BundleTree:
    """`count` bundles below `root`, bundle i carrying bench_uuid(i)."""

    def __init__(self, root: Path, count: int) -> None:
        self.root, self.count = root, count

    def bundle(self, number: int) -> Path:
        folder = self.root / f"group{number // BUNDLES_PER_FOLDER:03d}"
        return folder / f"bundle{number:05d}.dSYM"

    def dwarf(self, number: int) -> Path:
        return self.bundle(number) / "Contents" / "Resources" / "DWARF" / "hello"

    def dwarf_files(self) -> list[Path]:
        return [self.dwarf(n) for n in range(self.count)]

    def build(self) -> None:
        template = (SMALL_BUNDLE / "Contents" / "Resources" / "DWARF" / "hello").read_bytes()
        (original,) = macho.read_slices_from_bytes(template)
        assert original.uuid is not None
        raw = bytes.fromhex(original.uuid.replace("-", ""))
        where = template.find(raw)
        assert where > 0 and template.find(raw, where + 1) == -1, "LC_UUID bytes not unique"
        info_plist = SMALL_BUNDLE / "Contents" / "Info.plist"
        shared_plist = self.root / "Info.plist"
        self.root.mkdir(parents=True)
        shutil.copyfile(info_plist, shared_plist)
        for number in range(self.count):
            self._write_bundle(number, template, where, shared_plist)
        self._check(0)

    def _write_bundle(self, number: int, template: bytes, where: int, plist: Path) -> None:
        dwarf = self.dwarf(number)
        dwarf.parent.mkdir(parents=True)
        new = bytes.fromhex(bench_uuid(number).replace("-", ""))
        dwarf.write_bytes(template[:where] + new + template[where + len(new) :])
        os.link(plist, self.bundle(number) / "Contents" / "Info.plist")  # needs no own UUID

    def _check(self, number: int) -> None:
        (found,) = macho.read_slices(self.dwarf(number))
        assert found.uuid == bench_uuid(number), (found.uuid, bench_uuid(number))

    def link_into_cache_tree(self, uuids_root: Path, count: int) -> None:
        """Publish the first `count` bundles in a cache's UUID tree, as `dsymfind index` does."""
        for number in range(count):
            entry = Path(tree_entry(str(uuids_root), bench_uuid(number)))
            entry.parent.mkdir(parents=True, exist_ok=True)
            entry.symlink_to(self.dwarf(number))


def serve_native(server_root: Path, uuid: str, dwarf: Path) -> str:
    """Put `dwarf` where a `native` layout server has `uuid`; returns its URL path."""
    entry = Path(tree_entry(str(server_root), uuid))
    entry.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(dwarf, entry)
    except OSError:
        shutil.copyfile(dwarf, entry)
    return "/" + entry.relative_to(server_root).as_posix()


def clear_prefix(client: Any, bucket: str, prefix: str) -> int:
    """Delete every object below `prefix` (a boto3 client allowed to); how many there were."""
    removed = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=bucket, Key=item["Key"])
            removed += 1
    return removed
