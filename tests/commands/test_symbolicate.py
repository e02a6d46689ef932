"""`dsymfind symbolicate` end to end: reports in each form, served and missing dSYMs,
bad input, outputs and exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import FIXTURES, folder_with, toml_list, write_config
from support.processes import modules_loaded_running, run_cli, run_helper
from support.seaweed import SYMBOLS
from support.served import url_path
from support.symbolication import (
    CRASHY_DWARF,
    CRASHY_EXEC_UUID,
    CRASHY_UUIDS,
    crash_report,
    crashy_search_path,
    ips_report,
    return_addresses,
    symbolicate,
)

from dsymfind.cache import locks
from dsymfind.main import main
from dsymfind.stores.layouts import debug_file_key
from dsymfind.symbolicate import symcaches

ARM = CRASHY_UUIDS["arm64"]
X86 = CRASHY_UUIDS["x86_64"]
# Offsets into crashy's arm64 slice: the crash inside twice() inlined into leaf(), then
# the return address in trigger() after its call to leaf().
LEAF_CRASH, TRIGGER_RETURN = 0x338, 0x380
# trigger()'s first instruction: also the return address of fail()'s noreturn call.
TRIGGER_START = 0x368
# Per slice (llvm-objdump): leaf()'s start, and an instruction of twice() inlined in it.
LEAF = {"arm64": (0x328, LEAF_CRASH), "x86_64": (0x370, 0x379)}


@pytest.fixture
def local_dsyms(tmp_path: Path, config_file: Path) -> Path:
    return crashy_search_path(tmp_path, config_file)


run = symbolicate


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_an_ips_gains_names_inlined_frames_and_lines(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN]))
    status, out, err = run(report, capsys=capsys)
    assert status == 0
    header, body = out.split("\n", 1)
    assert json.loads(header)["bug_type"] == "309"
    frames = json.loads(body)["threads"][0]["frames"]
    assert frames == [
        {
            "imageOffset": LEAF_CRASH,
            "imageIndex": 0,
            "symbol": "twice",
            "symbolLocation": 16,
            "sourceFile": "crashy.c",
            "sourceLine": 10,
            "inline": True,
        },
        {
            "imageOffset": LEAF_CRASH,
            "imageIndex": 0,
            "symbol": "leaf",
            "symbolLocation": 16,
            "sourceFile": "crashy.c",
            "sourceLine": 14,
        },
        # A return address: looked up in the call (line 18), measured from the return.
        {
            "imageOffset": TRIGGER_RETURN,
            "imageIndex": 0,
            "symbol": "trigger",
            "symbolLocation": 24,
            "sourceFile": "crashy.c",
            "sourceLine": 27,
        },
    ]
    assert f"found    {ARM}  crashy" in err


def test_a_symbolicated_report_reads_back_unchanged(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN]))
    _, once, _ = run(report, capsys=capsys)
    again = write(tmp_path / "again.ips", once)
    status, twice, _ = run(again, capsys=capsys)
    assert (status, twice) == (0, once)


def test_the_last_exception_backtrace_is_symbolicated_as_return_addresses(
    local_dsyms, tmp_path, capsys
):
    backtrace = [{"imageOffset": o, "imageIndex": 0} for o in (TRIGGER_START, TRIGGER_RETURN)]
    text = ips_report(ARM, "arm64", [LEAF_CRASH], lastExceptionBacktrace=backtrace)
    report = write(tmp_path / "r.ips", text)
    status, out, _ = run(report, capsys=capsys)
    body = json.loads(out.split("\n", 1)[1])
    assert status == 0
    # Its frame 0 is a return address too: fail()'s call, not trigger()'s first byte.
    assert [(f["symbol"], f["sourceLine"]) for f in body["lastExceptionBacktrace"]] == [
        ("fail", 21),
        ("trigger", 27),
    ]
    assert [f["symbol"] for f in body["threads"][0]["frames"]] == ["twice", "leaf"]
    status, out, _ = run("--format", "json", report, capsys=capsys)
    first = json.loads(out)["threads"][0]
    assert (first["index"], first["crashed"]) == (None, True)
    assert [f["symbol"] for f in first["frames"]] == ["fail", "trigger"]


def test_every_key_of_the_body_is_kept(local_dsyms, tmp_path, capsys):
    extra = {"exception": {"type": "EXC_BAD_ACCESS"}, "procName": "crashy", "huge": 10**30}
    text = ips_report(ARM, "arm64", [LEAF_CRASH], **extra)
    _, out, _ = run(write(tmp_path / "r.ips", text), capsys=capsys)
    body = json.loads(out.split("\n", 1)[1])
    original = json.loads(text.split("\n", 1)[1])
    assert {k: v for k, v in body.items() if k != "threads"} == {
        k: v for k, v in original.items() if k != "threads"
    }


def test_frames_the_report_names_are_kept_and_others_symbolicated(local_dsyms, tmp_path, capsys):
    text = ips_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN])
    doc = json.loads(text.split("\n", 1)[1])
    doc["threads"][0]["frames"][1].update(symbol="already", symbolLocation=1)
    doc["threads"][0]["frames"].append({"imageOffset": 4, "imageIndex": 9})  # out of range
    doc["threads"][0]["frames"].append({"imageOffset": -4, "imageIndex": 0})  # negative
    report = write(tmp_path / "r.ips", text.split("\n", 1)[0] + "\n" + json.dumps(doc))
    status, out, _ = run(report, capsys=capsys)
    frames = json.loads(out.split("\n", 1)[1])["threads"][0]["frames"]
    assert status == 2  # written, but two frames could not be symbolicated
    assert [f.get("symbol") for f in frames] == ["twice", "leaf", "already", None, None]
    assert frames[3:] == [{"imageOffset": 4, "imageIndex": 9}, {"imageOffset": -4, "imageIndex": 0}]
    status, out, _ = run("--format", "json", report, capsys=capsys)
    named = json.loads(out)["threads"][0]["frames"][2]
    assert (named["symbol"], named["offset"], named["file"]) == ("already", 1, None)


@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_a_crash_report_is_written_as_apple_writes_a_symbolicated_one(
    local_dsyms, tmp_path, capsys, arch
):
    start, crash = LEAF[arch]
    # The return address after leaf()'s call to norm_of(), and after fail()'s call to the
    # noreturn stop(): the first byte of the next function, trigger().
    after_norm_of, after_stop = (
        a - 0x100000000 for a in return_addresses(FIXTURES / "crashy", arch)[:2]
    )
    offsets = [crash, after_norm_of, after_stop]
    report = write(tmp_path / "crashy.crash", crash_report(CRASHY_UUIDS[arch], arch, offsets))
    status, out, _ = run(report, capsys=capsys)
    assert status == 0
    frames = [line for line in out.splitlines() if "\t" in line]
    assert [line.split("\t")[1].split(" ", 1)[1] for line in frames] == [
        f"twice + {crash - start} (crashy.c:10) [inlined]",
        f"leaf + {crash - start} (crashy.c:14)",
        f"leaf + {after_norm_of - start} (crashy.c:15)",
        f"fail + {after_stop - (start + (0x30 if arch == 'arm64' else 0x20))} (crashy.c:21)",
    ]
    # Everything else is as it was.
    assert out.splitlines()[:3] == Path(report).read_text().splitlines()[:3]
    assert out.endswith(Path(report).read_text().split("Binary Images:")[1])


def test_an_output_that_is_a_pipe_is_written_into_not_replaced(local_dsyms, tmp_path, capsys):
    # -o /dev/null once put a regular file in /dev/null's place (a root user's rename): a
    # FIFO stands for every device and pipe here, without risking the machine's /dev/null.
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()), daemon=True)
    reader.start()
    status, _, err = run("--format", "json", "-o", str(fifo), report, capsys=capsys)
    reader.join(timeout=30)
    assert status == 0, err
    assert json.loads(read[0])["images"][0]["name"] == "crashy"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_json_output_for_scripts(local_dsyms, tmp_path, capsys):
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    status, out, _ = run("--format", "json", report, capsys=capsys)
    doc = json.loads(out)
    assert status == 0
    assert doc["images"] == [{"uuid": ARM, "name": "crashy", "arch": "arm64", "status": "found"}]
    assert doc["threads"][0]["index"] == 0 and doc["threads"][0]["crashed"] is True
    assert doc["threads"][0]["frames"][0] == {
        "image": "crashy",
        "uuid": ARM,
        "address": 0x100000000 + LEAF_CRASH,
        "symbol": "twice",
        "offset": 16,
        "file": "src/crashy.c",
        "line": 10,
        "inline": True,
    }


def metrickit_payload(offset_field: int, address: int) -> str:
    frame = {
        "binaryUUID": ARM,
        "binaryName": "crashy",
        "offsetIntoBinaryTextSegment": offset_field,
        "address": address,
        "sampleCount": 1,
        "subFrames": [
            {
                "binaryUUID": ARM,
                "binaryName": "crashy",
                "offsetIntoBinaryTextSegment": offset_field,
                "address": address - LEAF_CRASH + TRIGGER_RETURN,
                "sampleCount": 1,
            }
        ],
    }
    stacks = {
        "callStackPerThread": True,
        "callStacks": [{"threadAttributed": True, "callStackRootFrames": [frame]}],
    }
    return json.dumps({"crashDiagnostics": [{"callStackTree": stacks, "diagnosticMetaData": {}}]})


@pytest.mark.parametrize(
    "offset_field",
    [LEAF_CRASH, 0x100000000],  # the offset (newer payloads) or the load address (older)
)
def test_metrickit_payloads_of_either_age(local_dsyms, tmp_path, capsys, offset_field):
    address = 0x100000000 + LEAF_CRASH
    if offset_field == LEAF_CRASH:
        offset_field = LEAF_CRASH
    report = write(tmp_path / "diag.json", metrickit_payload(offset_field, address))
    if offset_field == LEAF_CRASH:  # subframe offsets are their own in newer payloads
        doc = json.loads(Path(report).read_text())
        sub = doc["crashDiagnostics"][0]["callStackTree"]["callStacks"][0]["callStackRootFrames"][
            0
        ]["subFrames"][0]
        sub["offsetIntoBinaryTextSegment"] = TRIGGER_RETURN
        Path(report).write_text(json.dumps(doc))
    status, out, _ = run("--format", "json", report, capsys=capsys)
    frames = json.loads(out)["threads"][0]["frames"]
    assert status == 0
    assert [(f["symbol"], f["line"]) for f in frames] == [
        ("twice", 10),
        ("leaf", 14),
        ("trigger", 27),
    ]


def test_metrickit_system_images_are_known_by_name_and_bare_when_no_store_has_them(
    tmp_path, config_file, capsys
):
    doc = json.loads(metrickit_payload(LEAF_CRASH, 0x100000000 + LEAF_CRASH))
    root_frame = doc["crashDiagnostics"][0]["callStackTree"]["callStacks"][0][
        "callStackRootFrames"
    ][0]
    kernel_uuid = "5E8F2A97-1C34-3D6B-A0F5-7B9C3E2D1A48"
    kernel = {"binaryUUID": kernel_uuid, "binaryName": "libsystem_kernel.dylib", "address": 8}
    root_frame["subFrames"][0]["subFrames"] = [{**kernel, "offsetIntoBinaryTextSegment": 8}]
    report = write(tmp_path / "diag.json", json.dumps(doc))
    builds = folder_with(tmp_path / "builds", "crashy.dSYM")
    with ss.SymbolServer(tmp_path / "server") as server:
        write_config(
            config_file,
            f"search_paths = {toml_list([builds])}\ntimeout = 10\n"
            f"[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
        )
        status, out, err = run("--format", "json", report, capsys=capsys)
        asked = [request.path for request in server.requests]
    # Asked for like any image (its symbol table may be in a store), the app's dSYM not.
    assert asked and all(path.startswith("/5E8F/2A97/") for path in asked)
    assert status == 0  # a frame of Apple's without a dSYM is not a failure
    assert f"system (absent)  {kernel_uuid}  libsystem_kernel.dylib" in err
    images = json.loads(out)["images"]
    assert [(i["name"], i["status"], i.get("verdict")) for i in images] == [
        ("crashy", "found", None),
        ("libsystem_kernel.dylib", "system", "absent"),
    ]


def test_addresses_are_printed_as_atos_prints_them(local_dsyms, capsys):
    load = 0x104A5C000
    status, out, _ = run(
        "--uuid",
        ARM,
        "--load-address",
        hex(load),
        hex(load + LEAF_CRASH),
        hex(load + 0x398),
        capsys=capsys,
    )
    assert status == 0
    assert out.splitlines() == [
        "twice (in crashy) (crashy.c:10)",
        "leaf (in crashy) (crashy.c:14)",
        "geo::Point::norm() const (in crashy) (geometry.cpp:11)",
    ]
    # An address in no function: printed as it is, and frames were left bare.
    beyond = hex(load + 0x1000)  # past the code
    status, out, _ = run("--uuid", ARM, "--load-address", hex(load), beyond, capsys=capsys)
    assert (status, out) == (2, f"{beyond}\n")


def test_addresses_of_an_image_file_pick_its_slice_by_arch(local_dsyms, capsys):
    status, out, _ = run(
        "--image",
        str(FIXTURES / "crashy"),
        "--arch",
        "x86_64",
        "--load-address",
        "0x100000000",
        "0x100000379",
        capsys=capsys,
    )
    assert status == 0
    assert out.splitlines()[0] == "twice (in crashy) (crashy.c:10)"
    status, _, err = run(
        "--image", str(FIXTURES / "crashy"), "--load-address", "0", "1", capsys=capsys
    )
    assert status == 1 and "give --arch" in err


def test_several_reports_go_into_a_folder_and_a_bad_one_writes_nothing(
    local_dsyms, tmp_path, capsys
):
    good = write(tmp_path / "a.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    text = write(tmp_path / "b.crash", crash_report(ARM, "arm64", [LEAF_CRASH]))
    bad = write(tmp_path / "c.ips", '{"bug_type":"309"}\n{"threads": [')
    out_dir = tmp_path / "out" / "new"
    status, out, err = run("-o", str(out_dir), good, text, bad, capsys=capsys)
    assert status == 1 and out == ""
    assert sorted(os.listdir(out_dir)) == ["a.ips", "b.crash"]
    assert "leaf + 16 (crashy.c:14)" in (out_dir / "b.crash").read_text()
    assert err.count("dsymfind: error:") == 1 and "c.ips" in err and "truncated" in err


def test_a_body_nested_as_deep_as_json_writes_it_is_written_back(local_dsyms, tmp_path, capsys):
    """The .ips writer nests as deep as json's own: a key the report carries 600 levels deep
    is kept, and the report after it is still written."""
    body = json.loads(ips_report(ARM, "arm64", [LEAF_CRASH]).split("\n", 1)[1])
    deep: object = 0
    for _ in range(600):
        deep = [deep]
    body["deep"] = deep
    header = ips_report(ARM, "arm64", [LEAF_CRASH]).split("\n", 1)[0]
    first = write(tmp_path / "deep.ips", header + "\n" + json.dumps(body))
    second = write(tmp_path / "b.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    out_dir = tmp_path / "out"
    status, _, err = run("-o", str(out_dir), first, second, capsys=capsys)
    assert (status, err.count("dsymfind: error:")) == (0, 0), err
    written = json.loads((out_dir / "deep.ips").read_text().split("\n", 1)[1])
    assert written["deep"] == deep
    assert "leaf" in (out_dir / "b.ips").read_text()


def test_a_report_that_cannot_be_written_stops_no_other_and_none_is_overwritten(
    local_dsyms, tmp_path, capsys
):
    """One target that cannot be written is that report's error; `-o` naming the reports'
    own folder never replaces a report by its symbolicated form."""
    first = write(tmp_path / "a.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    second = write(tmp_path / "b.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    out_dir = tmp_path / "out"
    (out_dir / "a.ips").mkdir(parents=True)  # a folder where a.ips would go
    status, _, err = run("-o", str(out_dir), first, second, capsys=capsys)
    assert status == 1
    assert "a.ips" in err and err.count("dsymfind: error:") == 1
    assert "leaf" in (out_dir / "b.ips").read_text()
    before = Path(first).read_text()
    status, _, err = run("-o", str(tmp_path), first, second, capsys=capsys)
    assert status == 1 and err.count("is the report itself") == 2
    assert Path(first).read_text() == before


def bad_inputs(tmp_path: Path) -> dict[str, str]:
    deep = "[" * 100_000 + "]" * 100_000
    made = {
        "not JSON": "{this is not json\n",
        "truncated": '{"bug_type":"309"}\n{"usedImages": [',
        "empty": "",
        "binary": "\0\1\2\3" * 100,
        "deep": '{"bug_type":"309"}\n{"threads": ' + deep + "}",
        "long number": '{"bug_type":"309"}\n{"threads": [], "n": ' + "9" * 5000 + "}",
        "no report": "hello there\n",
    }
    return {name: write(tmp_path / name.replace(" ", "_"), text) for name, text in made.items()}


def test_every_bad_input_is_one_line_and_the_others_go_on(local_dsyms, tmp_path, capsys):
    bad = bad_inputs(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.ips"
    with big.open("wb") as f:
        f.truncate(100 << 20)
    good = write(tmp_path / "good.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    inputs = [*bad.values(), str(fifo), "/dev/zero", str(big), str(tmp_path / "absent"), good]
    status, _, err = run("-o", str(tmp_path / "out"), *inputs, capsys=capsys)
    errors = [line for line in err.splitlines() if line.startswith("dsymfind: error:")]
    assert status == 1
    assert len(errors) == len(inputs) - 1
    assert "Traceback" not in err
    assert os.listdir(tmp_path / "out") == ["good.ips"]


def test_served_dsyms_are_fetched_once_per_uuid_for_the_batch(tmp_path, config_file, capsys):
    root = tmp_path / "server"
    for uuid in CRASHY_UUIDS.values():
        target = root / url_path(uuid).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CRASHY_DWARF, target)
    reports = [
        write(
            tmp_path / f"r{n}.ips",
            ips_report(uuid, arch, [LEAF_CRASH if arch == "arm64" else LEAF["x86_64"][1]]),
        )
        for n, (arch, uuid) in enumerate(list(CRASHY_UUIDS.items()) * 3)
    ]
    with ss.SymbolServer(root) as server:
        write_config(
            config_file, f"timeout = 10\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )
        status, _, err = run("-o", str(tmp_path / "out"), *reports, capsys=capsys)
        assert status == 0, err
        assert {server.count(url_path(uuid)) for uuid in CRASHY_UUIDS.values()} == {1}
        asked = len(server.requests)
        # A second run needs no server: the dSYMs and their SymCaches are cached.
        status, _, _ = run("-o", str(tmp_path / "again"), *reports, capsys=capsys)
        assert status == 0
        assert len(server.requests) == asked


# Generous: each wait ends as soon as what it waits for happens.
CONCURRENT_WAIT = 60.0


def held_back(data: bytes, asked: threading.Event, release: threading.Event) -> ss.Route:
    """The file, once `release` is set; `asked` is set as the request arrives."""

    def route(exchange: ss.Exchange) -> None:
        asked.set()
        release.wait(CONCURRENT_WAIT)
        exchange.respond(200, data, content_type=ss.OCTET_STREAM)

    return route


def test_the_helper_and_symbolicate_fetching_one_uuid_at_once_download_it_once(
    tmp_path, config_file, capsys, monkeypatch
):
    path = url_path(ARM)
    asked, release, locking = threading.Event(), threading.Event(), threading.Event()
    real_lock = locks.download_lock

    def spied_lock(cache, uuid):
        locking.set()  # symbolicate found no dSYM here and goes for the UUID's lock
        return real_lock(cache, uuid)

    monkeypatch.setattr(locks, "download_lock", spied_lock)
    report = write(tmp_path / "r.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    with ss.SymbolServer(tmp_path / "server") as server, ThreadPoolExecutor(2) as pool:
        server.route(path, held_back(CRASHY_DWARF.read_bytes(), asked, release))
        write_config(
            config_file,
            f"timeout = {CONCURRENT_WAIT}\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n",
        )
        helper = pool.submit(run_helper, ARM, timeout=2 * CONCURRENT_WAIT)
        assert asked.wait(CONCURRENT_WAIT)  # the helper's downloader holds the lock now
        symbolicated = pool.submit(run, report, capsys=capsys)
        assert locking.wait(CONCURRENT_WAIT)
        release.set()
        status, out, err = symbolicated.result(timeout=2 * CONCURRENT_WAIT)
        answer = helper.result(timeout=2 * CONCURRENT_WAIT).entry(ARM)
        assert server.count(path) == 1
    assert status == 0, err
    assert [f["symbol"] for f in json.loads(out.split("\n", 1)[1])["threads"][0]["frames"]] == [
        "twice",
        "leaf",
    ]
    assert Path(answer["DBGDSYMPath"]).is_file()


def test_missing_mismatched_and_system_images_are_said_and_the_rest_go_on(
    tmp_path, config_file, capsys
):
    builds = folder_with(tmp_path / "builds", "crashy.dSYM", "crashy_exec.dSYM")
    broken = builds / "crashy_exec.dSYM" / "Contents" / "Resources" / "DWARF" / "crashy_exec"
    data = bytearray(broken.read_bytes())
    # The load commands stay (the UUID is still found), the DWARF after them is noise.
    data[0x1000:] = b"\xff" * (len(data) - 0x1000)
    broken.write_bytes(bytes(data))
    write_config(config_file, f"search_paths = {toml_list([builds])}\n")
    text = ips_report(ARM, "arm64", [LEAF_CRASH])
    doc = json.loads(text.split("\n", 1)[1])
    doc["usedImages"] += [
        {
            "uuid": "11111111-2222-3333-4444-555555555555",
            "name": "gone",
            "base": 0,
            "arch": "arm64",
        },
        {
            "uuid": "5e8f2a97-1c34-3d6b-a0f5-7b9c3e2d1a48",
            "name": "dyld",
            "base": 0,
            "path": "/usr/lib/dyld",
        },
        {"uuid": CRASHY_EXEC_UUID, "name": "crashy_exec", "base": 0, "arch": "arm64"},
    ]
    doc["threads"][0]["frames"] += [{"imageOffset": 8, "imageIndex": n} for n in (1, 2, 3)]
    report = write(tmp_path / "r.ips", text.split("\n", 1)[0] + "\n" + json.dumps(doc))
    status, out, err = run("--offline", report, capsys=capsys)
    assert status == 2  # written, frames left bare
    assert "missing (absent)  11111111-2222-3333-4444-555555555555  gone" in err
    assert "system (absent)  5E8F2A97-1C34-3D6B-A0F5-7B9C3E2D1A48  dyld" in err
    assert f"mismatch {CRASHY_EXEC_UUID}  crashy_exec" in err
    frames = json.loads(out.split("\n", 1)[1])["threads"][0]["frames"]
    assert [f.get("symbol") for f in frames] == ["twice", "leaf", None, None, None]


def test_symcaches_are_built_once_and_rebuilt_when_damaged(
    local_dsyms, tmp_path, capsys, cache_dir
):
    report = write(tmp_path / "r.ips", ips_report(ARM, "arm64", [LEAF_CRASH]))
    assert run(report, capsys=capsys)[0] == 0
    table = cache_dir / "symcaches" / f"{ARM.replace('-', '')}.v{symcaches.current_version()}"
    stamp = table.stat().st_mtime_ns
    assert run(report, capsys=capsys)[0] == 0
    assert table.stat().st_mtime_ns == stamp
    table.write_bytes(b"not a symcache")
    assert run(report, capsys=capsys)[0] == 0
    assert table.read_bytes() != b"not a symcache"
    assert [p.name for p in table.parent.iterdir()] == [table.name]


def test_an_ips_report_loads_neither_the_text_nor_the_metrickit_reader(local_dsyms, tmp_path):
    report = write(tmp_path / "crashy.ips", ips_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN]))
    loaded = modules_loaded_running(["symbolicate", report])
    assert {"dsymfind.symbolicate.crash", "dsymfind.symbolicate.metrickit"} & loaded == set()


SLEEP_UUID = "3A1F5C2E-8B47-3D69-A0E2-51C7F94B6D18"
SLEEP_BASE = 0x102A60000


def sleep_report(form: str) -> str:
    """`/bin/sleep` killed in its nanosleep, as macOS reports it: the program is Apple's,
    outside /System and /usr/lib, and its metadata says `"is_first_party":1`."""
    metadata = {"app_name": "sleep", "bug_type": "309", "is_first_party": 1, "name": "sleep"}
    offsets = [0x3F2C, 0x3E10]
    if form == "ips":
        body = {
            "cpuType": "ARM-64",
            "procPath": "/bin/sleep",
            "faultingThread": 0,
            "threads": [
                {
                    "triggered": True,
                    "frames": [{"imageOffset": o, "imageIndex": 0} for o in offsets],
                }
            ],
            "usedImages": [
                {
                    "source": "P",
                    "arch": "arm64e",
                    "base": SLEEP_BASE,
                    "uuid": SLEEP_UUID.lower(),
                    "path": "/bin/sleep",
                    "name": "sleep",
                }
            ],
        }
        return json.dumps(metadata) + "\n" + json.dumps(body, indent=2) + "\n"
    frames = "".join(
        f"{n:<4}sleep                         \t{SLEEP_BASE + o:#018x} {SLEEP_BASE:#x} + {o}\n"
        for n, o in enumerate(offsets)
    )
    return (
        "Process:               sleep [5120]\nPath:                  /bin/sleep\n"
        "Code Type:             ARM-64 (Native)\n\n"
        f"Thread 0 Crashed::  Dispatch queue: com.apple.main-thread\n{frames}\n"
        f"Binary Images:\n       {SLEEP_BASE:#x} -        {SLEEP_BASE + 0x3FFF:#x} sleep (*) "
        f"<{SLEEP_UUID.replace('-', '').lower()}> /bin/sleep\n"
    )


@pytest.mark.parametrize("form", ["ips", "crash"])
def test_apples_programs_outside_system_are_system_images(tmp_path, config_file, capsys, form):
    """/bin/sleep is Apple's: bare when no store has it, and its frames are no failure."""
    report = write(tmp_path / f"sleep.{form}", sleep_report(form))
    with ss.SymbolServer(tmp_path / "server") as server:
        write_config(
            config_file, f"timeout = 10\n[[servers]]\nurl = '{server.url}/'\nlayout = 'native'\n"
        )
        status, _, err = run(report, capsys=capsys)
    assert status == 0, err
    assert f"system (absent)  {SLEEP_UUID}  sleep" in err
    assert "missing" not in err


