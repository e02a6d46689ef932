"""apple/unpack.py on real archives made here, honest and hostile."""

from __future__ import annotations

import functools
import gzip
import os
import stat
import struct
import tempfile
import unicodedata
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fixtures import FIXTURES

from dsymfind.apple.unpack import MAX_ENTRIES, ArchiveError, Unpacked, sniff, unpack

HELLO_DSYM = FIXTURES / "hello.dSYM"
HELLO_DWARF = HELLO_DSYM / "Contents" / "Resources" / "DWARF" / "hello"
MB = 1 << 20

# A 64-bit little-endian Mach-O header (arm64 dSYM companion file): all sniffing reads.
THIN_HEADER = struct.pack("<7I4x", 0xFEEDFACF, 0x0100000C, 0, 0xA, 0, 0, 0)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def make_zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def bundle_members(bundle: Path, prefix: str = "") -> dict[str, bytes]:
    """A real dSYM bundle's files as zip members under `prefix`."""
    root = bundle.parent
    return {
        prefix + file.relative_to(root).as_posix(): file.read_bytes()
        for file in sorted(bundle.rglob("*"))
        if file.is_file()
    }


def patch_headers(data: bytes, offsets: tuple[int, int], fmt: str, value: int) -> bytes:
    """Overwrite one field in the first local header and the first central directory entry."""
    buf = bytearray(data)
    local, central = 0, data.index(b"PK\x01\x02")
    assert data.startswith(b"PK\x03\x04")
    struct.pack_into(fmt, buf, local + offsets[0], value)
    struct.pack_into(fmt, buf, central + offsets[1], value)
    return bytes(buf)


def files_under(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder of this module's own: tmp_path also holds the isolated home (conftest)."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def dest(work: Path) -> Path:
    folder = work / "dest"
    folder.mkdir()
    return folder


# --- sniff ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (THIN_HEADER, "macho"),
        (struct.pack(">I", 0xFEEDFACF), "macho"),
        (struct.pack("<I", 0xFEEDFACE), "macho"),
        (struct.pack(">I", 0xFEEDFACE), "macho"),
        (struct.pack(">II", 0xCAFEBABE, 2), "fat"),
        (struct.pack(">II", 0xCAFEBABF, 2), "fat"),
        (struct.pack(">IHH", 0xCAFEBABE, 0, 52), "unknown"),  # a Java 8 class file
        (struct.pack(">II", 0xCAFEBABE, 0), "unknown"),
        (b"\xca\xfe\xba\xbe", "unknown"),
        (gzip.compress(b"x", mtime=0), "gzip"),
        (b"PK\x03\x04rest", "zip"),
        (b"PK\x05\x06" + bytes(18), "zip"),
        (b"\x28\xb5\x2f\xfd\x00", "zstd"),
        (zlib.compress(b"x"), "zlib"),
        (b"<?xml version", "unknown"),
        (b"", "unknown"),
    ],
)
def test_sniff(work: Path, head: bytes, kind: str) -> None:
    assert sniff(str(write(work / "f", head))) == kind


def test_sniff_real_fixtures() -> None:
    assert sniff(str(HELLO_DWARF)) == "macho"
    assert sniff(str(FIXTURES / "universal")) == "fat"
    assert sniff(str(FIXTURES / "universal64")) == "fat"


# --- bare and compressed Mach-O ------------------------------------------------------------


@pytest.mark.parametrize("name", ["hello", "universal"])
def test_bare_macho_is_used_in_place(dest: Path, name: str) -> None:
    result = unpack(str(FIXTURES / name), str(dest), max_unpacked_bytes=MB)
    assert result == Unpacked("macho", [str(FIXTURES / name)])
    assert files_under(dest) == []


def test_gzip_of_macho(work: Path, dest: Path) -> None:
    src = write(work / "hello.gz", gzip.compress(HELLO_DWARF.read_bytes()))
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert result == Unpacked("macho", [str(dest / "hello")])
    assert (dest / "hello").read_bytes() == HELLO_DWARF.read_bytes()


