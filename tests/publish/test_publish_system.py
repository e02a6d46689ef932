"""`dsymfind publish --system`: a DeviceSupport tree made by clang and lld here, published
into a folder store and into the real S3 engine (SeaweedFS on loopback): every slice under
the executable key a fetch asks for, one build record of kind `system`, listed by `builds`,
published again as "exists" without a second record, retired as any build, and read back
by a teammate who never had the tree."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.device_support import DeviceSupportTree, build_device_support
from support.s3_publish import keys_env
from support.seaweed import REGION, SYMBOLS, SeaweedS3

from dsymfind import main as cli
from dsymfind import stores
from dsymfind.apple import macho
from dsymfind.stores import builds, layouts
from dsymfind.stores.base import Options
from dsymfind.stores.writers import Manager


class Store:
    """A store under test: its Manager and the arguments that name it to publish (`to`) and
    to builds and retire (`named`)."""

    def __init__(self, url: str, settings: dict[str, str], flags: list[str]) -> None:
        self.url = url
        self.settings = settings
        self.manager: Manager = stores.open_manager(url, Options(settings=settings))
        self.to = ["--to", url, *flags]
        self.named = ["--store", url, *flags]

    def keys(self, prefix: str = "") -> set[str]:
        return {item.key for item in self.manager.listed(prefix)}

    def records(self) -> list[builds.Record]:
        summaries, skipped = builds.list_summaries(self.manager)
        assert skipped == []
        found = [builds.read_record(self.manager, s.key) for s in summaries]
        return [record for record in found if record is not None]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> DeviceSupportTree:
    """iOS 17.5.1 (21F90): UIKitCore (arm64 + arm64e), Foundation (arm64),
    libsystem_kernel (arm64e). Tests that change it work on a copy."""
    return build_device_support(tmp_path_factory.mktemp("devicesupport"))


@pytest.fixture(params=["folder", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    if request.param == "folder":
        yield Store(str(tmp_path / "store"), {}, [])
        return
    s3: SeaweedS3 = request.getfixturevalue("s3")
    for name, value in keys_env(s3, "admin").items():  # retire deletes: the admin's keys
        monkeypatch.setenv(name, value)
    url = f"s3://{SYMBOLS}/system-{secrets.token_hex(4)}/"
    yield Store(
        url,
        {"endpoint_url": s3.endpoint_url, "region": REGION},
        ["--endpoint-url", s3.endpoint_url, "--region", REGION],
    )


def publish(
    capsys: pytest.CaptureFixture[str], store: Store, *args: str | Path
) -> tuple[int, str, str]:
    code = cli.main(["publish", "--system", *store.to, *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def slices_of(tree: DeviceSupportTree) -> dict[str, tuple[str, str, str]]:
    """Every slice of the tree: UUID -> (file name, arch, install path)."""
    return {
        uuid: (library.path.name, arch, library.install_path)
        for library in tree.libraries
        for arch, uuid in library.uuids.items()
    }


def executable_key(uuid: str, name: str) -> str:
    key = layouts.executable_key(layouts.DEFAULT, uuid, name)
    assert key is not None
    return key


def test_every_slice_goes_under_its_executable_key_with_one_system_record(
    tree: DeviceSupportTree, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = publish(capsys, store, tree.root)

    assert code == 0, err
    expected = slices_of(tree)
    assert len(expected) == 4
    for uuid, (name, arch, _) in expected.items():
        assert f"{name} {uuid} {arch}: published" in out
        data = store.manager.read_small(executable_key(uuid, name))
        assert data is not None
        thin = tmp_path / f"{uuid}.bin"
        thin.write_bytes(data)
        # One complete thin Mach-O carrying that UUID, an image (no dSYM): what fetch verifies.
        assert [(s.uuid, s.arch, s.filetype_name) for s in macho.read_slices(thin)] == [
            (uuid, arch, "MH_DYLIB")
        ]
    (record,) = store.records()
    assert (record.kind, record.app, record.version, record.build) == (
        builds.SYSTEM,
        "iOS",
        "17.5.1",
        "21F90",
    )
    assert (record.commit, record.bundle_id, record.sources) == ("", "", ())
    assert {
        image.uuid: (image.name, image.arch, image.install_path, image.kind, image.key)
        for image in record.images
    } == {
        uuid.replace("-", ""): (name, arch, path, "executable", executable_key(uuid, name))
        for uuid, (name, arch, path) in expected.items()
    }
    assert f"build record {record.key}" in out and record.key.endswith(",system.json")
    for image in record.images:  # the references a retire counts, written before the record
        assert store.keys(f"_uuids/{image.uuid}/") == {f"_uuids/{image.uuid}/{record.id}"}
    assert store.keys("_publishing/") == set()


def test_published_twice_the_second_run_finds_everything_there_and_writes_no_record(
    tree: DeviceSupportTree, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert publish(capsys, store, tree.root)[0] == 0
    before = store.keys()

    code, out, err = publish(capsys, store, tree.build_dir)

    assert code == 0, err
    lines = [line for line in out.splitlines() if ": " in line and "DeviceSupport" not in line]
    assert len([line for line in lines if line.endswith(": exists")]) == 4
    assert "published" not in out.replace("0 published", "")
    (record,) = store.records()
    assert f"iOS 17.5.1 (21F90): already recorded in {record.key}" in out
    assert (
        out.splitlines()[-1] == "summary: 0 published, 4 exists, 0 skipped, 0 refused, 0 conflicts"
    )
    assert store.keys() == before  # no object, no record, no claim left


def test_builds_lists_the_system_build_with_its_kind(
    tree: DeviceSupportTree, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert publish(capsys, store, tree.root)[0] == 0

    assert cli.main(["builds", *store.named]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split()[:4] == ["17.5.1", "(21F90)", "iOS", "system"]
    assert "4 images" in line

    assert cli.main(["builds", *store.named, "--kind", "system", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["kind"], listed["app"], listed["commit"], listed["images"]) == (
        "system",
        "iOS",
        "",
        4,
    )
    assert cli.main(["builds", *store.named, "--kind", "app"]) == 0
    assert capsys.readouterr().out == ""


def test_retiring_a_system_build_removes_its_keys_unless_another_build_names_them(
    tree: DeviceSupportTree, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert publish(capsys, store, tree.root)[0] == 0
    foundation = next(lib for lib in tree.libraries if lib.path.name == "Foundation")
    # An app build that ships the same Foundation (as a vendor binary): it names that key too.
    shipped = ["publish", *store.to, "--executables", "--build-id", "app-1", str(foundation.path)]
    assert cli.main([*shipped, "--app-version", "1.0", "--build-number", "1"]) == 0
    (system_record,) = [r for r in store.records() if r.kind == builds.SYSTEM]
    capsys.readouterr()

    assert cli.main(["retire", *store.named, "17.5.1 (21F90)"]) == 0

    out = capsys.readouterr().out
    assert f"retired 17.5.1 (21F90) iOS system ({system_record.id})" in out
    kept = executable_key(foundation.uuids["arm64"], "Foundation")
    for image in system_record.images:
        assert (image.key in store.keys(image.key)) == (image.key == kept)
    assert [r.id for r in store.records()] == ["app-1"]


def test_a_teammate_who_never_had_the_device_reads_them_from_the_store(
    tree: DeviceSupportTree,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """User A publishes; user B (another HOME, another cache, no DeviceSupport folder) finds
    the build of a UUID and reads its executable under the key a fetch asks for. (Fetching
    it into B's cache is not publish's part: fetch and symbolicate do it.)"""
    assert publish(capsys, store, tree.root)[0] == 0
    home_b = tmp_path / "user-b"
    home_b.mkdir()
    monkeypatch.setenv("HOME", str(home_b))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home_b / ".cache"))
    uikit = next(lib for lib in tree.libraries if lib.path.name == "UIKitCore")
    wanted = uikit.uuids["arm64e"]

    assert cli.main(["builds", "find", wanted, *store.named]) == 0
    assert "17.5.1 (21F90)  iOS  system" in capsys.readouterr().out

    if store.url.startswith("s3://"):  # B holds the read-only keys
        for name, value in keys_env(request.getfixturevalue("s3"), "reader").items():
            monkeypatch.setenv(name, value)
    reader = stores.open_manager(store.url, Options(settings=store.settings))
    data = reader.read_small(executable_key(wanted, "UIKitCore"))
    assert data is not None
    assert not (home_b / "Library").exists()
    copy = tmp_path / "UIKitCore"
    copy.write_bytes(data)
    (piece,) = macho.read_slices(copy)
    assert (piece.uuid, piece.arch) == (wanted, "arm64e")
    with open(uikit.path, "rb") as universal:  # the slice's very bytes
        universal.seek(next(s for s in macho.read_slices(uikit.path) if s.uuid == wanted).offset)
        assert universal.read(len(data)) == data
    assert os.path.getsize(copy) == piece.size
