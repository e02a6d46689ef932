"""The demo: a symbol server on 127.0.0.1 serving the bundled fixtures, and real lookups.

Everything lives in a temporary folder (its own HOME, config and cache); nothing on the
machine is changed and no other host is contacted.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import plistlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "macho"
BIN = Path(sys.executable).parent
UUIDS = json.loads((FIXTURES / "uuids.json").read_text())


def uuid_of(name: str, arch: str | None = None) -> str:
    return next(u["uuid"] for u in UUIDS[name]["uuids"] if arch is None or u["arch"] == arch)


def dwarf(bundle: str) -> Path:
    return next((FIXTURES / bundle / "Contents" / "Resources" / "DWARF").iterdir())


def build_server_tree(root: Path) -> None:
    """Three layouts, three encodings: gzip'd bare DWARF, a zipped bundle, plain DWARF."""
    hello = uuid_of("hello").replace("-", "")
    native = (
        root
        / "native"
        / hello[0:4]
        / hello[4:8]
        / hello[8:12]
        / hello[12:16]
        / hello[16:20]
        / hello[20:]
    )
    native.parent.mkdir(parents=True)
    native.write_bytes(gzip.compress(dwarf("hello.dSYM").read_bytes()))

    zips = root / "zips"
    zips.mkdir()
    for arch in ("arm64", "x86_64"):
        with zipfile.ZipFile(zips / f"{uuid_of('universal', arch)}.dSYM.zip", "w") as z:
            for path in sorted((FIXTURES / "universal.dSYM").rglob("*")):
                z.write(
                    path, Path("universal.dSYM") / path.relative_to(FIXTURES / "universal.dSYM")
                )

    greet = uuid_of("libgreet.dylib").replace("-", "").lower()
    ssqp = root / "ssqp" / "_.dwarf" / f"mach-uuid-sym-{greet}" / "_.dwarf"
    ssqp.parent.mkdir(parents=True)
    shutil.copy(dwarf("libgreet.dylib.dSYM"), ssqp)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(root: Path) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def helper(env: dict[str, str], *args: str) -> dict[str, dict[str, str]]:
    started = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "dsymForUUID"), *args], env=env, capture_output=True, check=True
    )
    elapsed = (time.perf_counter() - started) * 1000
    assert done.stderr == b"", done.stderr
    answer = plistlib.loads(done.stdout)
    print(f"$ dsymForUUID {' '.join(args)}    ({elapsed:.0f} ms)")
    for uuid, values in answer.items() or [("", {})]:
        if uuid:
            print(f"  {uuid}")
        for key, value in values.items():
            print(f"    {key}: {value}")
    if not answer:
        print("  <dict/>  (not found)")
    print()
    return answer


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dsymfind-demo-") as tmp:
        work = Path(tmp)
        (work / "server").mkdir()
        build_server_tree(work / "server")
        local = work / "Local Builds"
        shutil.copytree(FIXTURES, local)
        server = serve(work / "server")
        base = f"http://127.0.0.1:{server.server_address[1]}"
        config = work / "config.toml"
        config.write_text(
            f'search_paths = ["{local}/hello_arm64e.dSYM"]\n'
            f'cache_dir = "{work}/cache"\n'
            "timeout = 10\n"
            f'[[servers]]\nurl = "{base}/native/"\nlayout = "native"\n'
            f'[[servers]]\nurl = "{base}/"\nlayout = "template"\ntemplate = "zips/{{UUID}}.dSYM.zip"\n'
            f'[[servers]]\nurl = "{base}/ssqp/"\nlayout = "ssqp"\n'
        )
        env = {**os.environ, "HOME": str(work), "DSYMFIND_CONFIG": str(config)}
        print(f"demo symbol server: {base} (native, zip template, ssqp layouts)\n")

        print("1. A dSYM in a search path, answered locally:")
        helper(env, uuid_of("hello_arm64e"))
        print("2. A miss: the downloader fetches it (gzip'd, native layout), verifies, publishes:")
        helper(env, uuid_of("hello"))
        print("   ... and the next lookup answers from the cache:")
        helper(env, uuid_of("hello").lower())
        print("3. A universal binary by path (split on spaces as LLDB does): a zipped bundle:")
        helper(env, "--ignoreNegativeCache", *str(local / "universal").split(" "))
        print("4. The ssqp layout:")
        helper(env, uuid_of("libgreet.dylib"))
        print("5. A UUID no server has: empty answer, then the negative cache answers at once:")
        missing = "00000000-1111-2222-3333-444444444444"
        helper(env, missing)
        helper(env, missing)
        tree = work / "cache" / "uuids"
        links = sorted(p for p in tree.rglob("*") if p.is_symlink())
        print(f"The cache's file-mapped tree ({tree}), for DBGFileMappedPaths:")
        for link in links:
            print(f"  {link.relative_to(tree)} -> {os.readlink(link)}")
        print("\n6. What the admin commands say about it:")
        for verb in ("status", "check"):
            print(f"$ dsymfind {verb}")
            done = subprocess.run(
                [str(BIN / "dsymfind"), verb], env=env, capture_output=True, text=True
            )
            print("".join(f"  {line}\n" for line in (done.stdout + done.stderr).splitlines()))
        server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