def test_gzip_without_gz_suffix_is_named_payload(work: Path, dest: Path) -> None:
    src = write(work / "download", gzip.compress(THIN_HEADER))
    assert unpack(str(src), str(dest), max_unpacked_bytes=MB).paths == [str(dest / "payload")]


def test_multi_member_gzip(work: Path, dest: Path) -> None:
    data = HELLO_DWARF.read_bytes()
    src = write(work / "x.gz", gzip.compress(data[:100]) + gzip.compress(data[100:]))
    unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert (dest / "x").read_bytes() == data


def test_zlib_of_macho(work: Path, dest: Path) -> None:
    src = write(work / "answer", zlib.compress(HELLO_DWARF.read_bytes()))
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert (dest / "payload").read_bytes() == HELLO_DWARF.read_bytes()
    assert result.kind == "macho"


def test_gzip_bomb_stops_at_the_cap(work: Path, dest: Path) -> None:
    src = work / "bomb.gz"
    with gzip.open(src, "wb") as out:
        out.write(THIN_HEADER)
        for _ in range(50):
            out.write(bytes(MB))
    assert src.stat().st_size < MB  # the point of a bomb
    with pytest.raises(ArchiveError, match="more than 1048576 bytes"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(dest) == []  # the partial output is gone, not left under its name
    assert files_under(work) == ["bomb.gz", "dest"]


def test_zlib_bomb_stops_at_the_cap(work: Path, dest: Path) -> None:
    src = write(work / "bomb", zlib.compress(bytes(20 * MB), 9))
    with pytest.raises(ArchiveError, match="more than"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(dest) == []


@pytest.mark.parametrize("keep", [10, 100, -8, -1])
def test_truncated_gzip(work: Path, dest: Path, keep: int) -> None:
    data = gzip.compress(HELLO_DWARF.read_bytes())
    src = write(work / "hello.gz", data[:keep])
    with pytest.raises(ArchiveError, match="damaged or truncated"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(dest) == []


def test_truncated_zlib(work: Path, dest: Path) -> None:
    src = write(work / "answer", zlib.compress(HELLO_DWARF.read_bytes())[:200])
    with pytest.raises(ArchiveError, match="truncated"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


def test_gzip_with_bad_crc(work: Path, dest: Path) -> None:
    data = bytearray(gzip.compress(HELLO_DWARF.read_bytes()))
    data[-8] ^= 0xFF  # the CRC-32 in the trailer
    src = write(work / "hello.gz", bytes(data))
    with pytest.raises(ArchiveError, match="damaged"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


def test_gzip_of_something_else(work: Path, dest: Path) -> None:
    src = write(work / "page.gz", gzip.compress(b"<html>not found</html>"))
    with pytest.raises(ArchiveError, match="does not hold a Mach-O"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


def test_zstd_is_refused(work: Path, dest: Path) -> None:
    src = write(work / "x.zst", b"\x28\xb5\x2f\xfd" + bytes(20))
    with pytest.raises(ArchiveError, match="zstd-compressed answers are not supported"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


def test_unknown_format(work: Path, dest: Path) -> None:
    src = write(work / "x", b"<html>")
    with pytest.raises(ArchiveError, match="neither a Mach-O"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


# --- zip: good answers ---------------------------------------------------------------------


def test_zip_of_one_bundle(work: Path, dest: Path) -> None:
    src = make_zip(work / "hello.dSYM.zip", bundle_members(HELLO_DSYM))
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert result == Unpacked("bundles", [str(dest / "hello.dSYM")], [])
    dwarf = dest / "hello.dSYM" / "Contents" / "Resources" / "DWARF" / "hello"
    assert dwarf.read_bytes() == HELLO_DWARF.read_bytes()


def test_zip_with_bundles_under_a_folder(work: Path, dest: Path) -> None:
    members = bundle_members(HELLO_DSYM, "dSYMs/") | bundle_members(
        FIXTURES / "universal.dSYM", "dSYMs/"
    )
    members["dSYMs/"] = b""
    src = make_zip(work / "dSYMs.zip", members)
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert result.kind == "bundles"
    assert result.paths == [
        str(dest / "dSYMs" / "hello.dSYM"),
        str(dest / "dSYMs" / "universal.dSYM"),
    ]


def test_bundle_too_deep_is_not_an_answer(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", bundle_members(HELLO_DSYM, "a/b/c/d/"))
    with pytest.raises(ArchiveError, match="no dSYM bundle"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


def test_zip_of_one_file(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", {"hello": HELLO_DWARF.read_bytes()})
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert result == Unpacked("file", [str(dest / "hello")], [])


def test_zip_of_one_file_that_is_no_macho(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", {"readme.txt": b"hello"})
    with pytest.raises(ArchiveError, match=r"'readme\.txt' is not a Mach-O file"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


@pytest.mark.parametrize("members", [{}, {"a": THIN_HEADER, "b": THIN_HEADER}, {"d/": b""}])
def test_zip_without_bundle(work: Path, dest: Path, members: dict[str, bytes]) -> None:
    src = make_zip(work / "x.zip", members)
    with pytest.raises(ArchiveError, match="no dSYM bundle"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)


def test_finder_appledouble_folder_is_ignored(work: Path, dest: Path) -> None:
    members = bundle_members(HELLO_DSYM) | {"__MACOSX/hello.dSYM/._Contents": b"\x00\x05\x16\x07"}
    src = make_zip(work / "x.zip", members)
    assert unpack(str(src), str(dest), max_unpacked_bytes=MB).paths == [str(dest / "hello.dSYM")]
    assert not (dest / "__MACOSX").exists()


def test_archive_modes_are_not_applied(work: Path, dest: Path) -> None:
    info = zipfile.ZipInfo("hello")
    info.external_attr = (stat.S_IFREG | stat.S_ISUID | 0o777) << 16
    with zipfile.ZipFile(work / "x.zip", "w") as zf:
        zf.writestr(info, THIN_HEADER)
    unpack(str(work / "x.zip"), str(dest), max_unpacked_bytes=MB)
    mode = (dest / "hello").stat().st_mode
    assert not mode & (stat.S_ISUID | stat.S_IXUSR | stat.S_IWOTH)


# --- zip: bundle scripts -------------------------------------------------------------------


SCRIPT = "hello.dSYM/Contents/Resources/Python/hello.py"


def test_bundle_scripts_are_skipped_by_default(work: Path, dest: Path) -> None:
    members = bundle_members(HELLO_DSYM) | {SCRIPT: b"import os\n"}
    src = make_zip(work / "x.zip", members)
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert result == Unpacked("bundles", [str(dest / "hello.dSYM")], [SCRIPT])
    assert not (dest / "hello.dSYM" / "Contents" / "Resources" / "Python").exists()


def test_bundle_scripts_kept_when_allowed(work: Path, dest: Path) -> None:
    members = bundle_members(HELLO_DSYM) | {SCRIPT: b"import os\n"}
    src = make_zip(work / "x.zip", members)
    result = unpack(str(src), str(dest), max_unpacked_bytes=MB, allow_scripts=True)
    assert result.skipped_scripts == []
    assert (dest / SCRIPT).read_bytes() == b"import os\n"


@pytest.mark.parametrize(
    "name",
    [
        "hello.dSYM/contents/resources/python/x.py",  # one folder on APFS
        "dSYMs/Other.DSYM/Contents/Resources/Python/sub/x.py",
        "hello.dSYM/Contents/Resources/Python",
        "deep/er/than/bundles/go/x.dSYM/Contents/Resources/Python/x.py",
    ],
)
def test_script_spellings_are_skipped(work: Path, dest: Path, name: str) -> None:
    members = bundle_members(HELLO_DSYM) | {name: b"import os\n"}
    src = make_zip(work / "x.zip", members)
    assert unpack(str(src), str(dest), max_unpacked_bytes=MB).skipped_scripts == [name]
    assert not (dest / name).exists()


def test_only_scripts_is_no_bundle(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", {SCRIPT: b"import os\n"})
    with pytest.raises(ArchiveError, match="no dSYM bundle"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(dest) == []


# --- zip: hostile archives -----------------------------------------------------------------


def expect_rejected(src: Path, dest: Path, match: str, max_entries: int = MAX_ENTRIES) -> None:
    """The archive is refused before anything is written."""
    with pytest.raises(ArchiveError, match=match):
        unpack(str(src), str(dest), max_unpacked_bytes=MB, max_entries=max_entries)
    assert files_under(dest) == []


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("../evil", r"'\.\.'"),
        ("/abs", "absolute"),
        ("a/../../b", r"'\.\.'"),
        ("hello.dSYM/../../b", r"'\.\.'"),
        ("C:\\x", "backslash"),
        ("a\\..\\..\\b", "backslash"),
        ("C:/x", "drive letter"),
        ("//server/share", "absolute"),
        ("./", "empty name"),
        ("a/" + "x" * 256, "too long"),
        ("a/" * 600 + "b", "too long"),
    ],
)
def test_zip_slip_names(work: Path, dest: Path, name: str, problem: str) -> None:
    src = make_zip(work / "x.zip", bundle_members(HELLO_DSYM) | {name: THIN_HEADER})
    expect_rejected(src, dest, problem)
    assert files_under(work) == ["dest", "x.zip"]


def test_nul_in_name(work: Path, dest: Path) -> None:
    # zipfile will not write a NUL, so write "aXb" and patch the byte in both headers.
    data = make_zip(work / "x.zip", {"hello.dSYMX/evil": THIN_HEADER}).read_bytes()
    src = write(work / "x.zip", data.replace(b"hello.dSYMX", b"hello.dSYM\x00"))
    expect_rejected(src, dest, "NUL")


def test_symlink_entry(work: Path, dest: Path) -> None:
    link = zipfile.ZipInfo("hello.dSYM/Contents/Resources/DWARF/hello")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(work / "x.zip", "w") as zf:
        zf.writestr("hello.dSYM/Contents/Info.plist", b"<plist/>")
        zf.writestr(link, "/etc/passwd")
    expect_rejected(work / "x.zip", dest, "symbolic link")


@pytest.mark.parametrize(
    "names",
    [
        ["a/x", "a/x"],
        ["hello.dSYM/x", "HELLO.dsym/X"],  # one file on APFS
        [unicodedata.normalize("NFC", "caf\u00e9"), unicodedata.normalize("NFD", "caf\u00e9")],
        ["a/x", "a//x"],
        ["a/", "a"],
    ],
)
@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_entries(work: Path, dest: Path, names: list[str]) -> None:
    with zipfile.ZipFile(work / "x.zip", "w") as zf:
        for name in names:
            zf.writestr(name, THIN_HEADER)
    expect_rejected(work / "x.zip", dest, "twice")


def test_file_that_is_also_a_folder(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", {"a/b": THIN_HEADER, "A/b/c": THIN_HEADER})
    expect_rejected(src, dest, "both a file and a folder")


def test_too_many_entries(work: Path, dest: Path) -> None:
    with zipfile.ZipFile(work / "x.zip", "w", zipfile.ZIP_STORED) as zf:
        for i in range(20_000):
            zf.writestr(f"f{i}", b"")
    expect_rejected(work / "x.zip", dest, "20000 entries, more than the 10000", 10_000)


def test_declared_sizes_over_the_cap(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", {"a": bytes(600_000), "b": bytes(600_000)})
    expect_rejected(src, dest, "declares 1200000 bytes")


def test_declared_size_lie(work: Path, dest: Path) -> None:
    # The headers claim 100 bytes; the data inflates to 2 MB. Nothing past the claim is
    # written, and the short read fails the CRC check.
    data = make_zip(work / "x.zip", {"hello": THIN_HEADER + bytes(2 * MB)}).read_bytes()
    src = write(work / "x.zip", patch_headers(data, (22, 24), "<I", 100))
    with pytest.raises(ArchiveError, match="CRC"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(dest) == []


def test_entry_data_outside_the_archive(work: Path, dest: Path) -> None:
    data = make_zip(work / "x.zip", {"hello": THIN_HEADER}).read_bytes()
    central = data.index(b"PK\x01\x02")
    src = write(work / "x.zip", data[: central + 42] + b"\xff\xff\xff\x7f" + data[central + 46 :])
    expect_rejected(src, dest, "outside the archive")


def test_encrypted_entry(work: Path, dest: Path) -> None:
    data = make_zip(work / "x.zip", {"hello": THIN_HEADER}).read_bytes()
    src = write(work / "x.zip", patch_headers(data, (6, 8), "<H", 0x1))
    expect_rejected(src, dest, "encrypted")


def test_unsupported_compression(work: Path, dest: Path) -> None:
    src = make_zip(work / "x.zip", {"hello": THIN_HEADER}, zipfile.ZIP_BZIP2)
    expect_rejected(src, dest, "compression method 12")


def test_bad_crc(work: Path, dest: Path) -> None:
    data = make_zip(work / "x.zip", {"hello": THIN_HEADER}).read_bytes()
    src = write(work / "x.zip", patch_headers(data, (14, 16), "<I", 0))
    with pytest.raises(ArchiveError, match="CRC"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(dest) == []


def test_not_really_a_zip(work: Path, dest: Path) -> None:
    expect_rejected(write(work / "x.zip", b"PK\x03\x04" + bytes(100)), dest, "unreadable")


def test_short_zip64_locator(work: Path, dest: Path) -> None:
    # A zip64 locator in a file too short for the record it points to: the seek fails
    # with EINVAL, which must not escape as an OSError.
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, 0, 1)
    end = b"PK\x05\x06" + bytes(18)
    src = write(work / "x.zip", b"PK\x03\x04" + bytes(14) + locator + end)
    expect_rejected(src, dest, "unreadable")


def test_symlink_planted_in_dest_is_not_followed(work: Path, dest: Path) -> None:
    outside = work / "outside"
    outside.mkdir()
    (dest / "hello.dSYM").symlink_to(outside)
    src = make_zip(work / "x.zip", bundle_members(HELLO_DSYM))
    with pytest.raises(ArchiveError, match="outside the unpack folder"):
        unpack(str(src), str(dest), max_unpacked_bytes=MB)
    assert files_under(outside) == []


def test_dest_through_a_symlink(work: Path, dest: Path) -> None:
    # /tmp is a symlink on macOS: the caller's own path to dest must still work.
    (work / "via").symlink_to(dest)
    src = make_zip(work / "x.zip", bundle_members(HELLO_DSYM))
    result = unpack(str(src), str(work / "via"), max_unpacked_bytes=MB)
    assert result.paths == [str(work / "via" / "hello.dSYM")]


# --- totality ------------------------------------------------------------------------------


@functools.cache
def sample_zip() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        members = bundle_members(HELLO_DSYM) | {"hello.dSYM/x": b"x" * 300, SCRIPT: b"pass\n"}
        return make_zip(Path(tmp) / "x.zip", members, zipfile.ZIP_STORED).read_bytes()


def unpack_or_refuse(data: bytes) -> None:
    """Only a result or ArchiveError may come out of unpack, whatever the bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        src = write(Path(tmp) / "answer.gz", data)
        out = Path(tmp) / "dest"
        out.mkdir()
        try:
            result = unpack(str(src), str(out), max_unpacked_bytes=64 * 1024, max_entries=50)
        except ArchiveError as exc:
            assert "\n" not in str(exc)
            return
        assert all(os.path.commonpath([tmp, p]) == tmp for p in result.paths)


MAGICS = [b"", b"PK\x03\x04", b"PK\x05\x06", b"\x1f\x8b\x08\x00", b"\x78\x9c", THIN_HEADER[:4]]


@settings(max_examples=200, deadline=500)
@given(prefix=st.sampled_from(MAGICS), body=st.binary(max_size=2048))
def test_random_bytes_only_raise_archive_error(prefix: bytes, body: bytes) -> None:
    unpack_or_refuse(prefix + body)


@settings(max_examples=200, deadline=500)
@given(
    edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=8),
    cut=st.integers(min_value=0),
    compress=st.booleans(),
)
def test_mutated_zips_only_raise_archive_error(
    edits: list[tuple[int, int]], cut: int, compress: bool
) -> None:
    data = bytearray(sample_zip())
    for position, value in edits:
        data[position % len(data)] = value
    data = data[: len(data) - cut % 64]
    unpack_or_refuse(gzip.compress(bytes(data)) if compress else bytes(data))
