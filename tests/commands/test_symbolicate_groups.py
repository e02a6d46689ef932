"""`dsymfind symbolicate --group`: reports grouped after symbolication, without fetching
when they are named already; the table, JSON and the HTML page (checked in headless
Chromium: it loads with no console error, and its groups and counts are the JSON's)."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.crash_groups import (
    LEAF_CRASH,
    LEAF_RETURN,
    MAIN_RETURN,
    NORM_OF,
    TRIGGER_RETURN,
    named_ips,
    raw_ips,
    variations,
)
from support.fixtures import write_config
from support.symbolication import crashy_search_path, symbolicate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCRIPT = "<script>alert(1)</script>"


def write_all(folder: Path, texts: list[str]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, text in enumerate(texts):
        path = folder / f"r{n:05d}.ips"
        path.write_text(text)
        paths.append(str(path))
    return paths


def grouped(*argv: str, capsys: pytest.CaptureFixture[str]) -> dict:
    status, out, err = symbolicate("--group", "--format", "json", *argv, capsys=capsys)
    assert status == 0, err
    return json.loads(out)


def test_reports_are_grouped_by_ending_and_top_app_frames_once_symbolicated(
    tmp_path, config_file, capsys
):
    crashy_search_path(tmp_path, config_file)
    reports = write_all(
        tmp_path / "in",
        [
            raw_ips([LEAF_CRASH, TRIGGER_RETURN, MAIN_RETURN], version="1.0", build="7"),
            raw_ips([LEAF_CRASH, TRIGGER_RETURN, MAIN_RETURN], version="1.1", build="8"),
            raw_ips([LEAF_CRASH, TRIGGER_RETURN], version="1.1", build="8"),
            raw_ips([NORM_OF, LEAF_RETURN, TRIGGER_RETURN], version="1.1", build="8"),
            raw_ips([LEAF_CRASH, TRIGGER_RETURN], exception="EXC_BREAKPOINT"),
        ],
    )
    data = grouped(*reports, capsys=capsys)
    assert data["reports"] == 5
    summary = [
        (g["signature"]["exception"], g["signature"]["frames"], g["count"]) for g in data["groups"]
    ]
    # twice is inlined into leaf: both count, so main falls outside the top three.
    assert summary == [
        ("EXC_BAD_ACCESS (SIGSEGV)", ["twice", "leaf", "trigger"], 3),
        ("EXC_BAD_ACCESS (SIGSEGV)", ["norm_of", "leaf", "trigger"], 1),
        ("EXC_BREAKPOINT (SIGTRAP)", ["twice", "leaf", "trigger"], 1),
    ]
    first = data["groups"][0]
    assert first["versions"] == [
        {"version": "1.1", "build": "8", "count": 2},
        {"version": "1.0", "build": "7", "count": 1},
    ]
    stack = first["representative"]["frames"]
    assert [(f["symbol"], f["file"], f["line"]) for f in stack][:2] == [
        ("twice", stack[0]["file"], 10),
        ("leaf", stack[1]["file"], 14),
    ]
    assert stack[0]["file"].endswith("crashy.c")


def test_group_frames_sets_how_many_app_frames_sign(tmp_path, config_file, capsys):
    crashy_search_path(tmp_path, config_file)
    reports = write_all(
        tmp_path / "in",
        [
            raw_ips([LEAF_CRASH, TRIGGER_RETURN, MAIN_RETURN]),
            raw_ips([LEAF_CRASH, LEAF_RETURN, MAIN_RETURN]),
        ],
    )
    one = grouped("--group-frames", "2", *reports, capsys=capsys)
    assert [(g["signature"]["frames"], g["count"]) for g in one["groups"]] == [
        (["twice", "leaf"], 2)
    ]
    three = grouped(*reports, capsys=capsys)
    assert len(three["groups"]) == 2


def test_symbolicated_reports_are_grouped_without_asking_a_server(tmp_path, config_file, capsys):
    texts = [
        named_ips([("twice", True), "leaf", "trigger"], offset=0, apple_first=True),
        named_ips([("twice", True), "leaf", "trigger"], offset=12, version="2.0", build="9"),
        named_ips(["norm_of", "leaf", "trigger"], captured="2026-12-01 09:00:00.0000 +0000"),
        named_ips(["norm_of", "leaf", "trigger"], captured="2026-11-29 09:00:00.0000 +0100"),
    ]
    reports = write_all(tmp_path / "in", texts)
    with ss.SymbolServer(tmp_path / "server") as server:
        write_config(
            config_file, f"timeout = 10\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )
        data = grouped(*reports, capsys=capsys)
        assert server.requests == []
    # Offsets and Apple's frames on top are no part of a signature.
    assert [(g["signature"]["frames"], g["count"]) for g in data["groups"]] == [
        (["twice", "leaf", "trigger"], 2),
        (["norm_of", "leaf", "trigger"], 2),
    ]
    assert data["groups"][0]["versions"] == [
        {"version": "1.0", "build": "1", "count": 1},
        {"version": "2.0", "build": "9", "count": 1},
    ]
    assert data["groups"][1]["first_seen"] == "2026-11-29T08:00:00Z"
    assert data["groups"][1]["last_seen"] == "2026-12-01T09:00:00Z"


def test_the_table_puts_the_largest_group_first(tmp_path, capsys):
    reports = write_all(
        tmp_path / "in",
        [named_ips(["alone"])] + [named_ips(["often", "caller"])] * 3,
    )
    status, out, err = symbolicate("--group", "--offline", *reports, capsys=capsys)
    assert status == 0, err
    rows = out.splitlines()
    assert rows[0].split()[:4] == ["#", "COUNT", "EXCEPTION", "TOP"]
    assert rows[1].split()[:2] == ["1", "3"] and "often > caller" in rows[1]
    assert rows[2].split()[:2] == ["2", "1"] and "alone" in rows[2]
    assert "4 reports in 2 groups" in out


def test_a_report_without_app_names_signs_with_its_first_frame(tmp_path, capsys):
    report = write_all(tmp_path / "in", [raw_ips([LEAF_CRASH, TRIGGER_RETURN])])
    status, out, _ = symbolicate("--group", "--format", "json", "--offline", *report, capsys=capsys)
    assert status == 2  # crashy's frames are left bare: no dSYM here
    data = json.loads(out)
    assert data["groups"][0]["signature"]["frames"] == [f"crashy + {LEAF_CRASH:#x}"]


def test_an_unreadable_report_is_its_line_and_the_others_are_grouped(tmp_path, capsys):
    reports = write_all(tmp_path / "in", [named_ips(["a"]), "not a report", named_ips(["a"])])
    status, out, err = symbolicate("--group", "--format", "json", *reports, capsys=capsys)
    assert status == 1
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith(f"dsymfind: error: {reports[1]}: ")
    assert json.loads(out)["groups"][0]["count"] == 2


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--group", "--format", "ips"], "--group writes a table"),
        (["--html", "x.html"], "go with --group"),
        (["--group-frames", "2"], "go with --group"),
    ],
)
def test_group_options_are_checked_before_anything_is_read(tmp_path, capsys, argv, said):
    report = write_all(tmp_path / "in", [named_ips(["a"])])
    status, _, err = symbolicate(*argv, *report, capsys=capsys)
    assert status == 1
    assert said in err


def test_group_frames_must_be_a_positive_number(tmp_path, capsys):
    report = write_all(tmp_path / "in", [named_ips(["a"])])
    with pytest.raises(SystemExit):
        symbolicate("--group", "--group-frames", "0", *report, capsys=capsys)


class _Page(HTMLParser):
    """What a test reads of the page: the groups' counts and signatures, every tag and
    every attribute that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.loads: list[tuple[str, str]] = []
        self.counts: list[int] = []
        self.frames: list[list[str]] = []
        self.exceptions: list[str] = []
        self.bars: dict[str, int] = {}
        self._in: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        found = dict(attrs)
        self.loads += [(k, v) for k, v in attrs if k in ("src", "href", "srcset", "action")]
        classes = (found.get("class") or "").split()
        if tag == "section" and "group" in classes:
            self.counts.append(int(found["data-count"]))
            self.frames.append([])
            self.exceptions.append("")
        if tag == "g" and "bar" in classes:
            self.bars[found["data-version"]] = int(found["data-count"])
        self._in.append(" ".join(classes) or tag)

    def handle_endtag(self, tag):
        if self._in:
            self._in.pop()

    def handle_data(self, data):
        self.text.append(data)
        if not self._in:
            return
        if self._in[-1] == "exception":
            self.exceptions[-1] += data
        elif self._in[-1] == "li" and len(self._in) >= 2 and self._in[-2] == "signature":
            self.frames[-1].append(data)


