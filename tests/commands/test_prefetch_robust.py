"""`dsymfind prefetch` against hostile, odd and huge reports, and Apple's own images.

Real processes for the command line, a real loopback server where something is fetched.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.crash_reports import (
    CRASH_REPORTS,
    DYLD_UUID,
    FOUNDATION_UUID,
    KERNEL_UUID,
    LIBDYLD_UUID,
)
from support.fixtures import GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS
from support.processes import run_cli
from support.served import native_tree, server_env, url_path

from dsymfind.apple import crashreport
from dsymfind.apple.crashreport import CrashReportError

METADATA = '{"bug_type":"309","name":"hello"}\n'
# Deeper than any JSON parser recursion limit; a real report nests about ten levels.
DEEP = 100_000
# Over CPython's limit for converting digits to an int (4300).
LONG_NUMBER = "7" * 5000
# What a per-UUID cost of 30 ms would exceed for this many images (it took 33-53 s); without
# a server configured, nothing is started per image and the run takes well under a second.
MANY_IMAGES = 2000
MANY_IMAGES_WALL_SECONDS = 20


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ss.SymbolServer]:
    """The fixture dSYMs in a native UUID tree; Apple's libraries are absent."""
    with ss.SymbolServer(native_tree(tmp_path / "served")) as running:
        yield running


def write_ips(path: Path, images: list[dict[str, str]]) -> Path:
    path.write_text(METADATA + json.dumps({"usedImages": images}))
    return path


def own_image(uuid: str, name: str) -> dict[str, str]:
    return {
        "source": "P",
        "arch": "arm64",
        "uuid": uuid.lower(),
        "name": name,
        "path": f"/x/{name}",
    }


def mine(tmp_path: Path) -> Path:
    """A report naming hello and libgreet, both served."""
    images = [own_image(HELLO_UUID, "hello"), own_image(GREET_UUID, "libgreet.dylib")]
    return write_ips(tmp_path / "mine.ips", images)


# 1. A report that breaks the JSON parser is that report's own error.

HOSTILE_JSON = {
    "nested-body.ips": METADATA + '{"usedImages": ' + "[" * DEEP,
    "nested-metadata.ips": '{"bug_type": ' + "[" * DEEP + "\n{}\n",
    "long-number.ips": METADATA + '{"uptime": ' + LONG_NUMBER + ', "usedImages": []}\n',
    "long-number-metadata.ips": '{"bug_type": ' + LONG_NUMBER + "}\n{}\n",
}
HOSTILE_MESSAGES = {
    "nested-body.ips": "the report body is nested too deeply for a crash report",
    "nested-metadata.ips": "the IPS metadata line is nested too deeply for a crash report",
    "long-number.ips": "the report body holds a number too long for a crash report",
    "long-number-metadata.ips": "the IPS metadata line holds a number too long for a crash report",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_JSON))
def test_json_the_parser_cannot_take_is_a_clear_error(tmp_path: Path, name: str) -> None:
    report = tmp_path / name
    report.write_text(HOSTILE_JSON[name])
    with pytest.raises(CrashReportError) as caught:
        crashreport.read(str(report))
    assert str(caught.value) == f"{report}: {HOSTILE_MESSAGES[name]}"


def test_nesting_a_real_report_could_have_still_parses() -> None:
    body = {"usedImages": [own_image(HELLO_UUID, "hello")], "deep": [[[[[[[[[[{}]]]]]]]]]]}
    (image,) = crashreport.parse(METADATA + json.dumps(body))
    assert image.uuid == HELLO_UUID


def test_a_hostile_report_does_not_stop_the_others(server: ss.SymbolServer, tmp_path: Path) -> None:
    hostile = []
    for name, text in sorted(HOSTILE_JSON.items()):
        (tmp_path / name).write_text(text)
        hostile.append(tmp_path / name)
    args = [str(hostile[0]), str(mine(tmp_path)), *map(str, hostile[1:])]

    done = run_cli("prefetch", *args, env=server_env(server))

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"dsymfind: {path}: {HOSTILE_MESSAGES[path.name]}" for path in hostile
    ]
    lines = done.stdout.splitlines()
    assert lines[:2] == [
        "1 of 5 reports read, 2 images with a UUID",
        "found: 2 (0 already here, 2 fetched)",
    ]


# 2. Only regular files are read, and only up to a size no crash report reaches.


