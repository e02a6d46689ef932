"""The demo: a symbol server on 127.0.0.1 serving the bundled fixtures, published into it
by `dsymfind publish` as CI would (names included), and real lookups; on Linux, lldb
loading a fetched dSYM.

`--team`: the same fixtures shared through an S3 bucket (SeaweedFS on 127.0.0.1), as
docs/publishing.md describes: CI publishes them with its read-write keys, then a developer's helper with read-only keys fetches them.

Everything lives in a temporary folder (its own HOME, config and cache); nothing on the
machine is changed and no other host is contacted.
"""

from __future__ import annotations

import argparse
import functools
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "macho"
BIN = Path(sys.executable).parent
UUIDS = json.loads((FIXTURES / "uuids.json").read_text())


def uuid_of(name: str, arch: str | None = None) -> str:
    return next(u["uuid"] for u in UUIDS[name]["uuids"] if arch is None or u["arch"] == arch)


def dwarf(bundle: str) -> Path:
    return next((FIXTURES / bundle / "Contents" / "Resources" / "DWARF").iterdir())


def build_server_tree(work: Path, env: dict[str, str]) -> None:
    """The store in `work`/server as `dsymfind publish` writes one, names included (each
    file's name and bundle travel beside it), in the native and ssqp layouts, from CI's
    `build/`; and for the zip template a zipped bundle, which carries its own names."""
    for name in ("hello", "crashy", "libgreet.dylib"):
        shutil.copytree(FIXTURES / f"{name}.dSYM", work / "build" / f"{name}.dSYM")
    native = ["--to", "server/native", "--layout", "native"]
    cli(env, work, "publish", *native, "build/hello.dSYM", "build/crashy.dSYM")
    cli(
        env, work, "publish", "--to", "server/ssqp", "--layout", "ssqp", "build/libgreet.dylib.dSYM"
    )
    zips = work / "server" / "zips"
    zips.mkdir()
    for arch in ("arm64", "x86_64"):
        with zipfile.ZipFile(zips / f"{uuid_of('universal', arch)}.dSYM.zip", "w") as z:
            for path in sorted((FIXTURES / "universal.dSYM").rglob("*")):
                z.write(
                    path, Path("universal.dSYM") / path.relative_to(FIXTURES / "universal.dSYM")
                )


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--team",
        action="store_true",
        help="share the fixtures through an S3 bucket (SeaweedFS on 127.0.0.1) instead",
    )
    if parser.parse_args(argv).team:
        return team()
    with tempfile.TemporaryDirectory(prefix="dsymfind-demo-") as tmp:
        work = Path(tmp)
        (work / "server").mkdir()
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
        print("0. Its store, filled as CI fills one:")
        build_server_tree(work, env)

        print("1. A dSYM in a search path, answered locally:")
        helper(env, uuid_of("hello_arm64e"))
        print("2. A miss: the downloader fetches it (native layout), verifies it, and caches it")
        print("   under the names it was published with:")
        fetched = helper(env, uuid_of("hello"))
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
        print("\n6. A real crash report symbolicated: its app's dSYM fetched from the server,")
        print(
            "   verified and cached; inlined frames and source lines; system frames as they came:"
        )
        symbolicate(env, work)
        print("\n7. What the admin commands say about it:")
        for verb in ("status", "check"):
            cli(env, work, verb)
        builds_and_groups(env, work)
        lldb_on_linux(local / "hello", fetched[uuid_of("hello")]["DBGDSYMPath"])
        server.shutdown()
    return 0


LLDB = shutil.which("lldb-14") or shutil.which("lldb")


def lldb_on_linux(executable: Path, dwarf_file: str) -> None:
    """Where no DebugSymbols runs the helper (Linux), the fetched dSYM is given to lldb by
    its DWARF file: `add-dsym BUNDLE` fails there."""
    if LLDB is None:
        print("11. (no lldb here: lldb-14 shows the fetched dSYM's names and lines)")
        return
    print("11. lldb on Linux, which never runs the helper: the fetched DWARF file, added by hand")
    commands = [
        f'target create --arch arm64 "{executable}"',
        f'target symbols add "{dwarf_file}"',
        "image lookup -n main",
    ]
    done = subprocess.run(
        [LLDB, "-b", *(word for command in commands for word in ("-o", command))],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        # Debian's lldb looks for its Python module in a folder that does not exist.
        env={**os.environ, "PYTHONPATH": "/usr/lib/python3/dist-packages"},
        timeout=120,
    )
    print(f"$ {Path(LLDB).name} -b " + " ".join(f"-o '{command}'" for command in commands))
    shown = done.stdout[done.stdout.find("(lldb)") :]  # not the Python plugin's start-up noise
    print("".join(f"  {line}\n" for line in shown.splitlines() if line.strip()))