def two_thread_reports(tmp_path: Path) -> tuple[str, str]:
    """The same crash as an .ips and a .crash whose second thread did not crash."""
    text = ips_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN])
    header, body = text.split("\n", 1)
    doc = json.loads(body)
    doc["threads"].append({"frames": [{"imageOffset": TRIGGER_START, "imageIndex": 0}]})
    ips = write(tmp_path / "two.ips", header + "\n" + json.dumps(doc))
    crash = crash_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN]).replace(
        "\nBinary Images:",
        f"Thread 1:\n0   crashy      \t{0x100000000 + TRIGGER_START:#018x} 0x100000000 + "
        f"{TRIGGER_START}\n\nBinary Images:",
    )
    return ips, write(tmp_path / "two.crash", crash)


@pytest.mark.parametrize("flags", [[], ["--all-threads"]])
def test_every_thread_is_symbolicated_by_default(local_dsyms, tmp_path, capsys, flags):
    """As Xcode's symbolicated reports are; --all-threads, which scripts pass, says the same."""
    ips, crash = two_thread_reports(tmp_path)
    status, out, _ = run(*flags, ips, capsys=capsys)
    threads = json.loads(out.split("\n", 1)[1])["threads"]
    assert status == 0
    assert [[f.get("symbol") for f in t["frames"]] for t in threads] == [
        ["twice", "leaf", "trigger"],
        ["trigger"],
    ]
    status, out, _ = run(*flags, crash, capsys=capsys)
    assert status == 0
    assert f"0x100000000 + {TRIGGER_START}" not in out
    assert out.count("trigger + ") == 2
    status, out, _ = run(*flags, "--format", "json", ips, capsys=capsys)
    assert [(t["index"], t["crashed"]) for t in json.loads(out)["threads"]] == [
        (0, True),
        (1, False),
    ]


