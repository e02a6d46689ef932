"""The helper's miss path end to end: real helper processes, a real detached downloader,
a real HTTP server on 127.0.0.1, and the cache checked afterwards."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    GREET_UUID,
    HELLO_UUID,
    LAYOUT_PATHS,
    UNIVERSAL_UUIDS,
    write_config,
)
from support.negative import negative_markers
from support.processes import (
    BIN,
    COSTLY_MODULES,
    modules_loaded_answering,
    run_helper,
    wait_for,
)
from support.served import (
    GREET_DWARF,
    HELLO_DWARF,
    ZIP_TEMPLATE,
    serve_universal_zips,
    zipped_bundle,
)

HEX = HELLO_UUID.replace("-", "")


def configure(
    config_file: Path, server_url: str, *, layout: str = "native", extra: str = "", **server: str
) -> None:
    lines = [
        f"timeout = {server.pop('timeout', '20')}",
        extra,
        "[[servers]]",
        f"url = '{server_url}/'",
        f"layout = '{layout}'",
    ]
    lines += [f"{key} = {value}" for key, value in server.items()]
    write_config(config_file, "\n".join(lines) + "\n")


def tree_link(cache_dir: Path, uuid: str) -> Path:
    hexa = uuid.replace("-", "")
    return (
        cache_dir
        / "uuids"
        / hexa[0:4]
        / hexa[4:8]
        / hexa[8:12]
        / hexa[12:16]
        / hexa[16:20]
        / hexa[20:]
    )


def assert_nothing_cached(cache_dir: Path, uuid: str) -> None:
    assert not os.path.lexists(tree_link(cache_dir, uuid))
    assert not (cache_dir / "dsyms" / uuid.replace("-", "")).exists()


@pytest.mark.parametrize("layout", sorted(LAYOUT_PATHS))
def test_each_layout_fetches_verifies_and_publishes(
    layout: str, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(f"/{LAYOUT_PATHS[layout]}", ss.body(HELLO_DWARF))
    configure(config_file, server.url, layout=layout)

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    dsym_path = Path(entry["DBGDSYMPath"])
    assert dsym_path.read_bytes() == HELLO_DWARF
    assert dsym_path.is_relative_to(cache_dir / "dsyms")
    assert tree_link(cache_dir, HELLO_UUID).resolve() == dsym_path.resolve()
    assert entry["DBGArchitecture"] == "arm64"
    requests = len(server.requests)
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"] == str(dsym_path)
    assert len(server.requests) == requests  # the second lookup is a cache hit


def test_gzip_answer_and_casing_override(server: ss.SymbolServer, config_file: Path) -> None:
    server.route(f"/{LAYOUT_PATHS['native'].lower()}", ss.body(gzip.compress(HELLO_DWARF)))
    configure(config_file, server.url, layout="native", casing="'lower'")
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert Path(entry["DBGDSYMPath"]).read_bytes() == HELLO_DWARF


def test_zipped_universal_bundle_publishes_every_slice(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    serve_universal_zips(server)
    configure(config_file, server.url, layout="template", template=f"'{ZIP_TEMPLATE}'")

    arm64 = run_helper(UNIVERSAL_UUIDS["arm64"]).entry(UNIVERSAL_UUIDS["arm64"])

    assert Path(arm64["DBGDSYMPath"]).name == "universal"
    for uuid in UNIVERSAL_UUIDS.values():
        assert tree_link(cache_dir, uuid).resolve() == Path(arm64["DBGDSYMPath"]).resolve()
    plist_path = Path(arm64["DBGDSYMPath"]).parent.parent / f"{UNIVERSAL_UUIDS['x86_64']}.plist"
    assert plist_path.is_file()
    before = len(server.requests)
    x86 = run_helper(UNIVERSAL_UUIDS["x86_64"]).entry(UNIVERSAL_UUIDS["x86_64"])
    assert x86["DBGArchitecture"] == "x86_64"
    assert len(server.requests) == before


@pytest.mark.parametrize(
    "route",
    [
        ss.body(GREET_DWARF),  # another UUID
        ss.body((FIXTURES / "hello").read_bytes()),  # the executable, not its dSYM
        ss.body(b"<html><body>Sign in</body></html>", content_type="text/html"),
        ss.body(b""),
        ss.truncated(HELLO_DWARF, 2000),
    ],
    ids=["wrong-uuid", "executable", "html", "empty", "truncated"],
)
def test_bad_answers_never_reach_the_cache(
    route: ss.Route, server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(f"/{LAYOUT_PATHS['native']}", route)
    configure(config_file, server.url)

    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)

    assert "failed" in entry["DBGError"]
    assert_nothing_cached(cache_dir, HELLO_UUID)
    assert not any((cache_dir / "tmp").iterdir()) if (cache_dir / "tmp").exists() else True


def test_bytes_beyond_content_length_are_refused(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(f"/{LAYOUT_PATHS['native']}", ss.overlong(HELLO_DWARF, b"trailing junk"))
    configure(config_file, server.url)
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "sent more than the" in entry["DBGError"]
    assert_nothing_cached(cache_dir, HELLO_UUID)


def test_oversized_answer_is_refused(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(f"/{LAYOUT_PATHS['native']}", ss.body(HELLO_DWARF))
    configure(config_file, server.url, extra="max_download_bytes = 1000")
    assert "failed" in run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert_nothing_cached(cache_dir, HELLO_UUID)


def test_server_error_is_retried(server: ss.SymbolServer, config_file: Path) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    server.route(path, ss.sequence(ss.body(b"", 500), ss.body(HELLO_DWARF)))
    configure(config_file, server.url)
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert server.count(path) == 2


def test_negative_cache_and_its_bypass(server: ss.SymbolServer, config_file: Path) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    configure(config_file, server.url)
    assert run_helper(HELLO_UUID).plist == {}
    assert server.count(path) == 1
    assert run_helper(HELLO_UUID).plist == {}
    assert server.count(path) == 1  # answered by the negative cache
    server.route(path, ss.body(HELLO_DWARF))
    assert "DBGDSYMPath" in run_helper("--ignoreNegativeCache", HELLO_UUID).entry(HELLO_UUID)
    assert server.count(path) == 2


def test_server_errors_are_not_remembered_as_not_found(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    server.route(path, ss.body(b"", 503))
    configure(config_file, server.url, extra="server_backoff = 0")
    assert "failed" in run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert negative_markers(cache_dir) == []
    server.route(path, ss.body(HELLO_DWARF))
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)


def test_failing_server_is_skipped_for_a_while(server: ss.SymbolServer, config_file: Path) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    server.route(path, ss.body(b"", 503))
    configure(config_file, server.url, extra="server_backoff = 600")
    run_helper(HELLO_UUID)
    tried = server.count(path)
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert "skipped" in entry["DBGError"]
    assert server.count(path) == tried


def test_slow_server_deadline_then_background_completion(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(f"/{LAYOUT_PATHS['native']}", ss.slow_pieces(HELLO_DWARF, 8, interval=0.5))
    configure(config_file, server.url, timeout="1")

    started = time.monotonic()
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    elapsed = time.monotonic() - started

    assert "continues in the background" in entry["DBGError"]
    assert elapsed < 1.0 + 1.5  # the deadline, plus interpreter start-up on a loaded machine
    wait_for(lambda: tree_link(cache_dir, HELLO_UUID).exists())
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)


def test_sixteen_helpers_one_download(server: ss.SymbolServer, config_file: Path) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    server.route(path, ss.slow_pieces(HELLO_DWARF, 4, interval=0.2))
    configure(config_file, server.url)

    with ThreadPoolExecutor(16) as pool:
        runs = list(pool.map(lambda _: run_helper(HELLO_UUID), range(16)))

    paths = {run.entry(HELLO_UUID)["DBGDSYMPath"] for run in runs}
    assert len(paths) == 1
    assert server.count(path) == 1


def test_killed_downloader_leaves_a_valid_cache(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    server.route(path, ss.slow(HELLO_DWARF, step=1024, interval=0.1))
    configure(config_file, server.url, timeout="0.5")
    assert "continues" in run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    record = cache_dir / "downloads" / f"{HEX}.json"
    wait_for(lambda: record.exists() and json.loads(record.read_text())["transfers"])
    os.kill(json.loads(record.read_text())["pid"], signal.SIGKILL)

    assert_nothing_cached(cache_dir, HELLO_UUID)
    server.route(path, ss.body(HELLO_DWARF))
    configure(config_file, server.url)
    entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
    assert Path(entry["DBGDSYMPath"]).read_bytes() == HELLO_DWARF
    assert list((cache_dir / "tmp").iterdir()) == []  # the next run cleared the leftovers


def evil_zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "archive",
    [
        evil_zip({"../../escaped/hello": HELLO_DWARF}),
        evil_zip({"hello.dSYM/Contents/Resources/DWARF/hello": HELLO_DWARF + b"\0" * (3 << 20)}),
    ],
    ids=["zip-slip", "zip-bomb"],
)
def test_hostile_archives_are_rejected(
    archive: bytes, server: ss.SymbolServer, config_file: Path, cache_dir: Path, tmp_path: Path
) -> None:
    server.route(f"/{HELLO_UUID}.zip", ss.body(archive))
    configure(
        config_file,
        server.url,
        layout="template",
        template="'{UUID}.zip'",
        extra="max_download_bytes = '2MiB'",
    )
    assert "failed" in run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGError"]
    assert_nothing_cached(cache_dir, HELLO_UUID)
    assert not list(tmp_path.rglob("escaped"))


def test_credentials_stay_behind_on_a_redirect_to_another_host(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYMBOL_TOKEN", "s3cret")
    with ss.SymbolServer() as origin, ss.SymbolServer() as other:
        other.route(f"/{LAYOUT_PATHS['native']}", ss.body(HELLO_DWARF))
        origin.route(
            f"/{LAYOUT_PATHS['native']}", ss.redirect(f"{other.url}/{LAYOUT_PATHS['native']}")
        )
        configure(
            config_file,
            origin.url,
            headers="{ Authorization = 'Bearer ${SYMBOL_TOKEN}', X-Api-Key = '${SYMBOL_TOKEN}' }",
        )

        assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)

        assert origin.requests[0].headers["authorization"] == "Bearer s3cret"
        (forwarded,) = other.requests
        assert "authorization" not in forwarded.headers and "x-api-key" not in forwarded.headers
    log = Path(os.environ["XDG_STATE_HOME"]) / "dsymfind" / "dsymfind.log"
    assert "s3cret" not in log.read_text()


def test_copy_executable_fetches_the_executable(server: ss.SymbolServer, config_file: Path) -> None:
    server.route(f"/{LAYOUT_PATHS['native']}", ss.body(HELLO_DWARF))
    server.route(f"/{LAYOUT_PATHS['native']}.app", ss.body((FIXTURES / "hello").read_bytes()))
    configure(config_file, server.url)
    entry = run_helper("--copyExecutable", HELLO_UUID).entry(HELLO_UUID)
    assert Path(entry["DBGSymbolRichExecutable"]).read_bytes() == (FIXTURES / "hello").read_bytes()


def test_downloader_survives_the_helper_being_killed(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    server.route(f"/{LAYOUT_PATHS['native']}", ss.slow_pieces(HELLO_DWARF, 4, interval=0.3))
    configure(config_file, server.url)
    helper = subprocess.Popen(
        [str(BIN / "dsymForUUID"), HELLO_UUID], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for(lambda: (cache_dir / "downloads" / f"{HEX}.json").exists())
    helper.kill()  # what LLDB does after its own timeout: the helper's pid only
    helper.communicate()
    wait_for(lambda: tree_link(cache_dir, HELLO_UUID).exists())
    assert GREET_UUID not in run_helper(HELLO_UUID).plist


def test_negative_cache_answer_imports_nothing_costly(
    server: ss.SymbolServer, config_file: Path
) -> None:
    """LLDB asks for hundreds of UUIDs nobody has: that answer must stay as cheap as a hit."""
    configure(config_file, server.url)
    assert run_helper(HELLO_UUID).plist == {}  # leaves the negative-cache marker
    loaded = modules_loaded_answering(HELLO_UUID, b"<dict/>")
    assert loaded & COSTLY_MODULES == set()
    assert "dsymfind.fetch.miss" not in loaded  # the negative cache answers before the miss path
    assert server.count(f"/{LAYOUT_PATHS['native']}") == 1


def test_a_stalled_server_does_not_delay_the_winner(config_file: Path) -> None:
    """Publication comes before the cancelled candidates wind down (a stall lasts 5 s)."""
    with ss.SymbolServer() as stalled, ss.SymbolServer() as good:
        stalled.route(f"/{LAYOUT_PATHS['native']}", ss.stall())
        good.route(f"/{LAYOUT_PATHS['native']}", ss.body(HELLO_DWARF))
        write_config(
            config_file,
            "timeout = 3\n"
            f"[[servers]]\nurl = '{stalled.url}/'\nlayout = 'native'\n"
            f"[[servers]]\nurl = '{good.url}/'\nlayout = 'native'\n",
        )
        entry = run_helper(HELLO_UUID).entry(HELLO_UUID)
        assert Path(entry["DBGDSYMPath"]).read_bytes() == HELLO_DWARF


def test_each_slice_of_a_file_gets_its_own_answer(
    server: ss.SymbolServer, config_file: Path, tmp_path: Path
) -> None:
    arm64, x86 = UNIVERSAL_UUIDS["arm64"], UNIVERSAL_UUIDS["x86_64"]
    server.route(
        f"/zips/{arm64}.dSYM.zip",
        ss.body(zipped_bundle(FIXTURES / "universal.dSYM")),
    )
    server.route(f"/zips/{x86}.dSYM.zip", ss.body(b"", 500))
    configure(
        config_file,
        server.url,
        layout="template",
        template="'zips/{UUID}.dSYM.zip'",
        extra="server_backoff = 0",
    )
    binary = tmp_path / "universal"
    binary.write_bytes((FIXTURES / "universal").read_bytes())

    from dsymfind.apple import macho

    assert [s.arch for s in macho.read_slices(str(binary))] == [
        "x86_64",
        "arm64",
    ]  # x86_64 fails first

    run = run_helper(str(binary))

    assert "failed" in run.entry(x86)["DBGError"]
    assert "DBGDSYMPath" in run.entry(arm64)


def test_a_downloader_that_dies_at_once_ends_the_wait(
    server: ss.SymbolServer, config_file: Path, tmp_path: Path
) -> None:
    """No status record will come: the helper says so at once instead of at its deadline."""
    configure(config_file, server.url, timeout="20")
    hook = tmp_path / "hook"
    hook.mkdir()
    # The downloader starts isolated (-I -S) on the helper's own sys.path, so a module there
    # that only it imports is the way in: it reads Mach-O files, the helper does not.
    (hook / "macholib").mkdir()
    (hook / "macholib" / "__init__.py").write_text(
        "import sys\nsys.exit(3)  # the downloader dies first\n"
    )
    env = {**os.environ, "PYTHONPATH": str(hook)}
    started = time.monotonic()
    answer = run_helper(HELLO_UUID, env=env).entry(HELLO_UUID)
    assert "stopped without a result" in answer["DBGError"]
    assert time.monotonic() - started < 10  # not the 20 s deadline


class _Recorded:
    """A lookup whose cache holds a downloader's final record, and nothing in its tree."""

    def __init__(self, cache_dir: Path) -> None:
        from dsymfind.paths import CachePaths

        self.cache = CachePaths(str(cache_dir))

    def find(self, uuid: str) -> dict[str, str]:
        return {"found": uuid}

    def recall(self, uuid: str) -> None:
        return None


