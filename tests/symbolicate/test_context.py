"""symbolicate/context.py: which files a frame's context may come from, how much of them is
read, and how the lines are written below a frame."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dsymfind.errors import DsymfindError
from dsymfind.symbolicate import context
from dsymfind.symbolicate.context import SourceMap
from dsymfind.symbolicate.engine import Context, Located
from dsymfind.symbolicate.model import Frame, Report, ReportImage, Thread

SOURCE = "".join(f"line {n}\n" for n in range(1, 11))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "Sources").mkdir(parents=True)
    (tmp_path / "root" / "Sources" / "a.c").write_text(SOURCE)
    return tmp_path / "root"


def test_a_file_inside_the_root_is_read_whole(root: Path) -> None:
    assert context.read_lines(str(root), "Sources/a.c") == SOURCE.splitlines()


def test_dot_dot_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.c").write_text("secret\n")
    assert context.read_lines(str(root), "../secret.c") is None
    assert context.read_lines(str(root), "Sources/../../secret.c") is None
    # Up and down again inside it is the same file.
    assert context.read_lines(str(root), "Sources/../Sources/a.c") == SOURCE.splitlines()


def test_symlinks_leading_out_are_refused_those_inside_followed(root: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.c").write_text("secret\n")
    (root / "Sources" / "out.c").symlink_to(tmp_path / "secret.c")
    (root / "linked").symlink_to(tmp_path)  # a folder on the way that leads out
    (root / "Sources" / "same.c").symlink_to("a.c")
    assert context.read_lines(str(root), "Sources/out.c") is None
    assert context.read_lines(str(root), "linked/secret.c") is None
    assert context.read_lines(str(root), "Sources/same.c") == SOURCE.splitlines()


def test_a_fifo_or_a_device_is_not_read_nor_waited_on(root: Path) -> None:
    os.mkfifo(root / "Sources" / "fifo.c")
    found: list[object] = []
    reader = threading.Thread(
        target=lambda: found.append(context.read_lines(str(root), "Sources/fifo.c")), daemon=True
    )
    reader.start()
    reader.join(10)
    assert found == [None]  # a blocking open would still be waiting
    (root / "dev").symlink_to("/dev")  # even through a link inside: /dev is outside
    assert context.read_lines(str(root), "dev/zero") is None
    assert context.read_lines("/dev", "zero") is None  # a root that maps to devices


def test_a_folder_or_a_missing_file_gives_nothing(root: Path) -> None:
    assert context.read_lines(str(root), "Sources") is None
    assert context.read_lines(str(root), "") is None
    assert context.read_lines(str(root), "Sources/missing.c") is None


def test_at_most_max_file_bytes_are_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "MAX_FILE_BYTES", 20)
    # "line 1\n" .. "line 3\n" is 21 bytes: the third line is cut, so not given.
    assert context.read_lines(str(root), "Sources/a.c") == ["line 1", "line 2"]


def test_control_characters_are_shown_and_long_lines_cut(root: Path) -> None:
    text = "a\x1b[31mred\tb\r\n" + "x" * (context.MAX_LINE_CHARS + 10) + "\n"
    (root / "Sources" / "odd.c").write_text(text, newline="")
    first, long = context.read_lines(str(root), "Sources/odd.c") or []
    assert first == "a\ufffd[31mred\tb"
    assert long == "x" * context.MAX_LINE_CHARS + "…"


def test_source_maps_are_parsed_and_tried_longest_first() -> None:
    wanted = context.wanted(3, ["/ci=/here", "/ci/app/=~/app", "/a=b=c"])
    assert wanted is not None
    assert wanted.lines == 3
    assert wanted.maps == (
        SourceMap("/ci/app", os.path.expanduser("~/app")),
        SourceMap("/ci", "/here"),
        SourceMap("/a", "b=c"),
    )
    assert context.wanted(None, []) is None
    assert context.wanted(10_000, []) == context.Wanted(context.MAX_CONTEXT, ())
    for bad in ("/ci", "=/here", "/ci="):
        with pytest.raises(DsymfindError, match="BUILD=LOCAL"):
            context.wanted(1, [bad])


def _report(image: ReportImage, *locations: Located, named: bool = False) -> Report:
    frame = Frame(0, 0x10, 0, named=named)
    frame.symbols = list(locations)
    return Report("crash", [image], [Thread(0, True, [frame])])


APP = ReportImage(None, "App", "arm64", 0x1000, False)
SYSTEM = ReportImage(None, "libsystem_c.dylib", "arm64", 0x2000, True)


def test_only_app_frames_looked_up_get_context(root: Path) -> None:
    wanted = context.Wanted(1, (SourceMap("/build", str(root)),))
    at = Located("f", 0, "/build/Sources/a.c", 5, False)
    elsewhere = Located("g", 0, "/other/Sources/a.c", 5, False)
    app, system = _report(APP, at, elsewhere), _report(SYSTEM, at)
    given = _report(APP, at, named=True)
    context.attach([app, system, given], wanted, _settings(root))
    assert app.frames()[0].symbols == [
        at._replace(context=Context(4, ("line 4", "line 5", "line 6"))),
        elsewhere,  # outside every mapped root
    ]
    assert system.frames()[0].symbols == [at]
    relative = Located("f", 0, "./Sources/a.c", 2, False)  # -ffile-compilation-dir=.
    built_here = _report(APP, relative)
    context.attach([built_here], context.Wanted(0, (SourceMap(".", str(root)),)), _settings(root))
    assert built_here.frames()[0].symbols[0].context == Context(2, ("line 2",))
    assert given.frames()[0].symbols == [at]


def test_a_line_past_the_end_gets_nothing_and_the_edges_are_clipped(root: Path) -> None:
    wanted = context.Wanted(2, (SourceMap("/build", str(root)),))
    past = Located("f", 0, "/build/Sources/a.c", 11, False)
    first = Located("f", 0, "/build/Sources/a.c", 1, False)
    last = Located("f", 0, "/build/Sources/a.c", 10, False)
    report = _report(APP, past, first, last)
    context.attach([report], wanted, _settings(root))
    found = [located.context for located in report.frames()[0].symbols]
    assert found == [
        None,
        Context(1, ("line 1", "line 2", "line 3")),
        Context(8, ("line 8", "line 9", "line 10")),
    ]


def test_text_lines_mark_the_frame_line_and_never_start_with_a_digit() -> None:
    located = Located("f", 0, "a.c", 10, False, Context(8, ("x = 1;", "", "return 0x12345678;")))
    lines = context.text_lines(located)
    assert lines == [
        "     |  8  x = 1;",
        "     |  9",
        "    -> 10  return 0x12345678;",
    ]
    assert all(line.strip() and not line.strip()[0].isdigit() for line in lines)
    assert context.text_lines(located._replace(context=None)) == []


def _settings(tmp_path: Path) -> dict[str, object]:
    """Enough settings for a run with no UUID: no lookup is made."""
    return {"cache_dir": str(tmp_path / "cache"), "source_checkouts": []}
