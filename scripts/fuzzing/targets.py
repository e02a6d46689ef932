"""One check per reader: feed it bytes, fail loudly when an invariant breaks.

Shared by the hypothesis suites (tests/**/test_*_properties.py) and the coverage-guided
campaign (scripts/fuzz), so both hold every reader to the same rules:

- only the reader's own error type escapes;
- a call on an input under 1 MB takes at most MAX_SECONDS and allocates at most
  MAX_PEAK_BYTES (tracemalloc peak) - correctness bounds on pathological input, far
  above what a sound reader needs, not speed benchmarks;
- what a reader returns is well-formed, and the plist writer's output parses back.

A violation raises Violation (an AssertionError); an escaped foreign exception
propagates unchanged, so its traceback points at the bug.
"""

from __future__ import annotations

import datetime
import gzip
import io
import os
import plistlib
import re
import shutil
import stat
import tempfile
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from dsymfind import _plist
from dsymfind.apple import macho, plists, unpack
from dsymfind.apple.crashreport import CrashReportError
from dsymfind.symbolicate import formats, hangtext, sample, spindump
from dsymfind.windows import pdb, pe

ROOT = Path(__file__).resolve().parents[2]
MACHO_FIXTURES = ROOT / "tests" / "fixtures" / "macho"
PE_FIXTURES = ROOT / "tests" / "fixtures" / "pe"

# The time a reader may take per call, for inputs under MAX_INPUT_BYTES.
MAX_SECONDS = 0.100
MAX_INPUT_BYTES = 1 << 20
# "A few MB": the header readers need a few KiB; trusting one crafted size would cost far more.
MAX_PEAK_BYTES = 4 << 20
# Unpacking moves CHUNK_BYTES (1 MiB) at a time, and gzip's layered readers (decompressor,
# BufferedReader, CRC) hold up to about four copies of a chunk at once.
ARCHIVE_PEAK_BYTES = 8 << 20
# Unpacking work grows with what it may write, so the bounds hold for this budget;
# production's (max_download_bytes) is checked by tests/apple/test_unpack.py, not timed here.
ARCHIVE_BUDGET_BYTES = 2 << 20
# A time overrun is measured again once before it counts: the input is deterministic,
# a descheduled process on a loaded 2-core CI machine is not.
TIME_ATTEMPTS = 2

UPPER_DASHED_UUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")
STORE_KEY = re.compile(r"^[0-9A-F]{32}[0-9A-F]+$")

T = TypeVar("T")


class Violation(AssertionError):
    """An invariant broke: a slow or huge call, or a malformed result."""


def bounded(call: Callable[[], T], max_peak: int = MAX_PEAK_BYTES) -> T:
    """call()'s result (or its exception), after checking its time and memory bounds."""
    for attempt in range(1, TIME_ATTEMPTS + 1):
        started_tracing = not tracemalloc.is_tracing()
        if started_tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        baseline = tracemalloc.get_traced_memory()[0]
        started = time.perf_counter()
        try:
            return_value: T = call()
            failure: BaseException | None = None
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the bounds
            failure = exc
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] - baseline
        if started_tracing:
            tracemalloc.stop()
        if peak > max_peak:
            raise Violation(f"allocated {peak} bytes, more than {max_peak}")
        if elapsed <= MAX_SECONDS:
            break
        if attempt == TIME_ATTEMPTS:
            raise Violation(f"took {elapsed * 1000:.0f} ms, more than {MAX_SECONDS * 1000:.0f}")
    if failure is not None:
        raise failure
    return return_value


def expect_only(
    error: type[BaseException], call: Callable[[], T], max_peak: int = MAX_PEAK_BYTES
) -> T | None:
    """call()'s result within bounds, None when it raised `error` (the reader's own type)."""
    try:
        return bounded(call, max_peak)
    except error as exc:
        if not str(exc).strip() or "\n" in str(exc):
            raise Violation(f"{error.__name__} without a one-line message: {exc!r}") from exc
        return None


# --- Mach-O ----------------------------------------------------------------------------


def check_macho(data: bytes) -> list[macho.Slice] | None:
    """read_slices_from_bytes: slices inside the file with well-formed values, or MachOError."""
    slices = expect_only(macho.MachOError, lambda: macho.read_slices_from_bytes(data))
    if slices is None:
        return None
    if not slices:
        raise Violation("no slices and no MachOError")
    for found in slices:
        if not 0 <= found.offset <= found.offset + found.size <= len(data):
            raise Violation(f"slice outside the file: {found!r}")
        if found.uuid is not None and not UPPER_DASHED_UUID.match(found.uuid):
            raise Violation(f"malformed UUID: {found!r}")
        if found.arch != macho.arch_name(found.cputype, found.cpusubtype):
            raise Violation(f"arch name disagrees with cputype: {found!r}")
    return slices