def test_crashed_only_leaves_the_other_threads_as_they_came(local_dsyms, tmp_path, capsys):
    ips, crash = two_thread_reports(tmp_path)
    status, out, _ = run("--crashed-only", ips, capsys=capsys)
    threads = json.loads(out.split("\n", 1)[1])["threads"]
    assert status == 0
    assert [f.get("symbol") for f in threads[0]["frames"]] == ["twice", "leaf", "trigger"]
    assert threads[1] == {"frames": [{"imageOffset": TRIGGER_START, "imageIndex": 0}]}
    status, out, _ = run("--crashed-only", crash, capsys=capsys)
    assert status == 0
    assert f"0x100000000 + {TRIGGER_START}\n" in out


KIT_BASE, KERNEL_BASE = 0x104C80000, 0x1F0A29000


def unlisted_images_report(tmp_path: Path) -> str:
    """A text report whose frames name images its "Binary Images" leaves out, as Sentry's
    and hand-made samples do: an app framework, Apple's kernel library, and a frame the
    report already names (LLDB's crashlog inputs have `libdyld.dylib ... start + 1`)."""
    text = crash_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN])
    extra = (
        f"2   libsystem_kernel.dylib        \t{KERNEL_BASE + 0x43C4:#018x} {KERNEL_BASE:#x} + 17348\n"
        f"3   MyKit                         \t{KIT_BASE + 0x1234:#018x} {KIT_BASE:#x} + 4660\n"
        "4   libdyld.dylib                 \t0x0000000001000000 start + 1\n"
    )
    text = text.replace("\n\nBinary Images:", "\n" + extra + "\nBinary Images:")
    return write(tmp_path / "sentry.crash", text)


