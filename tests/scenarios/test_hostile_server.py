"""A hostile symbol server, end to end: for each fault, the real helper answers by its
deadline with a valid plist, nothing bad reaches the cache, and the log says what happened."""

from __future__ import annotations

import gzip
import io
import os
import stat
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, dwarf_of, write_config
from support.negative import negative_markers
from support.processes import run_helper, settled_record

from dsymfind.cache import check, records
from dsymfind.paths import CachePaths
from dsymfind.uuids import tree_entry, tree_parts

HELLO = dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
GREET = dwarf_of(FIXTURES / "libgreet.dylib.dSYM").read_bytes()
KEY = "/" + "/".join(tree_parts(HELLO_UUID))
HEX = HELLO_UUID.replace("-", "")
HELPER_TIMEOUT = 1.5
# Process start-up on a loaded 2-core machine; the deadline itself is HELPER_TIMEOUT.
START_UP_ALLOWANCE = 2.5
DOWNLOAD_TIMEOUT = 3
MAX_DOWNLOAD = 1 << 20
TOKEN = "Bearer hostile-test-token"


def zipped(entries: list[tuple[str | zipfile.ZipInfo, bytes]]) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate on purpose
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in entries:
                archive.writestr(name, data)
    return out.getvalue()


def bundle_entries(
    extra: list[tuple[str | zipfile.ZipInfo, bytes]],
) -> list[tuple[str | zipfile.ZipInfo, bytes]]:
    return [("hello.dSYM/Contents/Resources/DWARF/hello", HELLO), *extra]


