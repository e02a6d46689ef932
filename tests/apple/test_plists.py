"""apple/plists.py: every plist dsymfind reads, and the one error for what it cannot use."""

from __future__ import annotations

import plistlib
import shutil
import sys
from pathlib import Path

import pytest
from support.fixtures import FIXTURES, HELLO_UUID
from support.plists import POISONS, binary_plist, poisoned, ref, xml_plist

from dsymfind.apple import bundle, plists

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import targets

SENTRY_UUID_PLIST = (
    FIXTURES.parent / "apple" / "SentrySwift.dSYM" / "Contents" / "Resources"
    / "0285884D-3DE9-3051-B23A-63B48BF99F35.plist"
)  # fmt: skip


@pytest.mark.parametrize("form", [plistlib.FMT_XML, plistlib.FMT_BINARY], ids=["xml", "binary"])
def test_every_plist_type_reads_in_both_forms(form: plistlib.PlistFormat) -> None:
    every_type = targets.PLIST_OF_EVERY_TYPE
    assert plists.loads(plistlib.dumps(every_type, fmt=form)) == every_type


def test_apples_own_plists_read() -> None:
    assert plists.loads_dict(SENTRY_UUID_PLIST.read_bytes()) == {
        "DBGOriginalUUID": "5EB54C6A-EBEE-3AD7-A3DA-7EFB4902BB95"
    }
    info = plists.loads_dict((FIXTURES / "hello.dSYM" / "Contents" / "Info.plist").read_bytes())
    assert info["CFBundlePackageType"] == "dSYM"


@pytest.mark.parametrize("poison", POISONS.values(), ids=list(POISONS))
def test_every_poison_is_unreadable_with_a_one_line_reason(poison: bytes) -> None:
    with pytest.raises(plists.UnreadablePlist) as refused:
        plists.loads(poison)
    said = str(refused.value)
    assert said == f"unreadable plist: {refused.value.reason}"
    assert 0 < len(refused.value.reason) <= plists.MAX_REASON_CHARS and "\n" not in said


@pytest.mark.parametrize(
    ("poison", "reason"),
    [
        ("date", "a <date> that is not an ISO 8601 date"),
        ("digits", "an integer wider than 64 bits"),
        ("wide-integer", "an integer wider than 64 bits"),
        ("xml-nesting", f"nested deeper than {plists.MAX_DEPTH} levels"),
        ("binary-nesting", f"nested deeper than {plists.MAX_DEPTH} levels"),
        ("binary-cut", "neither an XML plist nor a sound binary one"),
        ("stray-key", "a key or value outside any dictionary or array"),
        ("self-holding", "a dictionary or array that contains itself"),
        ("expansion", "more than 16.0 MiB spelled out, by repeated references"),
        ("repeated-string", "more than 16.0 MiB spelled out, by repeated references"),
        ("null", "a null, which an XML plist cannot carry"),
    ],
)
def test_the_reason_says_what_was_wrong(poison: str, reason: str) -> None:
    with pytest.raises(plists.UnreadablePlist, match=f"^unreadable plist: {reason}$"):
        plists.loads(POISONS[poison])


@pytest.mark.parametrize(
    "declaration",
    [f'<?xml version="1.0" encoding="{name}"?>'.encode() for name in
     ("rot13", "base64", "hex", "zlib", "bz2", "uu", "idna", "punycode", "big5", "nosuch")],
)  # fmt: skip
def test_a_codec_in_the_xml_declaration_is_unreadable_whatever_it_raises(
    declaration: bytes,
) -> None:
    """pyexpat hands an unknown encoding to Python's codecs: LookupError for one that is not
    a text encoding, ValueError for multi-byte ones, UnicodeError from idna."""
    with pytest.raises(plists.UnreadablePlist):
        plists.loads(xml_plist(b"<string>\xe9t\xe9</string>", declaration=declaration))


