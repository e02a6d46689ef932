"""A small `timeout` still fetches: the helper starts the detached downloader (a fork and
exec, not a wait), answers "continues" at its deadline, and a later lookup finds the dSYM.
Real helper processes, real downloaders, a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import FIXTURES, HELLO_UUID, LAYOUT_PATHS, UNIVERSAL_UUIDS, write_config
from support.processes import HelperRun, run_helper
from support.served import HELLO_DWARF, ZIP_TEMPLATE, serve_universal_zips

# Valid, and shorter than the helper's exit margin: no time at all to wait.
HELPER_TIMEOUT = 0.1
# Process start-up on a loaded 2-core machine; the deadline itself is HELPER_TIMEOUT.
START_UP_ALLOWANCE = 2.5
# How long the detached downloaders may take to publish (interpreter start-ups included).
SETTLE = 30.0
CONTINUES = "continues in the background"


def configure(config_file: Path, server: ss.SymbolServer, *, layout: str, extra: str = "") -> None:
    write_config(
        config_file,
        f"timeout = {HELPER_TIMEOUT}\n"
        f"[[servers]]\nurl = '{server.url}/'\nlayout = '{layout}'\n{extra}",
    )


def timed_helper(*args: str) -> HelperRun:
    """The helper, which must keep to its deadline (plus process start-up)."""
    started = time.monotonic()
    run = run_helper(*args)
    assert time.monotonic() - started < HELPER_TIMEOUT + START_UP_ALLOWANCE
    return run


def poll_until_found(*args: str, uuids: list[str]) -> HelperRun:
    """Ask again, as lldb's user would, until every UUID is answered with its dSYM."""
    end = time.monotonic() + SETTLE
    while True:
        run = timed_helper(*args)
        if all("DBGDSYMPath" in run.plist.get(uuid, {}) for uuid in uuids):
            return run
        for uuid in uuids:
            error = run.plist.get(uuid, {}).get("DBGError")
            assert error is None or CONTINUES in error, error
        assert time.monotonic() < end, f"not fetched within {SETTLE:g} s: {run.plist}"
        time.sleep(0.2)


def test_a_tiny_timeout_still_starts_the_download(
    server: ss.SymbolServer, config_file: Path, cache_dir: Path
) -> None:
    path = f"/{LAYOUT_PATHS['native']}"
    server.route(path, ss.body(HELLO_DWARF))
    configure(config_file, server, layout="native")

    first = timed_helper(HELLO_UUID)

    assert CONTINUES in first.entry(HELLO_UUID)["DBGError"]
    found = poll_until_found(HELLO_UUID, uuids=[HELLO_UUID]).entry(HELLO_UUID)
    dsym = Path(found["DBGDSYMPath"])
    assert dsym.read_bytes() == HELLO_DWARF
    assert dsym.is_relative_to(cache_dir / "dsyms")
    assert server.count(path) == 1  # one downloader, however many helpers asked


def test_every_slice_of_a_universal_file_starts_its_download(
    server: ss.SymbolServer, config_file: Path, tmp_path: Path
) -> None:
    serve_universal_zips(server)
    configure(config_file, server, layout="template", extra=f"template = '{ZIP_TEMPLATE}'\n")
    executable = tmp_path / "bin" / "universal"  # no dSYM beside it: only the server has one
    executable.parent.mkdir()
    shutil.copy(FIXTURES / "universal", executable)
    uuids = list(UNIVERSAL_UUIDS.values())

    first = timed_helper(str(executable))

    assert set(first.plist) == set(uuids)
    for uuid in uuids:
        assert CONTINUES in first.entry(uuid)["DBGError"]
    found = poll_until_found(str(executable), uuids=uuids)
    for arch, uuid in UNIVERSAL_UUIDS.items():
        assert found.entry(uuid)["DBGArchitecture"] == arch
        assert Path(found.entry(uuid)["DBGDSYMPath"]).name == "universal"