def read_page(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def test_the_page_escapes_every_string_a_report_gives(tmp_path, capsys):
    evil = named_ips([SCRIPT, '"><img src=x onerror=alert(2)>'], version="<b>1</b>")
    report = write_all(tmp_path / "in", [evil])
    page_path = tmp_path / "groups.html"
    status, out, err = symbolicate(
        "--group", "--offline", "--html", str(page_path), *report, capsys=capsys
    )
    assert status == 0, err
    assert out == ""
    text = page_path.read_text()
    page = read_page(text)
    assert "script" not in page.tags and "img" not in page.tags and "b" not in page.tags
    assert page.loads == []
    assert page.frames == [[SCRIPT, '"><img src=x onerror=alert(2)>']]
    assert SCRIPT in "".join(page.text)
    assert page.bars == {"<b>1</b> (1)": 1}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def _chromium_dom(page: Path, profile: Path) -> tuple[str, str]:
    """The page's DOM once loaded in headless Chromium, and what Chromium logged (each
    console message is a line with CONSOLE in it)."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout, done.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/bootstrap)")
def test_the_page_loads_in_chromium_with_the_groups_and_counts_of_the_json(tmp_path, capsys):
    # Chromium says a console message as a CONSOLE line: a page that logs one proves it.
    control = tmp_path / "control.html"
    control.write_text("<html><body><script>console.error('seen')</script></body></html>")
    _, logged = _chromium_dom(control, tmp_path / "profile-control")
    assert "CONSOLE" in logged and "seen" in logged

    texts = [*variations(60), named_ips([SCRIPT, "leaf"], exception="EXC_GUARD")]
    reports = write_all(tmp_path / "in", texts)
    page_path = tmp_path / "out" / "groups.html"
    data = grouped("--offline", "--html", str(page_path), *reports, capsys=capsys)
    dom, logged = _chromium_dom(page_path, tmp_path / "profile")
    assert "CONSOLE" not in logged, logged
    page = read_page(dom)
    assert "script" not in page.tags
    assert page.loads == []
    assert page.counts == [g["count"] for g in data["groups"]]
    assert page.counts == sorted(page.counts, reverse=True)
    assert sum(page.counts) == data["reports"] == len(texts)
    assert page.frames == [g["signature"]["frames"] for g in data["groups"]]
    assert page.exceptions == [g["signature"]["exception"] for g in data["groups"]]
    per_version: dict[str, int] = {}
    for found in data["groups"]:
        for row in found["versions"]:
            name = f"{row['version']} ({row['build']})"
            per_version[name] = per_version.get(name, 0) + row["count"]
    assert page.bars == per_version
    assert SCRIPT in "".join(page.text)