def test_fifos_devices_sockets_and_directories_are_refused_by_name(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.ips"
    os.mkfifo(fifo)
    link = tmp_path / "link.ips"
    link.symlink_to(fifo)
    sock_path = tmp_path / "s.ips"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(sock_path))
    listening.listen(1)
    good = mine(tmp_path)
    try:
        # Without the fix the FIFO blocks the open forever: the timeout turns that into a failure.
        done = run_cli(
            "prefetch",
            *map(str, (fifo, link, "/dev/zero", sock_path, tmp_path, good)),
            timeout=30,
        )
    finally:
        listening.close()

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"dsymfind: {fifo}: cannot read it: Is a FIFO",
        f"dsymfind: {link}: cannot read it: Is a FIFO",
        "dsymfind: /dev/zero: cannot read it: Is a character device",
        f"dsymfind: {sock_path}: cannot read it: Is a socket",
        f"dsymfind: {tmp_path}: cannot read it: Is a directory",
    ]
    assert done.stdout.splitlines()[0] == "1 of 6 reports read, 2 images with a UUID"


def test_a_report_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.ips"
    with open(huge, "wb") as f:
        f.truncate(crashreport.MAX_REPORT_BYTES + 1)  # sparse: nothing to read, if it were read
    with pytest.raises(CrashReportError, match=r"huge\.ips: larger than any crash report"):
        crashreport.read(str(huge))


def test_the_cap_is_far_above_a_real_report() -> None:
    biggest_fixture = max(p.stat().st_size for p in CRASH_REPORTS.iterdir())
    assert crashreport.MAX_REPORT_BYTES >= 4 << 20 > 100 * biggest_fixture


# 3. A large report costs little per image.


def many_images_report(path: Path, count: int) -> Path:
    images = [
        {
            "source": "P",
            "arch": "arm64",
            "uuid": f"00001234-0000-0000-0000-{n + 1:012x}",
            "name": f"lib{n}.dylib",
            "path": f"/Users/dev/build/lib{n}.dylib",
        }
        for n in range(count)
    ]
    return write_ips(path, images)


def test_a_large_report_without_servers_takes_seconds(tmp_path: Path) -> None:
    report = many_images_report(tmp_path / "big.ips", MANY_IMAGES)
    started = time.monotonic()
    done = run_cli("prefetch", str(report), timeout=300)
    took = time.monotonic() - started

    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"1 of 1 reports read, {MANY_IMAGES} images with a UUID"
    assert f"failed: {MANY_IMAGES}" in lines
    assert lines[-1].endswith("no server configured")
    assert took < MANY_IMAGES_WALL_SECONDS, f"{MANY_IMAGES} images took {took:.1f} s"


def test_without_servers_nothing_is_locked_or_recorded(tmp_path: Path, cache_dir: Path) -> None:
    report = many_images_report(tmp_path / "few.ips", 3)
    done = run_cli("prefetch", "--json", str(report))
    assert done.returncode == 1
    states = {(i["state"], i["message"]) for i in json.loads(done.stdout)["images"]}
    assert states == {("failed", "no server configured")}
    for folder in ("downloads", "locks", "tmp"):
        assert not list((cache_dir / folder).glob("*")), folder


# 4. The log: set up once, however many threads ask at once.

LOG_RACE = """
import sys, threading
from dsymfind.log import get_logger
log_file, count = sys.argv[1], int(sys.argv[2])
start = threading.Barrier(count)
def work(n):
    start.wait()
    get_logger(log_file).info("line %d", n)
threads = [threading.Thread(target=work, args=(n,)) for n in range(count)]
for t in threads: t.start()
for t in threads: t.join()
print(len(get_logger(log_file).handlers))
"""