def check_macho_file(data: bytes, path: Path) -> None:
    """read_slices on a file holding `data` agrees with read_slices_from_bytes."""
    path.write_bytes(data)
    from_bytes = _outcome(lambda: macho.read_slices_from_bytes(data), macho.MachOError)
    from_file = _outcome(lambda: bounded(lambda: macho.read_slices(path)), macho.MachOError)
    if isinstance(from_bytes, str) and isinstance(from_file, str):
        if from_file.split(": ", 1)[1] != from_bytes.split(": ", 1)[1]:
            raise Violation(f"file and memory readers disagree: {from_file!r} / {from_bytes!r}")
    elif from_bytes != from_file:
        raise Violation(f"file and memory readers disagree: {from_file!r} / {from_bytes!r}")


def _outcome(call: Callable[[], T], error: type[Exception]) -> T | str:
    try:
        return call()
    except error as exc:
        return str(exc)


# --- archives --------------------------------------------------------------------------


def check_archive(data: bytes, workdir: Path, name: str = "answer.gz") -> unpack.Unpacked | None:
    """sniff and unpack: ArchiveError or files strictly inside dest, nothing else touched."""
    for leftover in workdir.iterdir():
        _remove(leftover)
    source = workdir / name
    source.write_bytes(data)
    dest = workdir / "dest"
    kind = bounded(lambda: unpack.sniff(str(source)))
    if kind not in ("macho", "fat", "gzip", "zip", "zstd", "zlib", "unknown"):
        raise Violation(f"sniff answered {kind!r}")

    def unpacked() -> unpack.Unpacked:
        # Into an empty dest every time: `bounded` calls again when a slow machine made the
        # first call too slow, and the first call's files must not meet the second's.
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir()
        return unpack.unpack(str(source), str(dest), max_unpacked_bytes=ARCHIVE_BUDGET_BYTES)

    result = expect_only(unpack.ArchiveError, unpacked, ARCHIVE_PEAK_BYTES)
    if sorted(p.name for p in workdir.iterdir()) != sorted([name, "dest"]):
        raise Violation(f"unpack wrote outside dest: {sorted(os.listdir(workdir))}")
    written = _check_tree(dest)
    if written > ARCHIVE_BUDGET_BYTES:
        raise Violation(f"unpack wrote {written} bytes, over its {ARCHIVE_BUDGET_BYTES} budget")
    if result is not None:
        _check_unpacked(result, source, dest)
    return result


def _check_tree(dest: Path) -> int:
    """Bytes under dest, after checking that it holds only plain files and folders of ours."""
    total = 0
    for entry in _walk(dest):
        mode = entry.lstat().st_mode
        if stat.S_ISDIR(mode):
            allowed = unpack.DIR_MODE
        elif stat.S_ISREG(mode):
            allowed = unpack.FILE_MODE
            total += entry.lstat().st_size
        else:
            raise Violation(f"unpack made {entry}, neither a file nor a folder")
        if stat.S_IMODE(mode) & ~allowed:
            raise Violation(f"unpack made {entry} with mode {stat.S_IMODE(mode):o}")
    return total


def _walk(folder: Path) -> Iterator[Path]:
    for entry in folder.iterdir():
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry)


def _check_unpacked(result: unpack.Unpacked, source: Path, dest: Path) -> None:
    if result.kind not in ("macho", "bundles", "file") or not result.paths:
        raise Violation(f"unpack answered {result!r}")
    for found in map(Path, result.paths):
        if result.kind == "macho" and found == source:
            continue
        if not found.exists() or dest.resolve() not in found.resolve().parents:
            raise Violation(f"unpack names {found}, not an existing path inside dest")
        if result.kind == "bundles" and not (found.is_dir() and found.suffix.lower() == ".dsym"):
            raise Violation(f"unpack names {found} as a bundle")
        if result.kind != "bundles" and unpack.sniff(str(found)) not in ("macho", "fat"):
            raise Violation(f"unpack names {found} as a Mach-O file")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


# --- plist writer ----------------------------------------------------------------------