def test_frames_of_images_missing_from_binary_images_are_named_and_kept(
    local_dsyms, tmp_path, capsys
):
    report = unlisted_images_report(tmp_path)
    status, out, err = run(report, capsys=capsys)
    assert status == 2  # written, MyKit's frame left bare
    assert "missing  (no UUID)  MyKit: the report gives no UUID for it" in err
    assert "system   (no UUID)  libsystem_kernel.dylib" in err
    assert "libdyld" not in err  # its frame is named already: nothing to look up
    lines = out.splitlines()
    assert f"{KIT_BASE + 0x1234:#018x} {KIT_BASE:#x} + 4660" in lines[-5]
    assert lines[-4].endswith("\t0x0000000001000000 start + 1")
    assert "leaf + 16 (crashy.c:14)" in out

    status, out, _ = run("--format", "json", report, capsys=capsys)
    frames = json.loads(out)["threads"][0]["frames"]
    assert [(f["image"], f["uuid"], f["address"]) for f in frames[3:]] == [
        ("libsystem_kernel.dylib", None, KERNEL_BASE + 0x43C4),
        ("MyKit", None, KIT_BASE + 0x1234),
        ("libdyld.dylib", None, 0x1000000),
    ]
    assert frames[5] | {"image": None} == {
        "image": None,
        "uuid": None,
        "address": 0x1000000,
        "symbol": "start",
        "offset": 1,
        "file": None,
        "line": None,
        "inline": False,
    }
    images = {i["name"]: i["status"] for i in json.loads(out)["images"]}
    assert images == {
        "crashy": "found",
        "libsystem_kernel.dylib": "system",
        "MyKit": "missing",
        "libdyld.dylib": "system",
    }