@pytest.mark.parametrize(
    "value",
    [
        b"<real>abc</real>",
        b"<integer>0x</integer>",
        b"<date>2024-13-01T00:00:00Z</date>",
        b"<date>0000-01-01T00:00:00Z</date>",
        b"<date>2024Z</date>",  # TypeError: datetime() without a month
        b"<string>\xff</string>",
        b"<string>&#1;</string>",
        b"<string>&undefined;</string>",
        b"<array><key>k</key></array>",
        b"<dict><string>no key</string></dict>",
    ],
)
def test_values_plistlib_refuses_in_its_own_ways_are_unreadable(value: bytes) -> None:
    with pytest.raises(plists.UnreadablePlist):
        plists.loads(poisoned(value))


def test_an_entity_declaration_is_unreadable() -> None:
    declaration = b'<?xml version="1.0"?><!DOCTYPE plist [<!ENTITY a "b">]>'
    with pytest.raises(plists.UnreadablePlist, match="entity declarations"):
        plists.loads(xml_plist(b"<string>&a;</string>", declaration=declaration))


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        ([b"\xd1" + ref(1) + ref(2), b"\x10\x01", b"\x09"], "a dictionary key that is a int"),
        ([b"\x81\x01\x02"], "a UID, which an XML plist cannot carry"),
        ([b"\x5f\x10\x03" + b"a\x01b"], "a string XML cannot carry"),
        ([b"\xa1" + ref(0)], "a dictionary or array that contains itself"),
    ],
    ids=["integer-key", "uid", "control-character", "array-in-itself"],
)
def test_binary_values_no_xml_plist_carries_are_unreadable(
    objects: list[bytes], reason: str
) -> None:
    with pytest.raises(plists.UnreadablePlist, match=reason):
        plists.loads(binary_plist(objects))


def test_one_object_shared_by_many_references_is_read_and_measured_once() -> None:
    """A binary plist may name one object from many places (writers share equal values):
    within the bound it reads, and the check costs what the bytes do, not what they spell."""
    shared = binary_plist([b"\xaf\x11\x03\xe8" + ref(1) * 1000, b"\x5f\x10\x40" + b"s" * 64])
    value = plists.loads(shared)
    assert value == ["s" * 64] * 1000


def test_nesting_up_to_the_bound_reads_and_one_more_level_does_not() -> None:
    inside: object = "deepest"
    for _ in range(plists.MAX_DEPTH):  # arrays within arrays
        inside = [inside]
    assert plists.loads(plistlib.dumps(inside)) == inside
    with pytest.raises(plists.UnreadablePlist, match="nested deeper"):
        plists.loads(plistlib.dumps([inside]))


def test_a_root_that_is_no_dictionary_is_unreadable_where_one_is_wanted() -> None:
    assert plists.loads(plistlib.dumps(["a"])) == ["a"]
    with pytest.raises(plists.UnreadablePlist, match="its root is a list, not a dictionary"):
        plists.loads_dict(plistlib.dumps(["a"]))


def test_reading_leaves_the_recursion_limit_as_it_was() -> None:
    limit = sys.getrecursionlimit()
    with pytest.raises(plists.UnreadablePlist):
        plists.loads(POISONS["binary-nesting"])
    assert sys.getrecursionlimit() == limit


def test_a_bundles_per_uuid_plist_names_itself_when_unreadable(tmp_path: Path) -> None:
    copy = str(tmp_path / "hello.dSYM")
    shutil.copytree(FIXTURES / "hello.dSYM", copy)
    where = bundle.uuid_plist_path(copy, HELLO_UUID)
    with open(where, "wb") as out:
        out.write(POISONS["date"])
    with pytest.raises(plists.UnreadablePlist, match=f"^{where}: unreadable plist: a <date>"):
        bundle.uuid_plist_data(copy, HELLO_UUID)
    assert bundle.read_uuid_plist(copy, HELLO_UUID) == {}
    with open(where, "wb") as out:
        out.write(plistlib.dumps({"k": "v"}) + b" " * bundle.MAX_UUID_PLIST_BYTES)
    with pytest.raises(plists.UnreadablePlist, match="over 1048576 bytes"):
        bundle.uuid_plist_data(copy, HELLO_UUID)