def check_plist(document: dict[str, dict[str, str]]) -> bytes | None:
    """render: parses back to the same values, or UnrepresentableError for a string XML can't carry.

    None when refused; then some string of the document is not _plist.representable.
    """
    strings = [s for key, values in document.items() for s in (key, *values, *values.values())]
    carried = all(bounded(lambda s=s: _plist.representable(s)) for s in strings)
    try:
        rendered = bounded(lambda: _plist.render(document))
    except _plist.UnrepresentableError:
        if carried:
            raise Violation("render refused a document of representable strings") from None
        return None
    if not carried:
        raise Violation("render accepted a string that representable() refuses")
    if not rendered.startswith(b'<?xml version="1.0" encoding="UTF-8"?>'):
        raise Violation("the plist does not start with the XML declaration")
    parsed = plistlib.loads(rendered)
    if parsed != document:
        raise Violation(f"the plist parses back to {parsed!r}, not {document!r}")
    return rendered


def document_from_bytes(data: bytes) -> dict[str, dict[str, str]]:
    """A plist document out of fuzz bytes: undecodable bytes become surrogates, as in paths."""
    text = data.decode("utf-8", "surrogateescape")
    entries = text.split("\x1e")  # record separator: one UUID entry each
    document: dict[str, dict[str, str]] = {}
    for entry in entries:
        key, _, rest = entry.partition("\x1f")
        fields = rest.split("\x1f")
        document[key] = dict(zip(fields[::2], fields[1::2], strict=False))
    return document


# --- plist reader ----------------------------------------------------------------------

# A hundred times a real per-UUID _plist. plistlib's own time and memory grow with its
# input (about 0.5 ms a KiB of dense XML on an idle core), so MAX_SECONDS and MAX_PEAK_BYTES
# hold up to this size only: longer inputs are cut here.
PLIST_BOUNDED_BYTES = 32 << 10


def check_plist_reader(data: bytes) -> object:
    """plists.loads: UnreadablePlist, or a value plistlib writes back in both formats, whose
    XML the reader reads again and whose binary form reads back to the same bytes."""
    data = data[:PLIST_BOUNDED_BYTES]
    value = expect_only(plists.UnreadablePlist, lambda: plists.loads(data))
    if value is None:  # refused: a plist's value is never None (the reader refuses null)
        return None
    binary = plistlib.dumps(value, fmt=plistlib.FMT_BINARY)
    if plistlib.dumps(plists.loads(binary), fmt=plistlib.FMT_BINARY) != binary:
        raise Violation(f"its binary form reads back otherwise: {value!r:.200}")
    try:
        plists.loads(plistlib.dumps(value, fmt=plistlib.FMT_XML))
    except plists.UnreadablePlist as exc:
        raise Violation(f"its XML form does not read back ({exc}): {value!r:.200}") from None
    return value


# --- reports written as text -----------------------------------------------------------


def check_report_text(data: bytes) -> str | None:
    """formats.parse, then the text writer (symbolicate/text.py): CrashReportError from
    the reader, else text that the text form's reader reads again, and that names every
    thread the report has."""
    text = data.decode("utf-8", "replace")
    report = expect_only(CrashReportError, lambda: formats.parse(text))
    if report is None:
        return None
    written = bounded(lambda: formats.render(report, formats.TEXT, {}))
    if written and not written.endswith("\n"):
        raise Violation(f"text output does not end a line: {written[-200:]!r}")
    headings = sum(line.startswith("Thread ") for line in written.splitlines())
    if headings < sum(thread.index is not None for thread in report.threads):
        raise Violation(f"a thread is missing from the text: {written[:200]!r}")
    return written


def report_seeds() -> list[bytes]:
    """Every committed crash report, in each of its forms."""
    found = sorted((ROOT / "tests" / "fixtures" / "crashreports").rglob("*"))
    return [p.read_bytes() for p in found if p.is_file() and p.suffix in (".ips", ".crash")]


# --- hangs and samples ----------------------------------------------------------------

# Their readers' time grows with the lines they read (a few microseconds a line), so the
# bounds hold up to this size: longer inputs are cut here.
HANG_BOUNDED_BYTES = 64 << 10
HANG_MODULES = {"sample": sample, "spindump": spindump}


def check_hang_text(name: str, data: bytes) -> object:
    """sample.py or spindump.py: CrashReportError, or a report whose frames point into its
    images and which, nothing looked up, is written back byte for byte."""
    module = HANG_MODULES[name]
    text = data[:HANG_BOUNDED_BYTES].decode("utf-8", "replace")
    source = hangtext.Source(None, text)
    report = expect_only(CrashReportError, lambda: module.read_source(source))
    if report is None:
        return None
    for frame in report.frames():
        if frame.image is not None and not 0 <= frame.image < len(report.images):
            raise Violation(f"a frame points past the images: {frame.image}")
    if bounded(lambda: module.write(report)) != text:
        raise Violation("written back otherwise, with nothing looked up")
    return report