def test_a_symbolicated_crash_report_reads_back_as_the_same_frames(local_dsyms, tmp_path, capsys):
    """The names a .crash line already carries (`twice + 16 (crashy.c:10) [inlined]`) are
    read back whole: JSON of the symbolicated report says what JSON of the first run said."""
    report = write(tmp_path / "r.crash", crash_report(ARM, "arm64", [LEAF_CRASH, TRIGGER_RETURN]))
    _, first, _ = run("--format", "json", report, capsys=capsys)
    _, symbolicated, _ = run(report, capsys=capsys)
    again = write(tmp_path / "again.crash", symbolicated)
    status, second, err = run("--format", "json", again, capsys=capsys)
    assert (status, err) == (0, "")  # nothing to look up
    shown = [
        (
            f["symbol"],
            f["offset"],
            os.path.basename(f["file"]),
            f["line"],
            f["inline"],
            f["address"],
        )
        for f in json.loads(first)["threads"][0]["frames"]
    ]
    assert [
        (f["symbol"], f["offset"], f["file"], f["line"], f["inline"], f["address"])
        for f in json.loads(second)["threads"][0]["frames"]
    ] == shown


def batch_reports(tmp_path: Path) -> dict[str, str]:
    """A report symbolicated whole, one with a frame of an image nobody has, one unreadable."""
    bare = json.loads(ips_report(ARM, "arm64", [LEAF_CRASH]).split("\n", 1)[1])
    bare["usedImages"].append({"uuid": "11111111-2222-3333-4444-555555555555", "name": "gone"})
    bare["threads"][0]["frames"].append({"imageOffset": 8, "imageIndex": 1})
    header = ips_report(ARM, "arm64", [LEAF_CRASH]).split("\n", 1)[0]
    return {
        "complete": write(tmp_path / "a.ips", ips_report(ARM, "arm64", [LEAF_CRASH])),
        "bare": write(tmp_path / "b.ips", header + "\n" + json.dumps(bare)),
        "unreadable": write(tmp_path / "c.ips", '{"bug_type":"309"}\n{"threads": ['),
    }


