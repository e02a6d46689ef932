"""Archive sniffing and unpacking under property-based fuzzing.

Every input goes through fuzzing.targets.check_archive: sniff always answers, unpack
yields files strictly inside dest (plain files and folders, our modes, within budget)
or raises ArchiveError, and nothing else is touched, within 100 ms and 4 MiB.

zipfile warns about the duplicate names these tests write on purpose.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets
from fuzzing.properties import mutated, property_settings

MACHO = (targets.MACHO_FIXTURES / "hello").read_bytes()
BUNDLE_FILES = {
    "hello.dSYM/Contents/Info.plist": b"<plist/>",
    "hello.dSYM/Contents/Resources/DWARF/hello": MACHO,
}


pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    folder = targets.make_workdir()
    yield folder
    shutil.rmtree(folder)


def gzip_of(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


SEEDS = targets.archive_seeds()


@property_settings(200)
@given(data=st.sampled_from([b"PK\x03\x04", b"PK\x05\x06", b"\x1f\x8b", b"\x78\x9c", b""]).flatmap(
    lambda magic: st.binary(max_size=2048).map(lambda body: magic + body)
))  # fmt: skip
def test_random_bytes(workdir: Path, data: bytes) -> None:
    targets.check_archive(data, workdir)


@property_settings(250)
@given(data=mutated(SEEDS, focus=512))
def test_mutated_archives(workdir: Path, data: bytes) -> None:
    targets.check_archive(data, workdir)


# Names an attacker would send, and names that are fine; each may sit anywhere in a path.
hostile_part = st.sampled_from(
    ["..", ".", "", "/", "\\", "C:", "a\0b", "A", "a", "e\u0301", "\u00e9", "x" * 256, "__MACOSX"]
)
plain_part = st.sampled_from(["hello.dSYM", "Contents", "Resources", "DWARF", "hello", "Python"])
names = st.lists(hostile_part | plain_part, min_size=1, max_size=6).map("/".join)


@property_settings(150)
@given(
    members=st.lists(st.tuples(names, st.sampled_from([b"", b"x", MACHO])), min_size=1, max_size=6),
    method=st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]),
)
def test_hostile_names(workdir: Path, members: list[tuple[str, bytes]], method: int) -> None:
    result = targets.check_archive(targets.make_zip(members, method), workdir)
    if result is not None:
        assert not any(".." in name.split("/") or name.startswith("/") for name, _ in members)


@property_settings(100)
@given(extra=st.lists(st.sampled_from(sorted(BUNDLE_FILES)), max_size=2), stored=st.booleans())
def test_a_sound_bundle_unpacks_whole(workdir: Path, extra: list[str], stored: bool) -> None:
    """Duplicates are refused; without them every byte arrives."""
    members = sorted(BUNDLE_FILES.items()) + [(name, BUNDLE_FILES[name]) for name in extra]
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    result = targets.check_archive(targets.make_zip(members, method), workdir)
    if extra:
        assert result is None
    else:
        assert result is not None and result.kind == "bundles"
        dwarf = Path(result.paths[0]) / "Contents/Resources/DWARF/hello"
        assert dwarf.read_bytes() == MACHO


@property_settings(20)
@given(
    size=st.integers(targets.ARCHIVE_BUDGET_BYTES + 1, 4 * targets.ARCHIVE_BUDGET_BYTES),
    kind=st.sampled_from(["gzip", "zlib", "zip", "zip-lying"]),
)
def test_bombs_stop_at_the_budget(workdir: Path, size: int, kind: str) -> None:
    payload = MACHO + bytes(size - len(MACHO))
    if kind == "gzip":
        data = gzip_of(payload)
    elif kind == "zlib":
        data = zlib.compress(payload, 9)
    else:
        data = targets.make_zip([("hello.dSYM/Contents/Resources/DWARF/hello", payload)])
        if kind == "zip-lying":  # the central directory claims 1000 bytes
            data = data.replace(size.to_bytes(4, "little"), (1000).to_bytes(4, "little"))
    assert len(data) < targets.MAX_INPUT_BYTES
    assert targets.check_archive(data, workdir) is None


@property_settings(100)
@given(data=mutated([MACHO], focus=64), name=st.sampled_from(["x.gz", ".gz", "..gz", "payload"]))
def test_gzip_of_anything(workdir: Path, data: bytes, name: str) -> None:
    result = targets.check_archive(gzip_of(data), workdir, name)
    if result is not None:
        assert Path(result.paths[0]).read_bytes() == data