SAMPLE_SEED = """\
Analysis of sampling crashy (pid 4711) every 1 millisecond
Process:         crashy [4711]
Code Type:       ARM64

Call graph:
    2351 Thread_3215   DispatchQueue_1: com.apple.main-thread  (serial)
    + 2351 start  (in dyld) + 520  [0x1a6ef3e50]
    +   2351 ???  (in crashy)  load address 0x100000000 + 0x380  [0x100000380]
    +     2351 ???  (in crashy)  [0x100000348,0x10000034c]
    +     ! 2351 main  (in crashy) + 8  [0x100000338]

Total number in stack (recursive counted multiple, when >=5):

Sort by top of stack, same collapsed (when >= 5):
        ???  (in crashy)        2351

Binary Images:
       0x100000000 -        0x100003fff +crashy (0) <4C4C4488-5555-3144-A1C4-05D5352879DF> /a/crashy
       0x1a6eee000 -        0x1a6f7dfff  dyld (960) <2B0E2D4A-4C1A-3E5B-9F0A-1D2C3B4A5E6F> /usr/lib/dyld
"""
SPINDUMP_SEED = """\
Date/Time:        2024-03-04 10:11:51.498 +0100
Architecture:     arm64
Steps:            1000 (10ms sampling interval)

Process:          crashy [101]
UUID:             4C4C4488-5555-3144-A1C4-05D5352879DF

  Thread 0x1a2b    DispatchQueue "com.apple.main-thread"(1)    1000 samples (1-1000)
  1000  start + 520 (dyld + 24144) [0x1a6ef3e50]
    1000  ??? (crashy + 896) [0x100000380]
      *1000  ??? (kernel.release.t8101 + 12345) [0xfffffe0007a3c3c]

  Binary Images:
        0x100000000 -        0x100003fff  crashy 1.0 (1)  <4C4C4488-5555-3144-A1C4-05D5352879DF>  /a/crashy

Process:          other [102]

  Thread 0x1a2c    1000 samples (1-1000)
  1000  ??? (crashy + 840) [0x100000348]

Binary Images:
     *0xfffffe0007004000 - 0xfffffe00079fffff  kernel.release.t8101 (1)  <5F1E2D3C-4B5A-3968-8776-A5B4C3D2E1F0>  /System/Library/Kernels/kernel.release.t8101
"""


def hang_seeds(name: str) -> list[bytes]:
    seed = SAMPLE_SEED if name == "sample" else SPINDUMP_SEED
    return [seed.encode(), seed.replace("\n", "\r\n").encode()]


# --- PE and PDB ------------------------------------------------------------------------


def check_pe(data: bytes, path: Path) -> pe.PEIdentity | None:
    """pe.read_identity: PEError, or an identity whose CodeView (or its absence) is sound."""
    path.write_bytes(data)
    found = expect_only(pe.PEError, lambda: pe.read_identity(str(path)))
    if found is None:
        return None
    if (found.codeview is None) == (found.debug_status is None):
        raise Violation(f"codeview and debug_status disagree: {found!r}")
    codeview = expect_only(pe.PEError, found.require_codeview)
    if codeview is not None and not STORE_KEY.match(codeview.key):
        raise Violation(f"malformed store key {codeview.key!r}")
    if not re.fullmatch(r"[0-9A-F]{9,}", found.pe_key):
        raise Violation(f"malformed image key {found.pe_key!r}")
    return found


def check_pdb(data: bytes, path: Path) -> pdb.PdbIdentity | None:
    """pdb.read_identity: PdbError, or an identity with a well-formed store key."""
    path.write_bytes(data)
    found = expect_only(pdb.PdbError, lambda: pdb.read_identity(str(path)))
    if found is not None and not STORE_KEY.match(found.key):
        raise Violation(f"malformed store key {found.key!r}")
    return found


# --- seeds -----------------------------------------------------------------------------


def macho_seeds() -> list[Path]:
    """Every real Mach-O fixture (thin, fat, fat64, dSYMs)."""
    return sorted(
        p
        for p in MACHO_FIXTURES.rglob("*")
        if p.is_file() and p.read_bytes()[:4] in _MACHO_MAGIC_BYTES
    )


def pe_seeds() -> list[Path]:
    """The real PE images and the hand-broken ones."""
    return sorted(p for p in PE_FIXTURES.rglob("*") if p.suffix in (".exe", ".dll"))


def pdb_seeds() -> list[Path]:
    return sorted(PE_FIXTURES.rglob("*.pdb"))


