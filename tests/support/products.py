"""A realistic Apple build, made here by clang, ld64.lld and dsymutil: what `check-build`
and publish's completeness check read.

App.app ships an Xcode 16-style stub executable (`__TEXT,__debug_dylib`) with its code in
App.debug.dylib, an app extension (PlugIns/Widget.appex), two embedded frameworks (Kit,
universal arm64 + x86_64, with its dSYM; Vendor, without one) and a loose dylib
(Frameworks/libloose.dylib, with its dSYM). The same app comes as a build folder (the
dSYMs beside the .app, as Xcode leaves them), an .xcarchive (Info.plist with
ApplicationProperties, dSYMs/) and an .ipa (a zip of Payload/App.app). A second Kit, built
from other code under the same name, gives a stale dSYM. Built once per test session.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.fixtures import load_generator

SOURCES = {
    "stub.c": (
        "/* Xcode 16's ENABLE_DEBUG_DYLIB stub: the marker section, and a main that would\n"
        " * load App.debug.dylib. */\n"
        '__attribute__((used, section("__TEXT,__debug_dylib")))\n'
        'static const char debug_dylib[] = "App.debug.dylib";\n'
        "int main(void) { return 0; }\n"
    ),
    "app.c": (
        "int printf(const char *format, ...);\n"
        'int app_main(int argc) { return printf("app %d\\n", argc); }\n'
    ),
    "kit.c": (
        "int printf(const char *format, ...);\n"
        "#ifndef VARIANT\n#define VARIANT 1\n#endif\n"
        'int kit(int x) { return printf("kit %d\\n", x * VARIANT); }\n'
    ),
    "vendor.c": (
        "int printf(const char *format, ...);\n"
        'int vendor(int x) { return printf("vendor %d\\n", x + 7); }\n'
    ),
    "loose.c": (
        "int printf(const char *format, ...);\n"
        'int loose(int x) { return printf("loose %d\\n", x - 3); }\n'
    ),
    "widget.c": (
        'int printf(const char *format, ...);\nint main(void) { return printf("widget\\n"); }\n'
    ),
}

APP_INFO = {
    "CFBundleExecutable": "App",
    "CFBundleIdentifier": "com.example.app",
    "CFBundleName": "App",
    "CFBundleShortVersionString": "2.3",
    "CFBundleVersion": "812",
}


@dataclass
class Built:
    """Where each form of the build lies, and the UUIDs of what it ships."""

    root: Path
    build: Path  # a build folder: App.app and the dSYMs beside it
    app: Path  # build/App.app
    archive: Path  # App.xcarchive
    ipa: Path  # App.ipa
    stale_kit: Path  # Kit.framework.dSYM of another build of Kit
    dsyms: dict[str, Path] = field(default_factory=dict)  # name -> the dSYM bundle
    uuids: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> arch -> UUID

    def uuid(self, name: str, arch: str = "arm64") -> str:
        return self.uuids[name][arch]


# (product name, sources, arches, dylib, variant, the bundle its dSYM is named after)
_PRODUCTS = (
    ("App", ("stub.c",), ("arm64",), False, 0, None),
    ("App.debug.dylib", ("app.c",), ("arm64",), True, 0, "App.app.dSYM"),
    ("Kit", ("kit.c",), ("arm64", "x86_64"), True, 1, "Kit.framework.dSYM"),
    ("Vendor", ("vendor.c",), ("arm64",), True, 0, None),
    ("libloose.dylib", ("loose.c",), ("arm64",), True, 0, "libloose.dylib.dSYM"),
    ("Widget", ("widget.c",), ("arm64",), False, 0, "Widget.appex.dSYM"),
)
# Where each binary sits in App.app.
_PLACES = {
    "App": "App",
    "App.debug.dylib": "App.debug.dylib",
    "Kit": "Frameworks/Kit.framework/Kit",
    "Vendor": "Frameworks/Vendor.framework/Vendor",
    "libloose.dylib": "Frameworks/libloose.dylib",
    "Widget": "PlugIns/Widget.appex/Widget",
}

_built: dict[str, Built] = {}


def built(base: Path) -> Built:
    """The build, made under `base` the first time and reused after (one per session)."""
    key = "build"
    if key not in _built:
        _built[key] = _build(base)
    return _built[key]


def _build(base: Path) -> Built:
    generator = load_generator()
    tools = generator.locate_tools(use_fat64_tools=False)
    env = {**os.environ, "ZERO_AR_DATE": "1", "LC_ALL": "C"}
    base.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="products.") as tmp:
        work = Path(tmp)
        for name, sources, arches, dylib, variant, _ in _PRODUCTS:
            made[name] = _make(
                generator, tools, env, work / name, name, sources, arches, dylib, variant
            )
        stale = _make(
            generator, tools, env, work / "stale", "Kit", ("kit.c",), ("arm64", "x86_64"), True, 9
        )
        return _assemble(base, made, stale, tools, env, generator)


def _make(
    generator: object,
    tools: object,
    env: dict[str, str],
    build: Path,
    name: str,
    sources: tuple[str, ...],
    arches: tuple[str, ...],
    dylib: bool,
    variant: int,
) -> Path:
    """One product built in its own folder: `build/NAME` and `build/NAME.dSYM`."""
    (build / "src").mkdir(parents=True)
    for source in sources:
        (build / "src" / source).write_text(SOURCES[source])
    (build / "SDK" / "usr" / "lib").mkdir(parents=True)
    shutil.copy(generator.SRC_DIR / "libSystem.tbd", build / "SDK" / "usr" / "lib")  # type: ignore[attr-defined]
    product = generator.Product(name, sources, arches, variant=variant, dylib=dylib)  # type: ignore[attr-defined]
    generator.build_product(product, build, tools, env)  # type: ignore[attr-defined]
    return build


def _assemble(
    base: Path,
    made: dict[str, Path],
    stale: Path,
    tools: object,
    env: dict[str, str],
    generator: object,
) -> Built:
    build = base / "Release-iphoneos"
    app = build / "App.app"
    for name, place in _PLACES.items():
        target = app / place
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(made[name] / name, target)
    _plist(app / "Info.plist", APP_INFO)
    _plist(app / "Frameworks" / "Kit.framework" / "Info.plist", {"CFBundleExecutable": "Kit"})
    _plist(app / "PlugIns" / "Widget.appex" / "Info.plist", {"CFBundleExecutable": "Widget"})
    (app / "Assets.car").write_bytes(b"not code")
    dsyms = {}
    for name, _, _, _, _, bundle in _PRODUCTS:
        if bundle is not None:
            dsyms[name] = build / bundle
            shutil.copytree(made[name] / f"{name}.dSYM", build / bundle)
    stale_kit = base / "stale" / "Kit.framework.dSYM"
    shutil.copytree(stale / "Kit.dSYM", stale_kit)

    archive = base / "App.xcarchive"
    shutil.copytree(app, archive / "Products" / "Applications" / "App.app", symlinks=True)
    for bundle in dsyms.values():
        shutil.copytree(bundle, archive / "dSYMs" / bundle.name)
    _plist(
        archive / "Info.plist",
        {
            "ApplicationProperties": {
                "ApplicationPath": "Applications/App.app",
                "CFBundleIdentifier": APP_INFO["CFBundleIdentifier"],
                "CFBundleShortVersionString": APP_INFO["CFBundleShortVersionString"],
                "CFBundleVersion": APP_INFO["CFBundleVersion"],
            },
            "ArchiveVersion": 2,
            "Name": "App",
            "SchemeName": "App",
        },
    )
    ipa = base / "App.ipa"
    zip_app(app, ipa)

    uuids: dict[str, dict[str, str]] = {}
    for name in _PLACES:
        found = generator.dwarfdump_uuids(tools.dwarfdump, made[name], [name], env)  # type: ignore[attr-defined]
        uuids[name] = {entry["arch"]: entry["uuid"] for entry in found[name]}
    found = generator.dwarfdump_uuids(tools.dwarfdump, stale, ["Kit"], env)  # type: ignore[attr-defined]
    uuids["stale Kit"] = {entry["arch"]: entry["uuid"] for entry in found["Kit"]}
    return Built(base, build, app, archive, ipa, stale_kit, dsyms, uuids)


def zip_app(app: Path, ipa: Path, extra: dict[str, bytes] | None = None) -> Path:
    """An .ipa: the app under Payload/, deflated, plus any `extra` members as named."""
    with zipfile.ZipFile(ipa, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(app.rglob("*")):
            if path.is_file():
                archive.write(path, f"Payload/{app.name}/{path.relative_to(app)}")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return ipa


def _plist(path: Path, value: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(plistlib.dumps(value))


def copy_of(tree: Path, dest: Path) -> Path:
    """A private copy of a built tree, for a test that breaks it."""
    shutil.copytree(tree, dest, symlinks=True)
    return dest