def test_the_helper_that_started_the_downloader_wakes_when_its_pipe_closes(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not at its next poll: the downloader closes the pipe right after its final record."""
    import threading

    from dsymfind.cache import records
    from dsymfind.fetch import miss
    from dsymfind.paths import CachePaths

    monkeypatch.setattr(miss, "POLL_INTERVAL", 30.0)  # a poll would outlast the test
    told, tell = os.pipe()
    since = time.time()

    def downloader() -> None:
        time.sleep(0.2)  # the helper is waiting by then
        records.StatusWriter(CachePaths(str(cache_dir)), HELLO_UUID).finish(records.DONE)
        os.close(tell)

    lookup = _Recorded(cache_dir)
    starter = miss._Starter(lookup, HELLO_UUID, time.monotonic() + 60, False, False)  # type: ignore[arg-type]
    # The child it started: alive (a real child of this process) until the test ends.
    child = subprocess.Popen(["sleep", "60"])
    starter.child, starter.told = child.pid, told
    worker = threading.Thread(target=downloader)
    worker.start()
    try:
        started = time.monotonic()
        found = miss._wait(
            lookup,  # type: ignore[arg-type]
            HELLO_UUID,
            time.monotonic() + 60,
            since,
            until_done=False,
            starter=starter,
        )
        assert found == {"found": HELLO_UUID}
        assert time.monotonic() - started < 10
        assert starter.told is None  # heard, and closed
    finally:
        worker.join()
        starter.close()
        child.kill()
        child.wait()
