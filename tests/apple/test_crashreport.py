"""Reading the binary images of Apple crash reports: the samples in fixtures/crashreports
follow Apple's documented .ips (JSON) and classic text formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.crash_reports import (
    CRASH_REPORTS,
    DYLD_UUID,
    FOUNDATION_UUID,
    KERNEL_UUID,
    LIBDYLD_UUID,
)
from support.fixtures import GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError, Image


def uuids(path: Path) -> list[str]:
    return [image.uuid for image in crashreport.read(str(path))]


def test_ips_used_images_once_each_without_the_zero_uuid() -> None:
    images = crashreport.read(str(CRASH_REPORTS / "hello-macos.ips"))
    assert [i.uuid for i in images] == [HELLO_UUID, GREET_UUID, KERNEL_UUID, DYLD_UUID]
    assert images[0] == Image(HELLO_UUID, "hello", "arm64", "/Users/dev/build/hello")
    assert images[2].arch == "arm64e"


def test_classic_ios_report_with_spaces_in_names_and_undashed_uuids() -> None:
    images = crashreport.read(str(CRASH_REPORTS / "universal-ios.crash"))
    assert [i.uuid for i in images] == [
        UNIVERSAL_UUIDS["arm64"],
        GREET_UUID,
        KERNEL_UUID,
        FOUNDATION_UUID,
        DYLD_UUID,
    ]
    helper = images[1]
    assert helper.name == "Universal Helper Kit"
    assert helper.arch == "arm64"
    assert helper.path.endswith("Universal Helper Kit.framework/Universal Helper Kit")


def test_classic_macos_report_versions_plus_signs_and_missing_uuids() -> None:
    images = crashreport.read(str(CRASH_REPORTS / "greet-macos-legacy.crash"))
    assert [(i.name, i.uuid) for i in images] == [
        ("com.example.hello", UNIVERSAL_UUIDS["x86_64"]),
        ("libgreet.dylib", GREET_UUID),
        ("Hello Plugin", HELLO_UUID),  # version `???`
        ("libdyld.dylib", LIBDYLD_UUID),
        ("libsystem_kernel.dylib", KERNEL_UUID),
    ]  # the line without a UUID and the `???` image are left out; the next section is not read
    assert images[0].path == "/Users/USER/build/Hello.app/Contents/MacOS/hello"


def test_legacy_ips_is_metadata_then_a_text_report() -> None:
    assert uuids(CRASH_REPORTS / "hello-ios14.ips") == [HELLO_UUID, LIBDYLD_UUID]


def test_format_is_told_by_content_not_extension(tmp_path: Path) -> None:
    swapped = tmp_path / "really-json.crash"
    swapped.write_bytes((CRASH_REPORTS / "hello-macos.ips").read_bytes())
    text = tmp_path / "really-text.ips"
    text.write_bytes((CRASH_REPORTS / "universal-ios.crash").read_bytes())
    assert uuids(swapped) == uuids(CRASH_REPORTS / "hello-macos.ips")
    assert uuids(text) == uuids(CRASH_REPORTS / "universal-ios.crash")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "0x104a5c000 - 0x104a5ffff hello (*) <4c4c449a-5555-3144-a19a-e6e643e6625e> /x/hello",
            ("hello", "", "/x/hello"),
        ),
        (
            "0x104a5c000 - 0x104a5ffff +hello arm64 (1.2 - 7) <4C4C449A55553144A19AE6E643E6625E> ???",
            ("hello", "arm64", "???"),
        ),
        (
            "   0x104a5c000 -        0x104a5ffff  My App ??? (???) <4c4c449a55553144a19ae6e643e6625e> /A/My App",
            ("My App", "", "/A/My App"),
        ),
    ],
)
def test_binary_image_line_variants(line: str, expected: tuple[str, str, str]) -> None:
    (image,) = crashreport.parse(f"Process: hello [1]\n\nBinary Images:\n{line}\n")
    assert image.uuid == HELLO_UUID
    assert (image.name, image.arch, image.path) == expected


def test_ips_as_one_json_object_and_images_without_uuid() -> None:
    body = (
        f'{{"usedImages": [{{"name": "a", "uuid": "{HELLO_UUID.lower()}"}},'
        f' {{"name": "b", "source": "A"}},'
        f' {{"path": "/usr/lib/libc.dylib", "uuid": "{GREET_UUID}"}}]}}'
    )
    images = crashreport.parse(body)
    assert [(i.name, i.uuid) for i in images] == [("a", HELLO_UUID), ("libc.dylib", GREET_UUID)]


def test_truncated_ips_is_named_truncated(tmp_path: Path) -> None:
    text = (CRASH_REPORTS / "hello-macos.ips").read_text()
    for cut in (len(text) // 2, text.index('"name" : "hello"') + 12, 40):
        report = tmp_path / "cut.ips"
        report.write_text(text[:cut])
        with pytest.raises(CrashReportError, match=r"cut\.ips: .* is truncated JSON"):
            crashreport.read(str(report))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a crash report"),
        (b"hello world\nthis is a note\n", "not a crash report"),
        (b"\xcf\xfa\xed\xfe\x0c\x00\x00\x01" + bytes(64), "not a crash report"),
        (b'{"bug_type":"288"}\n{"threads":[]}\n', r"no usedImages \(IPS bug_type 288\)"),
        (b'{"bug_type":"309"}\n{"usedImages": {"uuid": 1}}\n', "usedImages is not a list"),
        (b'{"bug_type":"309"}\n{"usedImages": [3]}\n', r"usedImages\[0\] is not an object"),
        (b'{"bug_type":"309"}\n{"usedImages": [{"uuid": "abc"}]}', "malformed uuid 'abc'"),
        (b'{"bug_type":"309"}\n{"usedImages": ] }\n', "the report body is malformed JSON"),
        (b"[1, 2]\n", "not a crash report"),
        (b'{"bug_type":"309"}\n["x"]\n', "not a crash report"),
    ],
)
def test_bad_reports_are_clear_errors(tmp_path: Path, content: bytes, message: str) -> None:
    report = tmp_path / "bad.ips"
    report.write_bytes(content)
    with pytest.raises(CrashReportError, match=message) as caught:
        crashreport.read(str(report))
    assert str(caught.value).startswith(f"{report}: ")
    assert "\n" not in str(caught.value)


def test_unreadable_report(tmp_path: Path) -> None:
    with pytest.raises(CrashReportError, match=r"missing\.crash: cannot read it: No such file"):
        crashreport.read(str(tmp_path / "missing.crash"))
    with pytest.raises(CrashReportError, match="cannot read it: Is a directory"):
        crashreport.read(str(tmp_path))


# Binary Images lines built to make a backtracking parser quadratic: long runs of spaces
# in the name, many version-like fields, many near-UUIDs. `{uuid}` is filled in per line.
HOSTILE_MIDDLES = [
    "a" + " " * 4000 + "x",
    "a" + " ???" * 990,
    "a" + " (" * 1990,
    "a" + " <4c4c449a55553144a19ae6e643e6625" * 110,
    "+a" + " (1 - 2)" * 490 + " arm64",
]
# A child parses about 1 MiB of such lines and one 1 MiB line; the old parser needed
# minutes for the first and hours for the second. The timeout only guards against a hang.
HOSTILE_CHILD = """
import sys
from dsymfind.apple import crashreport
images = crashreport.read(sys.argv[1])
print(len(images), images[0].name[:1], images[-1].arch, images[-1].path)
"""


def hostile_line(middle: str, number: int) -> str:
    return f"0x1000 - 0x1fff {middle} <{number:032x}> /hostile/{number}"


def test_hostile_image_lines_are_parsed_in_linear_time(tmp_path: Path) -> None:
    lines = [hostile_line(HOSTILE_MIDDLES[n % 5], n + 1) for n in range(250)]
    assert all(len(line) <= crashreport.MAX_IMAGE_LINE_CHARS for line in lines)
    huge = hostile_line("a" + " " * (1 << 20) + "x", 999)
    report = tmp_path / "hostile.crash"
    report.write_text("Binary Images:\n" + "\n".join([*lines, huge]) + "\n")
    done = subprocess.run(
        [sys.executable, "-c", HOSTILE_CHILD, str(report)],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Every line under the cap is an image (the last one an arm64 one); the huge one is not.
    assert done.stdout.split() == ["250", "a", "arm64", "/hostile/250"]


def test_long_names_version_fields_and_the_line_cap() -> None:
    spaced = hostile_line("+My" + " " * 3000 + "App arm64_32 (1.0 - 1) ??? (*)", 1)
    (image,) = crashreport.parse(f"Binary Images:\n{spaced}\n")
    assert (image.name, image.arch) == ("My" + " " * 3000 + "App", "arm64_32")
    too_long = hostile_line("a" * crashreport.MAX_IMAGE_LINE_CHARS, 2)
    assert crashreport.parse(f"Binary Images:\n{too_long}\n{spaced}\n") == [image]
    nameless = "0x1000 - 0x1fff  <00000000000000000000000000000003> /usr/lib/libz.dylib"
    (unnamed,) = crashreport.parse(f"Binary Images:\n{nameless}\n")
    assert unnamed.name == "libz.dylib"  # named by its path, as .ips images without a name are


@pytest.mark.parametrize(
    ("path", "apple"),
    [
        ("/bin/sleep", True),
        ("/sbin/launchd", True),
        ("/usr/bin/python3", True),
        ("/usr/sbin/sshd", True),
        ("/usr/libexec/rosetta/runtime", True),
        ("/usr/lib/dyld", True),
        ("/System/Library/Frameworks/AppKit.framework/Versions/C/AppKit", True),
        ("/Library/Apple/usr/libexec/oah/libRosettaRuntime", True),
        ("/private/preboot/Cryptexes/OS/System/Library/Frameworks/WebKit.framework/WebKit", True),
        ("/usr/local/bin/nvim", False),
        ("/usr/local/lib/libthird.dylib", False),
        ("/opt/homebrew/bin/qlcplus", False),
        ("/binaries/tool", False),
        ("/Users/dev/bin/sleep", False),
        ("/private/tmp/a.out", False),
        ("/Applications/Xcode.app/Contents/MacOS/Xcode", False),
    ],
)
def test_apple_images_by_path_in_both_forms(path: str, apple: bool) -> None:
    """One rule for .ips and .crash: the OS's programs and libraries, wherever they live."""
    metadata = '{"app_name":"x","bug_type":"309","is_first_party":1}\n'
    entry = {"source": "P", "uuid": HELLO_UUID, "path": path, "name": "x", "base": 4096}
    (from_ips,) = crashreport.parse(metadata + json.dumps({"usedImages": [entry]}))
    line = f"0x1000 - 0x1fff x arm64 <{HELLO_UUID.replace('-', '').lower()}> {path}"
    (from_text,) = crashreport.parse(f"Binary Images:\n{line}\n")
    assert (from_ips.apple, from_text.apple) == (apple, apple)