def archive_seeds() -> list[bytes]:
    """The answers servers send: a zipped bundle (deflated, and stored one folder down), a
    zipped bare Mach-O, and a gzip and a zlib stream of one."""
    dwarf = (MACHO_FIXTURES / "hello.dSYM/Contents/Resources/DWARF/hello").read_bytes()
    info = (MACHO_FIXTURES / "hello.dSYM/Contents/Info.plist").read_bytes()
    bundle = [("hello.dSYM/Contents/Info.plist", info)]
    bundle.append(("hello.dSYM/Contents/Resources/DWARF/hello", dwarf))
    return [
        make_zip(bundle),
        make_zip([("dSYMs/" + name, data) for name, data in bundle], zipfile.ZIP_STORED),
        make_zip([("hello", dwarf)]),
        gzip.compress(dwarf, mtime=0),
        zlib.compress(dwarf),
    ]


def plist_seeds() -> list[bytes]:
    """Answers in document_from_bytes' encoding, with the characters XML finds hard."""
    return [
        b"4C4C449A-5555-3144-A19A-E6E643E6625E\x1fDBGDSYMPath\x1f/Users/a&b/<c>.dSYM",
        b"K\x1fDBGError\x1fline\r\nnext\ttab]]>\x1eL\x1fk\x1f\xef\xbf\xbe\x00",
        "\U0001f600\x1f\u2028\x1f\x85".encode() + b"\x1f\xff\xfe/bad utf-8",
    ]


# One value of every plist type, at the edges of its range: a seed, and what tests read back.
PLIST_OF_EVERY_TYPE = {
    "DBGBuildSourcePath": "/Users/ci/build & <src>",
    "DBGSourcePathRemapping": {"/Users/ci/build": "/Users/me/src"},
    "DBGSearchPaths": ["/a", "~/b"],
    "lowest": -(1 << 63),
    "highest": (1 << 64) - 1,
    "ratio": 0.5,
    "flag": True,
    "built": datetime.datetime(2024, 2, 29, 23, 59, 59),
    "blob": bytes(range(64)),
    "empty": {},
}


def plist_reader_seeds() -> list[bytes]:
    """Apple's own plists from the fixtures (Info.plist, a per-UUID plist), and
    PLIST_OF_EVERY_TYPE in plistlib's XML and binary forms, as a store or `defaults` writes."""
    found = sorted(p for p in (ROOT / "tests" / "fixtures").rglob("*.plist") if p.is_file())
    return [p.read_bytes() for p in found] + [
        plistlib.dumps(PLIST_OF_EVERY_TYPE, fmt=form)
        for form in (plistlib.FMT_XML, plistlib.FMT_BINARY)
    ]


# The element soup plist_from_words spells: every plist element, and texts each right for
# one element and wrong for the others.
PLIST_ELEMENTS = ["dict", "array", "key", "string", "integer", "real", "true", "date", "data"]
PLIST_TEXTS = ["", "x", "0x", "0x1F", "-1", "18446744073709551616", "1e999", "nan", "a=",
               "YQ==", "2024-02-29T23:59:59Z", "2024-02-29Z", "2024-02Z", "2024Z",
               "2024-13-01Z", "&amp;", "&#1;", "\u00e9"]  # fmt: skip


def plist_from_words(data: bytes) -> bytes:
    """An XML plist spelled from fuzz bytes, two to a step: close the innermost element, or
    open one with a text. Well-formed XML (expat's part), elements anywhere (plistlib's)."""
    out, opened = [], []
    for step in range(0, len(data) - 1, 2):
        what, text = data[step], data[step + 1]
        if what % 4 == 0 and opened:
            out.append(f"</{opened.pop()}>")
        else:
            element = PLIST_ELEMENTS[what % len(PLIST_ELEMENTS)]
            out.append(f"<{element}>{PLIST_TEXTS[text % len(PLIST_TEXTS)]}")
            opened.append(element)
    out += [f"</{element}>" for element in reversed(opened)]
    return f'<plist version="1.0">{"".join(out)}</plist>'.encode()


def make_zip(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip archive of `members` (name, data), in order, duplicates kept."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive_file:
        for name, data in members:
            archive_file.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return buffer.getvalue()


def make_workdir() -> Path:
    """A scratch folder for file-based readers, in RAM when the machine has /dev/shm."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="dsymfind-fuzz-", dir=shm if shm.is_dir() else None))


_MACHO_MAGIC_BYTES = frozenset(
    bytes.fromhex(m)
    for m in ("cafebabe", "cafebabf", "feedface", "feedfacf", "cefaedfe", "cffaedfe")
)