def test_a_batch_names_each_report_on_stderr_and_ends_with_a_summary(local_dsyms, tmp_path, capsys):
    reports = batch_reports(tmp_path)
    status, _, err = run("--offline", "-o", str(tmp_path / "out"), *reports.values(), capsys=capsys)
    *lines, summary = err.splitlines()
    assert status == 1  # an input could not be used
    assert summary == "3 reports: 1 complete, 1 with frames left bare, 1 unreadable"
    for line in lines:
        assert line.startswith(tuple(reports.values())) or line.startswith(
            tuple(f"dsymfind: error: {path}: " for path in reports.values())
        ), line
    assert (
        f"{reports['bare']}: missing (absent)  11111111-2222-3333-4444-555555555555  gone: " in err
    )
    assert f"{reports['complete']}: found    {ARM}  crashy" in err
    assert f"{reports['bare']}: found    {ARM}  crashy" in err


@pytest.mark.parametrize(
    ("which", "expected"),
    [(["complete"], 0), (["complete", "bare"], 2), (["bare"], 2), (["complete", "unreadable"], 1)],
)
def test_the_exit_status_says_what_a_ci_job_can_do(local_dsyms, tmp_path, capsys, which, expected):
    """0: all complete; 1: an input, the configuration or the output could not be used;
    2: all written, some frames left bare."""
    reports = batch_reports(tmp_path)
    chosen = [reports[name] for name in which]
    status, _, _ = run("--offline", "-o", str(tmp_path / "out"), *chosen, capsys=capsys)
    assert status == expected


