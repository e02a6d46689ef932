"""`dsymfind why` end to end: each verdict from real stores (folders with build records, a
real HTTP server, SeaweedFS refusing a wrong secret, a port nobody listens on), for UUIDs
and for a report's bare images, as text and as JSON; and symbolicate's verdict word."""

from __future__ import annotations

import json
import os
import secrets
import socket
from pathlib import Path

import pytest
from support import symbol_server as ss
from support.fixtures import folder_with, toml_list, write_config
from support.negative import negative_markers, remember_absent
from support.processes import run_cli
from support.seaweed import SYMBOLS
from support.symbolication import CRASHY_DWARF, CRASHY_UUIDS, ips_report

from dsymfind import stores
from dsymfind.main import main
from dsymfind.stores import builds
from dsymfind.stores.base import Options
from dsymfind.stores.layouts import debug_file_key
from dsymfind.uuids import uuid_hex

ARM = CRASHY_UUIDS["arm64"]
KIT_OLD = "4C4C4C4C-0000-4000-8000-000000000001"  # MyKit as build 2.3 (812) published it
KIT_REPORTED = "1A2B3C4D-0000-4000-8000-000000000002"  # MyKit as a report has it
GONE = "11111111-2222-3333-4444-555555555555"
LEAF_CRASH = 0x338  # an offset into crashy's leaf()