def symlink_entry(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@dataclass
class Case:
    route: Callable[[ss.SymbolServer, ss.SymbolServer], ss.Route]
    log: str  # what the log must say
    cached: bool = False  # a benign variant: the right dSYM ends up in the cache


CASES = {
    "wrong-uuid": Case(lambda a, b: ss.body(GREET), "does not carry"),
    "truncated": Case(lambda a, b: ss.truncated(HELLO, 1000), "got 1000 of 9189 bytes"),
    "longer-than-content-length": Case(
        lambda a, b: ss.overlong(HELLO, b"trailing junk" * 100),
        "sent more than the 9189 bytes it announced",
    ),
    "100-continue-every-second": Case(
        lambda a, b: ss.informational_forever(1.0), "gave up after 3 s"
    ),
    "headers-one-byte-per-second": Case(lambda a, b: ss.trickled_headers(1.0), "gave up after 3 s"),
    "html-error-page-200": Case(
        lambda a, b: ss.body(b"<html><body>Sign in</body></html>", content_type="text/html"),
        "answered a web page (text/html)",
    ),
    "endless-body": Case(lambda a, b: ss.endless(), "over the 1048576-byte limit"),
    "one-byte-per-second": Case(lambda a, b: ss.slow(HELLO, 1, 1.0), "gave up after"),
    "no-response-after-headers": Case(lambda a, b: ss.stall(len(HELLO)), "gave up after 3 s"),
    "reset-mid-body": Case(lambda a, b: ss.reset(HELLO, 2000), "reset"),
    "redirect-loop": Case(lambda a, b: ss.redirect_loop(), "redirect"),
    "redirect-to-another-host": Case(
        lambda a, b: ss.redirect(f"{b.url}/elsewhere"), "done", cached=True
    ),
    "401": Case(lambda a, b: ss.body(b"no", 401, content_type="text/plain"), "401"),
    "403": Case(lambda a, b: ss.body(b"no", 403, content_type="text/plain"), "403"),
    "gzip-bomb": Case(
        lambda a, b: ss.body(gzip.compress(bytes(64 << 20), compresslevel=9)), "more than"
    ),
    "zip-slip": Case(
        lambda a, b: ss.body(zipped(bundle_entries([("../../evil.py", b"print('pwned')")]))),
        "climbs out",
    ),
    "zip-absolute-path": Case(
        lambda a, b: ss.body(zipped(bundle_entries([("/etc/evil", b"x")]))), "absolute path"
    ),
    "symlink-in-zip": Case(
        lambda a, b: ss.body(
            zipped(
                bundle_entries(
                    [(symlink_entry("hello.dSYM/Contents/link", "/etc/passwd"), b"/etc/passwd")]
                )
            )
        ),
        "is a symbolic link",
    ),
    "thousands-of-entries": Case(
        lambda a, b: ss.body(zipped(bundle_entries([(f"junk/{i}", b"") for i in range(10_001)]))),
        "entries",
    ),
    "duplicate-entries": Case(
        lambda a, b: ss.body(
            zipped(bundle_entries([("hello.dSYM/Contents/Resources/DWARF/hello", GREET)]))
        ),
        "twice",
    ),
    "bundle-with-python-scripts": Case(
        lambda a, b: ss.body(
            zipped(
                bundle_entries(
                    [
                        (
                            "hello.dSYM/Contents/Resources/Python/hello.py",
                            b"import os\nos.system('touch /tmp/pwned')\n",
                        )
                    ]
                )
            )
        ),
        "left out 1 script file(s) under Contents/Resources/Python",
        cached=True,
    ),
}


@pytest.fixture
def servers() -> Iterator[tuple[ss.SymbolServer, ss.SymbolServer]]:
    with ss.SymbolServer() as hostile, ss.SymbolServer() as other:
        other.route("/elsewhere", ss.body(HELLO))
        yield hostile, other


def settle(cache: Path) -> dict[str, object]:
    return settled_record(cache, HELLO_UUID, timeout=DOWNLOAD_TIMEOUT * 4 + 10)


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_answer(
    name: str,
    servers: tuple[ss.SymbolServer, ss.SymbolServer],
    config_file: Path,
    cache_dir: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = CASES[name]
    hostile, other = servers
    hostile.route(KEY, case.route(hostile, other))
    monkeypatch.setenv("SYMBOL_TOKEN", TOKEN)
    write_config(
        config_file,
        f"timeout = {HELPER_TIMEOUT}\ndownload_timeout = {DOWNLOAD_TIMEOUT}\n"
        f"max_download_bytes = {MAX_DOWNLOAD}\n"
        f"[[servers]]\nurl = '{hostile.url}/'\nlayout = 'native'\n"
        "headers = { Authorization = '${SYMBOL_TOKEN}' }\n",
    )
    started = time.monotonic()
    run = run_helper(HELLO_UUID)  # holds the plist, stderr and exit-status contract itself
    assert time.monotonic() - started < HELPER_TIMEOUT + START_UP_ALLOWANCE
    answer = run.plist.get(HELLO_UUID, {})
    assert set(answer) <= {"DBGError", "DBGDSYMPath", "DBGArchitecture"}
    record = settle(cache_dir)

    log = (isolated_home / ".state" / "dsymfind" / "dsymfind.log").read_text()
    assert case.log in log, log[-2000:]
    assert TOKEN.split()[1] not in log
    entry = cache_dir / "dsyms" / HEX
    if case.cached:
        assert record["state"] == records.DONE
        (published,) = entry.glob("*.dSYM/Contents/Resources/DWARF/*")
        assert published.read_bytes() == HELLO
        assert not list(entry.rglob("Python"))  # scripts from the network are not published
        assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(published)
    else:
        assert record["state"] == records.FAILED
        assert not entry.exists()
        assert not os.path.lexists(tree_entry(str(cache_dir / "uuids"), HELLO_UUID))
        assert "DBGDSYMPath" not in run_helper(HELLO_UUID).plist.get(HELLO_UUID, {})
    # The second lookup may have started a download of its own: its staging is no leftover
    # until it has ended (on a loaded machine it outlives the helper's deadline).
    settle(cache_dir)
    assert list((cache_dir / "tmp").iterdir()) == []
    assert negative_markers(cache_dir) == []  # a fault is not "not found"
    assert not Path("/tmp/pwned").exists()
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()
    assert report.count(check.INVALID) == 0
    # The other host never saw the token meant for the hostile one.
    assert all("authorization" not in r.headers for r in other.requests)


def test_a_redirect_to_another_host_carries_no_credentials(
    servers: tuple[ss.SymbolServer, ss.SymbolServer],
    config_file: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hostile, other = servers
    hostile.route(KEY, ss.redirect(f"{other.url}/elsewhere"))
    monkeypatch.setenv("SYMBOL_TOKEN", TOKEN)
    write_config(
        config_file,
        f"timeout = 10\n[[servers]]\nurl = '{hostile.url}/'\nlayout = 'native'\n"
        "headers = { Authorization = '${SYMBOL_TOKEN}' }\n",
    )
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert hostile.requests[0].headers["authorization"] == TOKEN
    assert other.requests and all("authorization" not in r.headers for r in other.requests)
