"""The spawned downloader's start: it reads its own words without argparse (what
processes.py writes comes back as written, any other words are logged and refused),
and a download over HTTP loads none of the libraries that cost it more than its work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import HELLO_UUID, LAYOUT_PATHS
from support.served import HELLO_DWARF

from dsymfind import processes
from dsymfind.fetch import downloader

# Each costs the downloader's start more than a small download's own work; the downloader
# needs none of them for a plain HTTP store.
NOT_ON_THE_DOWNLOAD_PATH = (
    "argparse",
    "filelock",
    "httpx",  # a proxy's only (stores/proxied.py)
    "dsymfind.stores.proxied",
    "httpcore",
    "h11",
    "http.cookiejar",
    "urllib.request",
    "botocore",
    "dsymfind.main",
    "ssl",  # with hashlib below, libcrypto: an http:// store publishing no digest needs neither
    "hashlib",
)

UUID = "6EE904C0-FD1E-A896-B3EB-A5E4C40C334C"


@pytest.mark.parametrize("ignore_negative_cache", [False, True])
@pytest.mark.parametrize("copy_executable", [False, True])
@pytest.mark.parametrize("tell", [None, 7])
def test_the_words_written_are_read_back(
    ignore_negative_cache: bool, copy_executable: bool, tell: int | None
) -> None:
    words = processes.downloader_words(
        UUID,
        ignore_negative_cache=ignore_negative_cache,
        copy_executable=copy_executable,
        answer_by=1796278796.25,
        tell=tell,
    )
    assert downloader._spawned_request(words) == {
        "uuid": UUID,
        "ignore_negative_cache": ignore_negative_cache,
        "copy_executable": copy_executable,
        "answer_by": 1796278796.25,
        "tell": tell,
    }


@pytest.mark.parametrize(
    "words",
    [
        [],
        [processes.DOWNLOAD_VERB],
        ["fetch", UUID],
        [processes.DOWNLOAD_VERB, "--help"],
        [processes.DOWNLOAD_VERB, UUID, "--unknown"],
        [processes.DOWNLOAD_VERB, UUID, processes.ANSWER_BY_FLAG],
        [processes.DOWNLOAD_VERB, UUID, processes.TELL_FLAG, "three"],
    ],
)
def test_other_words_are_not_a_request(words: list[str]) -> None:
    assert downloader._spawned_request(words) is None


def test_words_it_cannot_read_are_logged_and_refused(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert downloader.main([processes.DOWNLOAD_VERB, UUID, "--unknown"]) == 2
    assert capsys.readouterr() == ("", "")  # detached: its stdio is /dev/null
    log = (isolated_home / ".state" / "dsymfind" / "dsymfind.log").read_text()
    assert "not its words" in log and "--unknown" in log


def test_a_download_loads_none_of_the_costly_libraries(native_server: ss.SymbolServer) -> None:
    native_server.route(f"/{LAYOUT_PATHS['native']}", ss.body(HELLO_DWARF))
    words = processes.downloader_words(
        HELLO_UUID, ignore_negative_cache=False, copy_executable=False, answer_by=0.0
    )
    probe = (
        "import sys\n"
        "from dsymfind.fetch import downloader\n"
        f"status = downloader.main({words!r})\n"
        "print(status, ' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=os.environ
    )
    status, *loaded = done.stdout.split()
    assert status == "0", done.stdout
    assert native_server.count(f"/{LAYOUT_PATHS['native']}") == 1
    assert not set(loaded) & set(NOT_ON_THE_DOWNLOAD_PATH)