def test_an_output_or_a_configuration_that_cannot_be_used_is_status_1(
    local_dsyms, tmp_path, capsys, config_file
):
    reports = batch_reports(tmp_path)
    out_dir = tmp_path / "out"
    (out_dir / "b.ips").mkdir(parents=True)  # b's output cannot be written
    status, _, err = run("--offline", "-o", str(out_dir), reports["bare"], capsys=capsys)
    assert status == 1 and "cannot write" in err
    status, _, err = run("--offline", "-o", str(out_dir), reports["complete"], capsys=capsys)
    assert status == 0
    config_file.write_text("search_paths = 12\n")
    status, _, err = run("--offline", reports["complete"], capsys=capsys)
    assert status == 1 and err.startswith("dsymfind: error:")


def test_help_says_the_exit_statuses(capsys):
    with pytest.raises(SystemExit):
        main(["symbolicate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit status 0 when" in text and "2 when" in text and "1 when" in text


def test_a_store_refusing_the_credentials_is_said_for_each_report(s3, tmp_path, config_file):
    """A real S3 engine (SeaweedFS) refusing a wrong secret: each report's error line says
    the store refused the credentials, and the run is status 1 (a setting to fix, not
    symbols to wait for); right keys then symbolicate them."""
    prefix = f"t{secrets.token_hex(6)}/"
    body = CRASHY_DWARF.read_bytes()
    s3.client("ci").put_object(
        Bucket=SYMBOLS,
        Key=prefix + debug_file_key("unified", ARM),
        Body=body,
        Metadata={"sha256": hashlib.sha256(body).hexdigest()},
    )
    write_config(
        config_file,
        "timeout = 30\n[[servers]]\nname = 'team'\n"
        f"url = 's3://{SYMBOLS}/{prefix}'\nendpoint_url = '{s3.endpoint_url}'\n"
        "region = 'us-east-1'\n",
    )
    reports = [
        write(tmp_path / "a.ips", ips_report(ARM, "arm64", [LEAF_CRASH])),
        write(tmp_path / "b.crash", crash_report(ARM, "arm64", [LEAF_CRASH])),
    ]
    reader = s3.identities["reader"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": reader.access_key}

    done = run_cli(
        "symbolicate",
        "-o",
        str(tmp_path / "out"),
        *reports,
        env=env | {"AWS_SECRET_ACCESS_KEY": "x" * 40},
    )
    assert done.returncode == 1, done.stderr
    for report in reports:
        assert (
            f"dsymfind: error: {report}: not symbolicated: team refused the credentials"
            in done.stderr
        )
        assert f"{report}: missing (refused)  {ARM}  crashy: " in done.stderr
    assert "SignatureDoesNotMatch" in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "2 reports: 0 complete, 2 with frames left bare, 0 unreadable"
    )

    done = run_cli(
        "symbolicate",
        "-o",
        str(tmp_path / "fixed"),
        *reports,
        env=env | {"AWS_SECRET_ACCESS_KEY": reader.secret_key},
    )
    assert done.returncode == 0, done.stderr
    assert "leaf + 16 (crashy.c:14)" in (tmp_path / "fixed" / "b.crash").read_text()