CRASH_REPORTS = ROOT / "tests" / "fixtures" / "crashreports"
CRASH_REPORT = CRASH_REPORTS / "crashy-macos.ips"


def symbolicate(env: dict[str, str], work: Path) -> None:
    """`dsymfind symbolicate` of the bundled report, shown as Apple writes a symbolicated
    thread; the whole report (every key kept) is written beside it."""
    out = work / "crashy-symbolicated.ips"
    started = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "dsymfind"), "symbolicate", "-o", str(out), str(CRASH_REPORT)],
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = (time.perf_counter() - started) * 1000
    print(
        f"$ dsymfind symbolicate {CRASH_REPORT.name}    ({elapsed:.0f} ms, exit {done.returncode})"
    )
    print("".join(f"  {line}\n" for line in done.stderr.splitlines()), end="")
    report = json.loads(out.read_text().split("\n", 1)[1])
    images = report["usedImages"]
    crashed = next(t for t in report["threads"] if t.get("triggered"))
    print("  Thread 0 Crashed:")
    for number, frame in enumerate(crashed["frames"]):
        name = images[frame["imageIndex"]]["name"]
        where = f" ({frame['sourceFile']}:{frame['sourceLine']})" if "sourceFile" in frame else ""
        inline = " [inlined]" if frame.get("inline") else ""
        print(
            f"  {number:<3} {name:<12} {frame['symbol']} + {frame['symbolLocation']}{where}{inline}"
        )


def builds_and_groups(env: dict[str, str], work: Path) -> None:
    """The build CI published, as `builds` lists it; a build checked before it ships (one
    framework whose dSYM was never kept); and a batch of crash reports grouped."""
    print("8. The builds the store holds, each recorded by its publish:")
    cli(env, work, "builds", "--store", "server/native")
    print("9. A build checked before it ships: the app's dSYM came with it, a vendor")
    print("   library's is nowhere (exit 1: a CI gate before the release, not after a crash):")
    product = work / "build-products"
    product.mkdir()
    shutil.copy2(FIXTURES / "crashy", product / "crashy")
    shutil.copytree(FIXTURES / "crashy.dSYM", product / "crashy.dSYM")
    shutil.copy2(FIXTURES / "libgreet.dylib", product / "libvendor.dylib")
    cli(env, work, "check-build", "build-products")
    print("10. Crash reports from the field, grouped by how they ended and where:")
    reports = work / "reports"
    reports.mkdir()
    for copy in range(3):
        shutil.copy2(CRASH_REPORT, reports / f"crashy-{copy}.ips")
    shutil.copy2(CRASH_REPORTS / "hello-macos.ips", reports / "hello.ips")
    cli(env, work, "symbolicate", "--group", "--offline", "-o", "groups.txt", "reports")
    print("".join(f"  {line}\n" for line in (work / "groups.txt").read_text().splitlines()))


# Where the team demo's CI publishes: the `symbols` bucket, under a prefix for one product.
TEAM_URL = "s3://symbols/demo/"
PROFILE = "symbols-read"
# A UUID nobody published: the reader may list the bucket, so its miss is a 404, "not found".
UNPUBLISHED = "00000000-1111-2222-3333-444444444444"


def team() -> int:
    """CI publishes the bundled dSYMs into SeaweedFS with its keys, then a developer's helper
    with read-only keys fetches them; SeaweedFS is stopped however the demo ends."""
    # The suite's launcher: loopback only, identities admin/ci/reader/anonymous with new keys
    # each run, and the kernel stops weed if we die. Imported here so that only this mode
    # needs boto3 and the `weed` binary (the test extra, which scripts/bootstrap installs).
    sys.path.insert(0, str(ROOT / "tests"))
    from support.seaweed import REGION, SeaweedError, SeaweedS3

    with tempfile.TemporaryDirectory(prefix="dsymfind-demo-") as tmp:
        work = Path(tmp)
        try:
            engine = SeaweedS3(work / "seaweed").start()
        except SeaweedError as error:  # no `weed`, or it did not start: one line, no traceback
            print(f"demo --team: {error}", file=sys.stderr)
            return 1
        pid = engine.pid
        try:
            print(
                f"SeaweedFS S3 on {engine.endpoint_url} (pid {pid}), work folder {work};\n"
                "identities: ci may read and write bucket `symbols`, reader may read and "
                "list it\n"
            )
            team_demo(work, engine, REGION)
        finally:
            engine.stop()
        print(f"SeaweedFS stopped (pid {pid})")
    return 0


