"""Two publishers racing on one key of a folder store: the first file stays, the second is a
conflict. The interleaving is forced, not hoped for: the second publisher is paused after
it found the key free and wrote its complete temp file, the first publishes the same key
meanwhile, and then the second tries to give its file the key's name."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.fixtures import FIXTURES, LAYOUT_PATHS, dwarf_of

from dsymfind.publish.opened import OpenedFile
from dsymfind.stores import folder
from dsymfind.stores.writers import CONFLICT, PUBLISHED, Outcome

KEY = LAYOUT_PATHS["unified"]  # hello's dSYM
FIRST = dwarf_of(FIXTURES / "hello.dSYM")  # the first publisher's build


def another_build(folder: Path) -> Path:
    """hello's DWARF file with one byte of its padding changed: the same UUID, other bytes,
    as a second build of one commit gives without a reproducible toolchain."""
    data = bytearray(FIRST.read_bytes())
    assert data[4000] == 0
    data[4000] = 1
    path = folder / "hello"
    path.write_bytes(bytes(data))
    return path


def test_the_publisher_that_names_the_key_second_gets_a_conflict_and_the_first_file_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    first, second = folder.FolderWriter(str(store)), folder.FolderWriter(str(store))
    outcomes: dict[str, Outcome] = {}
    copy_synced = folder._copy_synced
    paused: list[str] = []

    def first_publishes_meanwhile(body: OpenedFile, tmp: str) -> None:
        """The second publisher's copy, then (once) the whole of the first one's put."""
        copy_synced(body, tmp)
        if not paused:
            paused.append(tmp)
            with OpenedFile(str(FIRST)) as theirs:
                outcomes["first"] = first.put(KEY, theirs)

    monkeypatch.setattr(folder, "_copy_synced", first_publishes_meanwhile)
    with OpenedFile(str(another_build(tmp_path))) as ours:
        outcomes["second"] = second.put(KEY, ours)

    assert paused and paused[0].startswith(str(store))  # the second one had written its file
    assert outcomes["first"].state == PUBLISHED
    assert outcomes["second"].state == CONFLICT, outcomes["second"]
    assert "holds other bytes" in str(outcomes["second"].message)
    assert (store / KEY).read_bytes() == FIRST.read_bytes()
    assert [p.name for p in (store / KEY).parent.iterdir()] == ["debuginfo"]  # no temp left