def test_threads_setting_up_the_logger_at_once_log_each_line_once(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "dsymfind.log"
    count = 16
    for _ in range(5):  # the race is timing-dependent: a few rounds make it show
        done = subprocess.run(
            [sys.executable, "-c", LOG_RACE, str(log_file), str(count)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert done.stdout.split() == ["1"]
    lines = [line.split(" ", 4)[-1] for line in log_file.read_text().splitlines()]
    assert sorted(lines) == sorted(f"line {n}" for n in range(count) for _ in range(5))


def test_prefetch_logs_each_download_once(server: ss.SymbolServer, tmp_path: Path) -> None:
    reports = [mine(tmp_path), CRASH_REPORTS / "universal-ios.crash"]
    done = run_cli("prefetch", *map(str, reports), env=server_env(server))
    assert done.returncode == 0, done.stdout + done.stderr
    log = Path(os.environ["XDG_STATE_HOME"]) / "dsymfind" / "dsymfind.log"
    ended = [line for line in log.read_text().splitlines() if ": done: " in line]
    assert sorted(line.split()[4] for line in ended) == sorted(
        [HELLO_UUID + ":", GREET_UUID + ":", UNIVERSAL_UUIDS["arm64"] + ":"]
    )


# 5. Apple's own images are skipped unless --all.


def test_reports_mark_apple_images() -> None:
    ips = {i.uuid: i.apple for i in crashreport.read(str(CRASH_REPORTS / "hello-macos.ips"))}
    assert ips == {HELLO_UUID: False, GREET_UUID: False, KERNEL_UUID: True, DYLD_UUID: True}
    text = {i.uuid: i.apple for i in crashreport.read(str(CRASH_REPORTS / "universal-ios.crash"))}
    assert text == {
        UNIVERSAL_UUIDS["arm64"]: False,
        GREET_UUID: False,
        KERNEL_UUID: True,
        FOUNDATION_UUID: True,
        DYLD_UUID: True,
    }
    legacy = crashreport.read(str(CRASH_REPORTS / "hello-ios14.ips"))
    assert [(i.uuid, i.apple) for i in legacy] == [(HELLO_UUID, False), (LIBDYLD_UUID, True)]


@pytest.mark.parametrize(
    ("source", "path", "apple"),
    [
        ("S", "/private/preboot/Cryptexes/OS/usr/lib/libSafari.dylib", True),  # shared cache
        ("C", "/x/cached", True),  # a shared cache library
        ("P", "/Library/Apple/System/Library/Extensions/X.kext/X", True),
        ("P", "/System/Library/Frameworks/AppKit.framework/AppKit", True),
        ("P", "/usr/lib/libobjc.A.dylib", True),
        ("P", "/usr/local/lib/libthird.dylib", False),
        ("P", "/Library/Frameworks/Vendor.framework/Vendor", False),
        ("P", "/Applications/Xcode.app/Contents/MacOS/Xcode", False),
        ("P", "", False),
    ],
)
def test_what_counts_as_apple_in_an_ips(source: str, path: str, apple: bool) -> None:
    entry = {**own_image(HELLO_UUID, "x"), "source": source, "path": path}
    (image,) = crashreport.parse(METADATA + json.dumps({"usedImages": [entry]}))
    assert image.apple is apple


def test_apple_images_are_skipped_and_counted(server: ss.SymbolServer, tmp_path: Path) -> None:
    reports = [CRASH_REPORTS / "hello-macos.ips", CRASH_REPORTS / "universal-ios.crash"]

    done = run_cli("prefetch", *map(str, reports), env=server_env(server))

    assert done.returncode == 0, done.stdout  # the only images nobody has are Apple's
    lines = done.stdout.splitlines()
    assert lines[0] == "2 of 2 reports read, 6 images with a UUID"
    assert lines[1] == "found: 3 (0 already here, 3 fetched)"
    assert lines[-1] == "3 Apple system images skipped (--all includes them)"
    assert not any(line.startswith(("not found", "failed")) for line in lines)
    for uuid in (KERNEL_UUID, DYLD_UUID, FOUNDATION_UUID):
        assert server.count(url_path(uuid)) == 0


def test_all_includes_apple_images(server: ss.SymbolServer) -> None:
    report = CRASH_REPORTS / "hello-macos.ips"

    done = run_cli("prefetch", "--all", "--json", str(report), env=server_env(server))

    assert done.returncode == 1  # Apple's libraries are not on the server
    result = json.loads(done.stdout)
    states = {image["uuid"]: image["state"] for image in result["images"]}
    assert states == {
        HELLO_UUID: "found",
        GREET_UUID: "found",
        KERNEL_UUID: "not-found",
        DYLD_UUID: "not-found",
    }
    assert result["apple_skipped"] == []


def test_json_lists_the_skipped_apple_images(server: ss.SymbolServer) -> None:
    report = CRASH_REPORTS / "hello-ios14.ips"
    done = run_cli("prefetch", "--json", str(report), env=server_env(server))
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert [image["uuid"] for image in result["images"]] == [HELLO_UUID]
    assert result["apple_skipped"] == [
        {
            "uuid": LIBDYLD_UUID,
            "name": "libdyld.dylib",
            "arch": "arm64e",
            "path": "/usr/lib/system/libdyld.dylib",
        }
    ]