def team_demo(work: Path, engine: Any, region: str) -> None:
    build = work / "build"
    for bundle in sorted(FIXTURES.glob("*.dSYM")):
        shutil.copytree(bundle, build / bundle.name)
    published = sorted(
        {u["uuid"] for name, v in UUIDS.items() if ".dSYM/" in name for u in v["uuids"]}
    )
    ci_config = work / "ci" / "config.toml"
    ci_config.parent.mkdir()
    ci_config.write_text(f'log_file = "{work}/ci/dsymfind.log"\n')
    publish = ["publish", "--to", TEAM_URL, "--endpoint-url", engine.endpoint_url, "build/"]

    ci, reader = engine.identities["ci"], engine.identities["reader"]
    print("1. The developers' read-only keys cannot publish (nothing is written):")
    cli(isolated_env(work / "ci", ci_config, reader), work, *publish, identity="reader")
    print("   CI publishes the build's dSYMs with its read-write keys from the environment:")
    cli(isolated_env(work / "ci", ci_config, ci), work, *publish, identity="ci")
    print("   A re-run of the CI job: create-only, the same bytes are already there:")
    cli(isolated_env(work / "ci", ci_config, ci), work, *publish, identity="ci")

    home = work / "developer"
    config = home / "config.toml"
    credentials = home / ".aws" / "credentials"
    credentials.parent.mkdir(parents=True)
    config.write_text(
        f'cache_dir = "{home}/cache"\n'
        f'log_file = "{home}/dsymfind.log"\n'
        "timeout = 10\n"
        "\n"
        "[[servers]]\n"
        'name = "team"\n'
        f'url = "{TEAM_URL}"\n'
        f'endpoint_url = "{engine.endpoint_url}"\n'
        f'region = "{region}"\n'
        f'profile = "{PROFILE}"\n'
    )
    env = isolated_env(home, config)
    print(f"\n2. A developer's helper: {config}\n")
    print("".join(f"     {line}".rstrip() + "\n" for line in config.read_text().splitlines()))
    print(f"   with the reader's keys in {credentials} under [{PROFILE}].\n")

    write_credentials(credentials, reader.access_key, "not-the-reader's-secret")
    print('   A wrong secret: an error naming the server, not remembered as "not found":')
    helper(env, published[0])
    write_credentials(credentials, reader.access_key, reader.secret_key)
    print("3. With the right keys each published UUID is fetched from the bucket and verified:")
    for uuid in published:
        helper(env, uuid)
    print("   ... and the next lookup answers from the cache:")
    helper(env, published[0].lower())
    print("4. A UUID nobody published: empty answer, then the negative cache answers at once:")
    helper(env, UNPUBLISHED)
    helper(env, UNPUBLISHED)
    settle(home / "cache", [*published, UNPUBLISHED])
    print("5. What the admin commands say about it:")
    for verb in ("status", "check"):
        cli(env, work, verb)


def isolated_env(home: Path, config: Path, keys: Any = None) -> dict[str, str]:
    """The demo's own HOME and config; no AWS_* or DSYMFIND_* setting of the user's, no proxy
    for loopback, and no instance-metadata probe (botocore's last resort, off this machine).
    `keys`, a SeaweedFS identity, goes into the environment, where CI keeps its keys."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DSYMFIND_"))}
    env.update(
        HOME=str(home),
        DSYMFIND_CONFIG=str(config),
        AWS_EC2_METADATA_DISABLED="true",
        NO_PROXY="127.0.0.1",
        no_proxy="127.0.0.1",
    )
    if keys is not None:
        env.update(AWS_ACCESS_KEY_ID=keys.access_key, AWS_SECRET_ACCESS_KEY=keys.secret_key)
    return env


def write_credentials(path: Path, access_key: str, secret_key: str) -> None:
    """The shared credentials file botocore reads for `profile`; 0600, as secrets should be."""
    text = f"[{PROFILE}]\naws_access_key_id = {access_key}\naws_secret_access_key = {secret_key}\n"
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)


def cli(env: dict[str, str], cwd: Path, *args: str, identity: str = "") -> None:
    """`dsymfind ARGS` as a user would run it, printed with its output; `identity` names
    whose keys the environment holds (the keys themselves are not shown)."""
    shown = f"AWS_ACCESS_KEY_ID=<{identity}'s> AWS_SECRET_ACCESS_KEY=<{identity}'s> "
    shown = shown if identity else ""
    print(f"$ {shown}dsymfind {' '.join(args)}")
    done = subprocess.run(
        [str(BIN / "dsymfind"), *args], env=env, cwd=cwd, capture_output=True, text=True
    )
    print("".join(f"  {line}\n" for line in (done.stdout + done.stderr).splitlines()))


def settle(cache: Path, uuids: list[str], timeout: float = 30) -> None:
    """Wait until no downloader holds a UUID's lock, so none is left asking a stopped engine."""
    from dsymfind.cache import locks
    from dsymfind.paths import CachePaths

    cache = CachePaths(str(cache))
    deadline = time.monotonic() + timeout
    while any(locks.is_held(cache, u) for u in uuids) and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    raise SystemExit(main())