def test_without_a_path_an_image_is_apples_by_name_and_the_shared_cache_is_apples() -> None:
    assert crashreport.is_apple_image("", "libsystem_kernel.dylib")
    assert crashreport.is_apple_image("", "UIKitCore")
    assert not crashreport.is_apple_image("", "MyApp")
    # A path decides over a name; the dyld shared cache over a path.
    assert not crashreport.is_apple_image("/Users/dev/Foundation", "Foundation")
    assert crashreport.is_apple_image("/x/cached", "x", "S")


def test_what_is_read_to_the_end_is_all_of_it_in_order_and_nothing_past_the_limit(
    tmp_path: Path,
) -> None:
    """A file that grew since its size was taken is read on to its end (the size given is
    a stale fstat's: 8 bytes)."""
    pieces = [b"{" * 7, b"a" * 30_000, b"}" * 3]
    grown = tmp_path / "grown.ips"
    grown.write_bytes(b"".join(pieces))
    for limit, expected in ((30_010, b"".join(pieces)), (30_009, None)):
        fd = os.open(grown, os.O_RDONLY)
        try:
            assert crashreport._read_within(fd, 8, limit) == expected
        finally:
            os.close(fd)


def test_a_report_is_its_files_bytes_decoded(tmp_path: Path) -> None:
    report = tmp_path / "r.ips"
    report.write_bytes(b'{"bug_type":"309"}\n{"a": "\xc3\xa9 \xff"}\n')
    assert crashreport.read_text(str(report)) == '{"bug_type":"309"}\n{"a": "\u00e9 \ufffd"}\n'
    assert crashreport.read_text_if_small(str(report)) == crashreport.read_text(str(report))
