"""`dsymfind symbolicate` naming the frames of Apple's libraries from their symbol tables:
from a DeviceSupport folder `dsymfind index` recorded, or, on a teammate's Mac that never
had the device, from the team's store where `publish --system` put them (fetched once into
that user's cache, where the helper then answers them as DBGSymbolRichExecutable).
The libraries are real dylibs made by clang and lld (support/device_support.py), their
expected names llvm-symbolizer's."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support
from support.fixtures import write_config
from support.processes import run_helper
from support.s3_publish import keys_env
from support.seaweed import REGION, SYMBOLS, SeaweedS3
from support.symbolication import symbolicate
from support.system_reports import (
    SystemFrame,
    metrickit_frame,
    metrickit_payload,
    sample_report,
    system_frames,
)

from dsymfind import main as cli
from dsymfind.apple import macho
from dsymfind.uuids import uuid_hex

Captured = pytest.CaptureFixture[str]
NOBODY_UUID = "0BAD0BAD-1111-3222-8333-444455556666"
NAMED_BY_DEVICE = ("__pthread_kill", "libsystem_pthread.dylib", NOBODY_UUID)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    """Built once: UIKitCore (arm64 + arm64e), Foundation (arm64), libsystem_kernel
    (arm64e). No test changes it."""
    return build_device_support(tmp_path_factory.mktemp("devicesupport"))


@pytest.fixture(scope="module")
def frames(tree: DeviceSupportTree) -> list[SystemFrame]:
    return system_frames(tree)


def payload_of(frames: list[SystemFrame], tmp_path: Path) -> Path:
    """A MetricKit payload: `frames`, then a frame the device named in an image nobody
    has, then a bare frame in that image."""
    named, image, uuid = NAMED_BY_DEVICE
    entries = [metrickit_frame(f) for f in frames]
    entries.append(
        {
            "binaryUUID": uuid,
            "binaryName": image,
            "offsetIntoBinaryTextSegment": 0x40,
            "address": 0x1_F000_0040,
            "symbol": named,
        }
    )
    entries.append(
        {
            "binaryUUID": uuid,
            "binaryName": image,
            "offsetIntoBinaryTextSegment": 0x80,
            "address": 0x1_F000_0080,
        }
    )
    path = tmp_path / "payload.json"
    path.write_text(metrickit_payload(entries))
    return path


def json_frames(out: str) -> list[dict[str, object]]:
    (thread,) = json.loads(out)["threads"]
    frames: list[dict[str, object]] = thread["frames"]
    return frames


def assert_named_from_symbol_tables(rows: list[dict[str, object]], frames: list[SystemFrame]):
    for row, frame in zip(rows, frames, strict=False):
        assert row == {
            "image": frame.library.name,
            "uuid": frame.uuid,
            "address": frame.base + frame.offset,
            "symbol": frame.expected,
            "offset": frame.offset - frame.function_start,
            "file": None,
            "line": None,
            "inline": False,
            "symbol_table": True,
        }


@pytest.fixture
def indexed(tree: DeviceSupportTree, capsys: pytest.CaptureFixture[str]) -> DeviceSupportTree:
    """The tree, recorded in this user's cache by `dsymfind index`."""
    assert cli.main(["index", str(tree.root)]) == 0
    capsys.readouterr()
    return tree


def test_metrickit_frames_are_named_from_an_indexed_device_support_folder(
    indexed: DeviceSupportTree, frames: list[SystemFrame], tmp_path: Path, capsys: Captured
) -> None:
    report = payload_of(frames, tmp_path)
    status, out, err = symbolicate("--offline", "--format", "json", str(report), capsys=capsys)
    assert status == 0, err  # the one bare frame is Apple's
    rows = json_frames(out)
    assert_named_from_symbol_tables(rows, frames)
    # The device's own name is kept; the image nobody has stays bare, with its verdict.
    named, image, uuid = NAMED_BY_DEVICE
    assert [(r["symbol"], r.get("symbol_table")) for r in rows[len(frames) :]] == [
        (named, None),
        (None, None),
    ]
    verdicts = {i["uuid"]: (i["status"], i.get("verdict")) for i in json.loads(out)["images"]}
    assert verdicts[uuid] == ("system", "absent")
    assert {verdicts[f.uuid] for f in frames} == {("found", None)}
    assert f"system (absent)  {uuid}  {image}" in err
    uikit = indexed.libraries[0]
    assert f"found    {uikit.uuids['arm64e']}  UIKitCore  {uikit.path} (symbol table)" in err


def test_metrickit_written_back_in_its_own_form_gains_names_and_offsets(
    indexed: DeviceSupportTree, frames: list[SystemFrame], tmp_path: Path, capsys: Captured
) -> None:
    report = payload_of(frames[:2], tmp_path)
    status, out, _ = symbolicate("--offline", str(report), capsys=capsys)
    assert status == 0
    root = json.loads(out)["crashDiagnostics"][0]["callStackTree"]["callStacks"][0]
    first = root["callStackRootFrames"][0]
    assert (first["symbol"], first["symbolLocation"]) == (
        frames[0].expected,
        frames[0].offset - frames[0].function_start,
    )
    assert "sourceFile" not in first and "sourceLine" not in first


