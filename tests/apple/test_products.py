"""apple/products.py: every Mach-O a build ships, on a real build made by clang, ld64.lld
and dsymutil (support/products.py), in each form it comes in, and bad input."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
from support import products as built_products
from support.products import Built, copy_of, zip_app

from dsymfind.apple import macho, products

SHIPPED = {
    "App": "App",
    "App.debug.dylib": "App.debug.dylib",
    "Kit": "Frameworks/Kit.framework/Kit",
    "Vendor": "Frameworks/Vendor.framework/Vendor",
    "libloose.dylib": "Frameworks/libloose.dylib",
    "Widget": "PlugIns/Widget.appex/Widget",
}


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return built_products.built(tmp_path_factory.mktemp("products"))


def expected(build: Built, prefix: str) -> set[tuple[str, str, str | None, str, bool]]:
    return {
        (prefix + place, name, build.uuids[name][arch], arch, name == "App")
        for name, place in SHIPPED.items()
        for arch in build.uuids[name]
    }


def found(product: products.Product) -> set[tuple[str, str, str | None, str, bool]]:
    return {tuple(image) for image in product.images}  # type: ignore[misc]


def test_the_fixture_is_what_it_claims(build: Built) -> None:
    """UUIDs from llvm-dwarfdump, the reference reader; Kit universal; stale Kit another."""
    assert set(build.uuids["Kit"]) == {"arm64", "x86_64"}
    assert not set(build.uuids["Kit"].values()) & set(build.uuids["stale Kit"].values())
    all_uuids = [u for name in SHIPPED for u in build.uuids[name].values()]
    assert len(set(all_uuids)) == len(all_uuids) == 7


@pytest.mark.parametrize(
    ("form", "prefix", "kind"),
    [
        ("app", "", products.APP),
        ("build", "App.app/", products.FOLDER),
        ("archive", "Products/Applications/App.app/", products.ARCHIVE),
        ("ipa", "Payload/App.app/", products.IPA),
    ],
)
def test_every_image_of_every_form(build: Built, form: str, prefix: str, kind: str) -> None:
    product = products.walk(str(getattr(build, form)))
    assert product.kind == kind
    assert product.problems == []
    assert found(product) == expected(build, prefix)


def test_the_dsyms_that_came_with_it(build: Built) -> None:
    archive = products.walk(str(build.archive))
    assert {(d.name, d.uuid) for d in archive.dsyms} == {
        (name, uuid)
        for name in ("App.debug.dylib", "Kit", "libloose.dylib", "Widget")
        for uuid in build.uuids[name].values()
    }
    assert all(d.path.startswith("dSYMs/") for d in archive.dsyms)
    beside = products.walk(str(build.app))
    assert {d.uuid for d in beside.dsyms} == {d.uuid for d in archive.dsyms}
    assert products.walk(str(build.ipa)).dsyms == []


def test_the_debug_dylib_stub_is_known_by_its_section(build: Built) -> None:
    assert products.is_debug_dylib_stub(build.app / "App")
    assert not products.is_debug_dylib_stub(build.app / "App.debug.dylib")
    assert not products.is_debug_dylib_stub(build.app / "PlugIns/Widget.appex/Widget")
    piece = macho.read_slices(build.app / "App")[0]
    assert products.is_debug_dylib_stub(build.app / "App", piece)
    assert not products.is_debug_dylib_stub(build.app / "Assets.car")
    assert not products.is_debug_dylib_stub(build.root / "nothing here")
    assert products.debug_dylib_name("App") == "App.debug.dylib"


def test_a_versioned_macos_framework_counts_once(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "Mac.app")
    framework = app / "Frameworks" / "Kit.framework"
    shutil.rmtree(framework)
    (framework / "Versions" / "A").mkdir(parents=True)
    shutil.copy(build.app / "Frameworks/Kit.framework/Kit", framework / "Versions/A/Kit")
    (framework / "Versions" / "Current").symlink_to("A")
    (framework / "Kit").symlink_to("Versions/Current/Kit")
    kit = [i for i in products.walk(str(app)).images if i.name == "Kit"]
    assert {(i.path, i.arch) for i in kit} == {
        ("Frameworks/Kit.framework/Versions/A/Kit", arch) for arch in ("arm64", "x86_64")
    }


def test_app_clips_watch_apps_and_xpc_services(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    places = (
        "AppClips/Clip.app/Clip",
        "Watch/W.app/W",
        "XPCServices/S.xpc/Contents/MacOS/S",
        "Extensions/E.appex/E",
    )
    for place in places:
        (app / place).parent.mkdir(parents=True)
        shutil.copy(build.app / "PlugIns/Widget.appex/Widget", app / place)
    paths = {i.path for i in products.walk(str(app)).images}
    assert {
        "AppClips/Clip.app/Clip",
        "Watch/W.app/W",
        "XPCServices/S.xpc/Contents/MacOS/S",
    } <= paths


def test_a_non_macho_executable_in_frameworks_is_one_line(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    (app / "Frameworks/Vendor.framework/Vendor").write_text("#!/bin/sh\n")
    product = products.walk(str(app))
    assert product.problems == [
        f"Frameworks/Vendor.framework/Vendor: {products.UNNAMED_EXECUTABLE}"
    ]
    assert "Vendor" not in {i.name for i in product.images}
    assert len(product.images) == 6


def test_a_truncated_dylib_is_one_line(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    loose = app / "Frameworks/libloose.dylib"
    loose.write_bytes(loose.read_bytes()[:600])
    product = products.walk(str(app))
    [problem] = product.problems
    assert problem.startswith("Frameworks/libloose.dylib: ")
    assert str(app) not in problem
    assert "libloose.dylib" not in {i.name for i in product.images}


def test_a_symlink_loop_is_one_line(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    (app / "Frameworks/Loop.framework").mkdir()
    (app / "Frameworks/Loop.framework/Loop").symlink_to("Loop")
    (app / "Frameworks/a").symlink_to("b")
    (app / "Frameworks/b").symlink_to("a")
    product = products.walk(str(app))
    assert sorted(product.problems) == [
        "Frameworks/Loop.framework/Loop: a symbolic link loop",
        "Frameworks/a: a symbolic link loop",
        "Frameworks/b: a symbolic link loop",
    ]
    assert len(product.images) == 7


def test_a_link_out_of_the_product_is_not_followed(build: Built, tmp_path: Path) -> None:
    app = copy_of(build.app, tmp_path / "App.app")
    (app / "Frameworks/Elsewhere").symlink_to(build.archive)
    product = products.walk(str(app))
    assert product.problems == []
    assert len(product.images) == 7


def test_zip_members_escaping_the_folder_are_named_and_not_read(
    build: Built, tmp_path: Path
) -> None:
    code = (build.app / "Frameworks/Vendor.framework/Vendor").read_bytes()
    ipa = zip_app(
        build.app,
        tmp_path / "Bad.ipa",
        {"../evil": code, "/abs/evil": code, "Payload/App.app/Frameworks/../../../up": code},
    )
    product = products.walk(str(ipa))
    assert sorted(product.problems) == [
        "'../evil': zip entry climbs out of its folder with '..': not read",
        "'/abs/evil': zip entry has an absolute path: not read",
        "'Payload/App.app/Frameworks/../../../up': zip entry climbs out of its folder with '..': "
        "not read",
    ]
    assert len(product.images) == 7


def test_a_bad_zip_and_bad_members_of_a_good_one(build: Built, tmp_path: Path) -> None:
    broken = tmp_path / "Broken.ipa"
    broken.write_bytes(b"PK\x03\x04" + b"\0" * 40)
    [problem] = products.walk(str(broken)).problems
    assert problem.startswith("Broken.ipa: the zip archive is unreadable")
    ipa = zip_app(
        build.app,
        tmp_path / "Odd.ipa",
        {
            "Payload/App.app/Frameworks/Cut.framework/Cut": (
                build.app / "App.debug.dylib"
            ).read_bytes()[:700],
            "Payload/App.app/Frameworks/Text.framework/Text": b"just text\n",
        },
    )
    product = products.walk(str(ipa))
    assert len(product.problems) == 2
    assert product.problems[0].startswith("Payload/App.app/Frameworks/Cut.framework/Cut: ")
    assert product.problems[1] == (
        f"Payload/App.app/Frameworks/Text.framework/Text: {products.UNNAMED_EXECUTABLE}"
    )


def test_an_ipa_is_read_in_place(
    build: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is extracted: no file is written while the walk reads the zip."""
    written: list[str] = []
    real_open = os.open

    def watched(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            written.append(str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", watched)
    assert len(products.walk(str(build.ipa)).images) == 7
    assert written == []


def test_a_stored_zip_and_a_java_class_file(build: Built, tmp_path: Path) -> None:
    ipa = tmp_path / "Stored.ipa"
    with zipfile.ZipFile(ipa, "w", zipfile.ZIP_STORED) as archive:
        archive.write(build.app / "App", "Payload/App.app/App")
        archive.writestr("Payload/App.app/Thing.class", b"\xca\xfe\xba\xbe\x00\x00\x00\x34")
    product = products.walk(str(ipa))
    assert [(i.name, i.stub) for i in product.images] == [("App", True)]
    assert product.problems == []


def test_a_zip_of_dsyms_counts_as_dsyms_and_ships_nothing(build: Built, tmp_path: Path) -> None:
    delivered = tmp_path / "dSYMs.zip"
    with zipfile.ZipFile(delivered, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((build.archive / "dSYMs").rglob("*")):
            if path.is_file():
                archive.write(path, str(path.relative_to(build.archive)))
    product = products.walk(str(delivered))
    assert product.images == []
    assert product.problems == []
    assert {d.uuid for d in product.dsyms} == {
        d.uuid for d in products.walk(str(build.archive)).dsyms
    }
    assert not products.is_ipa(str(delivered))
    assert products.is_ipa(str(build.ipa))


def test_xcode_intermediates_are_not_what_ships(build: Built, tmp_path: Path) -> None:
    folder = copy_of(build.build, tmp_path / "Build")
    intermediates = folder / "Intermediates.noindex" / "App.build"
    intermediates.mkdir(parents=True)
    shutil.copy(build.stale_kit / "Contents/Resources/DWARF/Kit", intermediates / "Kit")
    product = products.walk(str(folder))
    assert len(product.images) == 7
    assert not any("noindex" in i.path for i in product.images)