def why(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["why", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def folder_server(config_file: Path, folder: Path, name: str = "team", extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_config(
        config_file,
        f"timeout = 10\n[[servers]]\nname = '{name}'\nurl = 'file://{folder}'\n"
        f"layout = 'unified'\n{extra}",
    )


def record(images: list[tuple[str, str, str]], version: str = "2.3", build: str = "812"):
    """A build record naming these (name, UUID, arch) dSYMs."""
    return builds.Record(
        id=f"b{secrets.token_hex(4)}",
        app="MyApp",
        bundle_id="com.example.myapp",
        version=version,
        build=build,
        published_at="2026-12-01T10:00:00Z",
        commit="",
        remote="",
        dirty=False,
        ci=None,
        host="ci",
        images=tuple(
            builds.Image(name, uuid_hex(uuid), arch, "dsym", debug_file_key("unified", uuid), 10)
            for name, uuid, arch in images
        ),
    )


def publish_record(folder: Path, rec: builds.Record) -> None:
    builds.write_record(stores.open_manager(str(folder), Options()), rec)


def report(tmp_path: Path, images: list[tuple[str, str, str]], name: str = "r.ips") -> str:
    """An .ips whose crashed thread has a frame in crashy, then one in each of `images`
    ((name, UUID, arch)), each image listed in usedImages."""
    head, body = ips_report(ARM, "arm64", [LEAF_CRASH]).split("\n", 1)
    doc = json.loads(body)
    for n, (image, uuid, arch) in enumerate(images, start=1):
        doc["usedImages"].append({"uuid": uuid, "name": image, "base": 0, "arch": arch})
        doc["threads"][0]["frames"].append({"imageOffset": 8, "imageIndex": n})
    path = tmp_path / name
    path.write_text(head + "\n" + json.dumps(doc))
    return str(path)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_found_in_a_folder_store_names_the_store_and_key(tmp_path, config_file, capsys):
    store = tmp_path / "symbols"
    folder_server(config_file, store)
    key = store / debug_file_key("unified", ARM)
    key.parent.mkdir(parents=True)
    key.write_bytes(CRASHY_DWARF.read_bytes())
    status, out, err = why(ARM, capsys=capsys)
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"{ARM} ?: found — team has it at {key}")
    assert lines[1] == f"    team: found: {key}"


def test_absent_names_each_store_and_key_and_writes_no_negative_entry(
    tmp_path, config_file, cache_dir, capsys
):
    store = tmp_path / "symbols"
    with ss.SymbolServer() as server:
        folder_server(
            config_file,
            store,
            extra=f"[[servers]]\nname = 'web'\nurl = '{server.url}/'\nlayout = 'unified'\n",
        )
        status, out, _ = why(GONE, "--json", capsys=capsys)
        asked = server.requests
    assert status == 1
    [answer] = json.loads(out)
    assert (answer["uuid"], answer["name"], answer["verdict"]) == (GONE, "?", "absent")
    by_store = {s["store"]: s for s in answer["stores"]}
    assert by_store["team"]["verdict"] == "absent"
    assert str(store / debug_file_key("unified", GONE)) in by_store["team"]["detail"]
    assert by_store["web"]["verdict"] == "absent"
    assert debug_file_key("unified", GONE) in by_store["web"]["detail"]
    assert [r.path for r in asked] == ["/" + debug_file_key("unified", GONE)]
    assert negative_markers(cache_dir) == []


def test_the_negative_cache_is_said_and_the_stores_asked_anyway(
    tmp_path, config_file, cache_dir, capsys
):
    store = tmp_path / "symbols"
    folder_server(config_file, store)
    remember_absent(cache_dir, ARM)
    key = store / debug_file_key("unified", ARM)
    key.parent.mkdir(parents=True)
    key.write_bytes(CRASHY_DWARF.read_bytes())
    status, out, _ = why(ARM, capsys=capsys)
    assert status == 0
    assert "    negative cache: absent: the negative cache holds it (" in out
    assert "asked anyway" in out
    assert f"    team: found: {key}" in out


def test_a_store_that_refuses_the_credentials_says_the_s3_code_and_the_setting(
    s3, tmp_path, config_file
):
    prefix = f"t{secrets.token_hex(6)}/"
    write_config(
        config_file,
        "timeout = 30\n[[servers]]\nname = 'team'\n"
        f"url = 's3://{SYMBOLS}/{prefix}'\nendpoint_url = '{s3.endpoint_url}'\n"
        "region = 'us-east-1'\n",
    )
    reader = s3.identities["reader"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ACCESS_KEY_ID": reader.access_key,
        "AWS_SECRET_ACCESS_KEY": "x" * 40,
    }
    done = run_cli("why", ARM, env=env)
    assert done.returncode == 1, done.stderr
    head, evidence = done.stdout.splitlines()[:2]
    assert (
        head == f"{ARM} ?: refused — team refused the credentials, so whether it has it is unknown"
    )
    assert evidence.startswith("    team: refused: ")
    assert "SignatureDoesNotMatch" in evidence
    assert stores.kind_for("s3").CREDENTIALS_FIX in evidence
    done = run_cli("why", ARM, env=env | {"AWS_ACCESS_KEY_ID": "NOSUCHKEYID00000000"})
    assert "    team: refused: " in done.stdout and "InvalidAccessKeyId" in done.stdout

    env |= {"AWS_SECRET_ACCESS_KEY": reader.secret_key}
    done = run_cli("why", ARM, "--json", env=env)
    [answer] = json.loads(done.stdout)
    assert answer["verdict"] == "absent"
    key = f"s3://{SYMBOLS}/{prefix}{debug_file_key('unified', ARM)}"
    assert answer["stores"][0]["detail"] == f"not at {key}"

    s3.client("ci").put_object(
        Bucket=SYMBOLS, Key=prefix + debug_file_key("unified", ARM), Body=b"x" * 4096
    )
    done = run_cli("why", ARM, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == f"    team: found: {key}"


def test_an_unreachable_store_says_until_when_it_is_in_backoff(config_file, cache_dir, capsys):
    url = f"http://127.0.0.1:{closed_port()}/"
    write_config(
        config_file,
        f"timeout = 10\n[[servers]]\nname = 'gone'\nurl = '{url}'\nlayout = 'unified'\n",
    )
    status, out, _ = why(GONE, capsys=capsys)
    assert status == 1
    assert out.startswith(
        f"{GONE} ?: unreachable — gone did not answer, so whether it has it is unknown\n"
    )
    assert "    gone: unreachable: " in out and "backoff" not in out
    assert not (cache_dir / "failing-servers").exists()  # why writes no backoff

    assert main(["fetch", GONE]) == 1  # a fetch does: the server is skipped for a while
    capsys.readouterr()
    status, out, _ = why(GONE, capsys=capsys)
    assert status == 1
    assert "; in backoff until 20" in out and " UTC" in out


def test_a_report_from_a_build_never_published_is_other_build(tmp_path, config_file, capsys):
    store = tmp_path / "symbols"
    folder_server(config_file, store)
    publish_record(store, record([("MyKit", KIT_OLD, "arm64")]))
    crash = report(tmp_path, [("MyKit", KIT_REPORTED, "arm64")])
    status, out, _ = why(crash, "--store", str(store), capsys=capsys)
    assert status == 1
    sentence = (
        f"MyKit in 2.3 (812) is {KIT_OLD}; this report's is {KIT_REPORTED}: "
        "the report comes from a build that was never published"
    )
    # crashy has its dSYM nowhere either: asked about, but without a record of its name
    assert f"{KIT_REPORTED} MyKit: other-build — {sentence}" in out.splitlines()
    assert f"    {store}: other-build: {sentence}" in out.splitlines()
    assert f"{ARM} crashy: absent — " in out


def test_a_dsym_of_another_architecture_is_wrong_slice(tmp_path, config_file, capsys):
    store = tmp_path / "symbols"
    folder_server(config_file, store)
    publish_record(store, record([("MyKit", KIT_OLD, "arm64e")], version="2.4", build="900"))
    crash = report(tmp_path, [("MyKit", KIT_REPORTED, "arm64")])
    status, out, _ = why(crash, "--json", capsys=capsys)
    assert status == 1
    kit = next(answer for answer in json.loads(out) if answer["name"] == "MyKit")
    assert kit["verdict"] == "wrong-slice"
    assert kit["stores"][-1] == {
        "store": "team",
        "verdict": "wrong-slice",
        "detail": f"MyKit in 2.4 (900) has a dSYM for arm64e ({KIT_OLD}); this image is "
        "arm64: the arm64 slice was not published",
    }


def test_a_uuid_a_record_names_is_named_by_it(tmp_path, config_file, capsys):
    store = tmp_path / "symbols"
    folder_server(config_file, store)
    publish_record(store, record([("MyKit", KIT_OLD, "arm64")]))
    status, out, _ = why(KIT_OLD, capsys=capsys)
    assert status == 1  # the record names it, but its dSYM is not in the store
    key = debug_file_key("unified", KIT_OLD)
    said = f"build 2.3 (812)'s record names it ({key}), but no store has it"
    assert out.startswith(f"{KIT_OLD} MyKit: absent — {said}\n")
    assert f"    team: absent: {said}" in out

    # Another build's MyKit does not make this published one an other-build
    publish_record(store, record([("MyKit", KIT_REPORTED, "arm64")], version="2.4", build="9"))
    assert why(KIT_OLD, capsys=capsys)[1].startswith(f"{KIT_OLD} MyKit: absent — {said}\n")
    status, out, _ = why(KIT_REPORTED, "--json", capsys=capsys)
    assert json.loads(out)[0]["verdict"] == "absent"


def test_a_stub_executable_in_a_report_needs_no_dsym(tmp_path, config_file, capsys):
    folder_server(config_file, tmp_path / "symbols")
    stub = "2B2B2B2B-0000-4000-8000-000000000003"
    debug = "3C3C3C3C-0000-4000-8000-000000000004"
    crash = report(tmp_path, [("MyApp", stub, "arm64"), ("MyApp.debug.dylib", debug, "arm64")])
    status, out, _ = why(crash, capsys=capsys)
    assert status == 1  # crashy and the debug dylib have no dSYM
    assert f"{stub} MyApp: stub — a stub executable (Xcode's ENABLE_DEBUG_DYLIB)" in out
    assert f"{debug} MyApp.debug.dylib: absent — " in out

    status, _, err = run_symbolicate(crash, capsys)
    assert f"missing (stub)  {stub}  MyApp: " in err
    assert f"missing (absent)  {debug}  MyApp.debug.dylib: " in err


def run_symbolicate(crash: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["symbolicate", "--offline", crash])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_symbolicate_json_gives_the_verdict_of_each_bare_image(tmp_path, config_file, capsys):
    folder_server(config_file, tmp_path / "symbols")
    crash = report(tmp_path, [("gone", GONE, "arm64")])
    status = main(["symbolicate", "--format", "json", crash])
    images = {i["name"]: i for i in json.loads(capsys.readouterr().out)["images"]}
    assert status == 2
    assert (images["gone"]["status"], images["gone"]["verdict"]) == ("missing", "absent")


def test_only_the_images_a_report_leaves_bare_are_answered(tmp_path, config_file, capsys):
    store = tmp_path / "symbols"
    store.mkdir()
    builds_folder = folder_with(tmp_path / "builds", "crashy.dSYM")
    write_config(
        config_file,
        f"timeout = 10\nsearch_paths = {toml_list([builds_folder])}\n[[servers]]\n"
        f"name = 'team'\nurl = 'file://{store}'\nlayout = 'unified'\n",
    )
    crash = report(tmp_path, [("gone", GONE, "arm64")])
    status, out, _ = why(crash, capsys=capsys)
    assert status == 1
    assert [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == [GONE]

    complete = report(tmp_path, [], name="complete.ips")
    assert why(complete, capsys=capsys) == (
        0,
        "",
        f"dsymfind: {complete}: no image left bare: every image its frames need has its "
        "dSYM on this machine, or is Apple's\n",
    )


def test_bad_input_is_one_line_each_and_the_others_are_answered(tmp_path, config_file, capsys):
    folder_server(config_file, tmp_path / "symbols")
    unreadable = tmp_path / "bad.ips"
    unreadable.write_text('{"bug_type":"309"}\n{"threads": [')
    status, out, err = why("not-a-uuid", str(unreadable), GONE, capsys=capsys)
    assert status == 1
    errors = err.splitlines()
    assert errors[0] == "dsymfind: error: not-a-uuid: neither a UUID nor a file"
    assert errors[1].startswith(f"dsymfind: error: {unreadable}: ")
    assert len(errors) == 2
    assert out.startswith(f"{GONE} ?: absent — ")


def test_a_debug_dylib_stub_binary_is_stub_and_its_debug_dylib_is_asked_about(
    tmp_path_factory, tmp_path, config_file, capsys
):
    """The stub made by clang and ld64.lld with its `__TEXT,__debug_dylib` section."""
    from support.products import built

    build = built(tmp_path_factory.getbasetemp() / "products")
    folder_server(config_file, tmp_path / "symbols")
    status, out, _ = why(str(build.app / "App"), str(build.app / "App.debug.dylib"), capsys=capsys)
    assert status == 1  # the debug dylib's dSYM is in no store
    stub, debug = build.uuid("App"), build.uuid("App.debug.dylib")
    assert (
        f"{stub} App: stub — a stub executable (Xcode's ENABLE_DEBUG_DYLIB): it needs no dSYM"
        in out
    )
    assert f"{debug} App.debug.dylib: absent — no store has it (team asked)" in out


def test_an_http_store_is_asked_without_a_download(config_file, capsys):
    """One store answers with a body that never ends (existence is all `why` reads of it),
    another refuses without its token: found, and the refusal with the header to check."""
    key = "/" + debug_file_key("unified", ARM)
    with ss.SymbolServer() as open_server, ss.SymbolServer() as locked:
        open_server.route(key, ss.endless())
        locked.route(key, ss.require_auth("Bearer right"))
        write_config(
            config_file,
            f"timeout = 10\n[[servers]]\nname = 'open'\nurl = '{open_server.url}/'\n"
            "layout = 'unified'\n"
            f"[[servers]]\nname = 'locked'\nurl = '{locked.url}/'\nlayout = 'unified'\n"
            "headers = { Authorization = 'Bearer wrong' }\n",
        )
        status, out, _ = why(ARM, "--json", capsys=capsys)
    assert status == 0
    [answer] = json.loads(out)
    assert answer["verdict"] == "found"
    by_store = {s["store"]: s for s in answer["stores"]}
    assert by_store["open"] == {
        "store": "open",
        "verdict": "found",
        "detail": open_server.url + key,
    }
    assert by_store["locked"]["verdict"] == "refused"
    assert by_store["locked"]["detail"].endswith(stores.kind_for("http").CREDENTIALS_FIX)
