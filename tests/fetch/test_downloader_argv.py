"""The spawned downloader reads its own words without argparse: what processes.py writes
comes back as written, and any other words go to the full command line."""

from __future__ import annotations

import pytest

from dsymfind import processes
from dsymfind.fetch import downloader

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
def test_other_words_are_left_to_the_command_line(words: list[str]) -> None:
    assert downloader._spawned_request(words) is None


def test_words_it_cannot_read_get_the_command_lines_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        downloader.main([processes.DOWNLOAD_VERB, UUID, "--unknown"])
    assert exited.value.code not in (0, None)
    assert "--unknown" in capsys.readouterr().err