def test_sample_frames_are_named_and_the_tools_own_names_kept(
    indexed: DeviceSupportTree, frames: list[SystemFrame], tmp_path: Path, capsys: Captured
) -> None:
    named, image, uuid = NAMED_BY_DEVICE
    # A process maps one slice of a library, and sample names images by name alone.
    frames = [f for f in frames if f.arch == next(iter(f.library.uuids))]
    report = tmp_path / "mail.sample.txt"
    report.write_text(sample_report(frames, (named, image, uuid, 0x1_F000_0000)))
    status, out, err = symbolicate("--offline", "--format", "json", str(report), capsys=capsys)
    assert status == 0, err
    rows = json_frames(out)
    assert rows[0]["symbol"] == named and "symbol_table" not in rows[0]
    # The call graph lists callers first: the innermost frame is the last line.
    assert_named_from_symbol_tables(list(reversed(rows[1:])), frames)

    status, text, _ = symbolicate("--offline", str(report), capsys=capsys)
    leaf = frames[0]
    expected = f"{leaf.expected}  (in {leaf.library.name}) + {leaf.offset - leaf.function_start}"
    assert expected in text


# -- a teammate without the device ---------------------------------------------------


class Store:
    """A store user A publishes to and user B reads: a folder, or the real S3 engine."""

    def __init__(self, to: list[str], server: str, env: dict[str, str] | None = None) -> None:
        self.to, self.server, self.env = to, server, env


@pytest.fixture(params=["folder", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    if request.param == "folder":
        folder = tmp_path / "team-store"
        yield Store([str(folder)], f"url = 'file://{folder}'\nlayout = 'unified'\n")
        return
    s3: SeaweedS3 = request.getfixturevalue("s3")
    for name, value in keys_env(s3, "ci").items():
        monkeypatch.setenv(name, value)
    prefix = f"system-{secrets.token_hex(4)}"
    yield Store(
        [f"s3://{SYMBOLS}/{prefix}/", "--endpoint-url", s3.endpoint_url, "--region", REGION],
        f"url = 's3://{SYMBOLS}/{prefix}/'\nendpoint_url = '{s3.endpoint_url}'\n"
        f"region = '{REGION}'\n",
        keys_env(s3, "reader"),
    )


def become_user(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: Store
) -> tuple[Path, Path]:
    """Another HOME, cache and configuration naming the store; (home, cache)."""
    home = tmp_path / name
    for var, sub in (
        ("HOME", ""),
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".state"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    for var, value in (store.env or {}).items():
        if var.startswith("AWS_"):  # the reader's keys; the rest is this process's own
            monkeypatch.setenv(var, value)
    write_config(
        home / ".config" / "dsymfind" / "config.toml",
        f"timeout = 30\n[[servers]]\nname = 'team'\n{store.server}",
    )
    return home, home / ".cache" / "dsymfind"


@pytest.fixture
def teammate(
    tree: DeviceSupportTree,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[Path, Path]:
    """User A publishes the tree to the store; then this process is user B, who never
    had it: (B's home, B's cache)."""
    assert cli.main(["publish", "--system", "--to", *store.to, str(tree.root)]) == 0
    capsys.readouterr()
    return become_user("user-b", tmp_path, monkeypatch, store)


def test_a_teammate_without_the_device_gets_the_names_from_the_store(
    frames: list[SystemFrame],
    teammate: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home, cache = teammate
    report = payload_of(frames, tmp_path)
    status, out, err = symbolicate("--format", "json", str(report), capsys=capsys)
    assert status == 0, err
    assert err.count("(symbol table)") == len(frames) // 2, err
    assert_named_from_symbol_tables(json_frames(out), frames)
    assert not (home / "Library").exists()
    # Each slice fetched once into B's cache, alone (no dSYM), as its own thin file.
    for frame in frames:
        (kept,) = (cache / "executables" / uuid_hex(frame.uuid)).iterdir()
        assert kept.name == frame.library.name
        assert [s.uuid for s in macho.read_slices(kept)] == [frame.uuid]
    assert not (cache / "dsyms").exists() or not any((cache / "dsyms").iterdir())

    # Again: from B's cache and the SymCaches kept there, nothing fetched.
    assert len(list((cache / "symcaches").iterdir())) == len(frames) // 2
    status, again, _ = symbolicate("--offline", "--format", "json", str(report), capsys=capsys)
    assert status == 0
    assert json_frames(again) == json_frames(out)


def test_the_helper_answers_a_teammate_the_executable_fetched_after_a_miss(
    tree: DeviceSupportTree, teammate: tuple[Path, Path]
) -> None:
    _home, cache = teammate
    uikit = tree.libraries[0]
    wanted = uikit.uuids["arm64e"]
    run = run_helper(wanted)  # a real process: one plist, nothing on stderr, exit 0
    (kept,) = (cache / "executables" / uuid_hex(wanted)).iterdir()
    assert run.plist == {
        wanted: {"DBGArchitecture": "arm64e", "DBGSymbolRichExecutable": str(kept)}
    }
    (piece,) = macho.read_slices(kept)
    assert piece.uuid == wanted
    # Asked again: answered from the cache at once, the same file.
    assert run_helper(wanted).plist == run.plist


def test_a_uuid_no_store_has_stays_a_quiet_miss_for_the_helper(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    become_user("user-d", tmp_path, monkeypatch, store)
    assert run_helper(NOBODY_UUID).plist in ({}, {NOBODY_UUID: {}})
