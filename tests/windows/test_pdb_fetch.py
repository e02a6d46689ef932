"""`dsymfind pdb` and `dsymfind id` on PE files: local finds, stores, a real loopback server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from support.fixtures import PE_FIXTURES, write_config
from support.lzx_encoder import write_cab
from support.negative import negative_markers
from support.processes import run_cli
from support.symbol_server import SymbolServer, body, slow, statuses
from test_pdb import needs_pdbutil, with_ages

from dsymfind.commands.pdb import pdb
from dsymfind.windows import pe

HELLO_EXE = PE_FIXTURES / "hello64.exe"
HELLO_PDB = PE_FIXTURES / "hello64.pdb"
HELLO_KEY = pe.read_identity(str(HELLO_EXE)).require_codeview().key
HELLO_URL_PATH = f"/hello64.pdb/{HELLO_KEY}/hello64.pdb"
GCAB = shutil.which("gcab")
needs_gcab = pytest.mark.skipif(GCAB is None, reason="gcab is not installed (apt-get install gcab)")


@pytest.fixture(autouse=True)
def no_ambient_symbol_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_NT_SYMBOL_PATH", raising=False)


@pytest.fixture
def server(tmp_path: Path) -> SymbolServer:
    root = tmp_path / "server"
    root.mkdir()
    with SymbolServer(root) as running:
        yield running


def serve_root(server: SymbolServer) -> Path:
    assert server.root is not None
    return Path(server.root)


def key_folder(store: Path, pdb_name: str, key: str, *, two_tier: bool = False) -> Path:
    folder = store / pdb_name / key
    return store / pdb_name[:2] / pdb_name / key if two_tier else folder


def put(
    store: Path,
    source: Path,
    *,
    name: str = "hello64.pdb",
    key: str = HELLO_KEY,
    two_tier: bool = False,
    as_file: str | None = None,
) -> Path:
    """Put `source` in a DbgHelp-layout store under the key, as `as_file` (default: name)."""
    folder = key_folder(store, name, key, two_tier=two_tier)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (as_file or name)
    shutil.copy(source, target)
    return target


def gcab(source: Path, dest: Path, *, compress: bool = True) -> Path:
    assert GCAB is not None
    flags = ["-c", "-n", "-z"] if compress else ["-c", "-n"]
    subprocess.run([GCAB, *flags, str(dest), str(source)], check=True, capture_output=True)
    return dest


def find(
    capsys: pytest.CaptureFixture[str], files: list[Path], symbol_path: str | None
) -> tuple[int, list[str], list[str]]:
    """The pdb command in this process: (exit status, stdout lines, stderr lines)."""
    status = pdb([str(f) for f in files], symbol_path=symbol_path)
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def alone(tmp_path: Path, name: str = "hello64.exe") -> Path:
    """A copy of a fixture PE in a folder of its own: its PDB is not beside it."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    return Path(shutil.copy(PE_FIXTURES / name, folder))


def hello_folder(store: Path) -> Path:
    """hello64.pdb's key folder in `store` (one tier), made empty."""
    folder = key_folder(store, "hello64.pdb", HELLO_KEY)
    folder.mkdir(parents=True)
    return folder


def placed_downstream(capsys: pytest.CaptureFixture[str], tmp_path: Path, source: str) -> Path:
    """hello64.exe's PDB found through srv*<tmp_path>/down*`source`: it must be hello64.pdb,
    placed in the one-tier downstream store with the fixture's bytes. Where it was placed."""
    down = tmp_path / "down"
    status, out, _ = find(capsys, [alone(tmp_path)], f"srv*{down}*{source}")
    placed = key_folder(down, "hello64.pdb", HELLO_KEY) / "hello64.pdb"
    assert (status, out) == (0, [str(placed)])
    assert placed.read_bytes() == HELLO_PDB.read_bytes()
    return placed


def gets(server: SymbolServer, path: str = HELLO_URL_PATH) -> int:
    return server.count(path)


def leftovers(store: Path) -> list[Path]:
    return [p for p in store.rglob("*") if p.is_file() and p.name.endswith(".tmp")]


# --- on disk ---------------------------------------------------------------------------


def test_the_pdb_beside_the_pe_is_found_without_a_symbol_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(HELLO_EXE, tmp_path)
    shutil.copy(HELLO_PDB, tmp_path)
    status, out, err = find(capsys, [tmp_path / "hello64.exe"], "")
    assert (status, out, err) == (0, [str(tmp_path / "hello64.pdb")], [])


def test_a_pdb_of_another_age_beside_the_pe_is_named_not_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(HELLO_EXE, tmp_path)
    shutil.copy(PE_FIXTURES / "age2" / "hello64.pdb", tmp_path)
    status, out, err = find(capsys, [tmp_path / "hello64.exe"], "")
    assert status == 1 and out == []
    assert len(err) == 1 and "age 2, not 1" in err[0] and HELLO_KEY in err[0]


def test_a_plain_folder_is_searched_by_the_recorded_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "pdbs"
    folder.mkdir()
    shutil.copy(PE_FIXTURES / "greet32.pdb", folder)
    # greet32.dll records C:\build\out\greet32.pdb: only its file name means anything here.
    status, out, _ = find(
        capsys, [alone(tmp_path, "greet32.dll")], f"{tmp_path / 'empty'};{folder}"
    )
    assert (status, out) == (0, [str(folder / "greet32.pdb")])


def test_a_cache_keeps_what_the_elements_to_its_right_find(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, cache = tmp_path / "pdbs", tmp_path / "cache"
    folder.mkdir()
    shutil.copy(HELLO_PDB, folder)
    status, out, _ = find(capsys, [alone(tmp_path)], f"cache*{cache};{folder}")
    cached = key_folder(cache, "hello64.pdb", HELLO_KEY) / "hello64.pdb"
    assert (status, out) == (0, [str(cached)])
    assert cached.read_bytes() == HELLO_PDB.read_bytes()


def test_a_local_store_with_file_ptr_and_its_message_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, down, elsewhere = tmp_path / "store", tmp_path / "down", tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(HELLO_PDB, elsewhere)
    pointer = key_folder(store, "hello64.pdb", HELLO_KEY)
    pointer.mkdir(parents=True)
    (pointer / "file.ptr").write_text(f"PATH:{elsewhere / 'hello64.pdb'}\r\n")
    greet = key_folder(
        store,
        "greet64.pdb",
        pe.read_identity(str(PE_FIXTURES / "greet64.dll")).require_codeview().key,
    )
    greet.mkdir(parents=True)
    (greet / "file.ptr").write_text("MSG: withdrawn by the vendor")
    status, out, err = find(
        capsys, [alone(tmp_path), alone(tmp_path, "greet64.dll")], f"srv*{down}*{store}"
    )
    placed = key_folder(down, "hello64.pdb", HELLO_KEY) / "hello64.pdb"
    assert (status, out) == (1, [str(placed)])
    assert placed.read_bytes() == HELLO_PDB.read_bytes()
    assert len(err) == 1 and "withdrawn by the vendor" in err[0]


@needs_gcab
def test_a_compressed_file_in_a_local_store_is_unpacked_downstream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    gcab(HELLO_PDB, hello_folder(store) / "hello64.pd_")
    placed = placed_downstream(capsys, tmp_path, str(store))
    assert sorted(p.name for p in placed.parent.iterdir()) == ["hello64.pdb"]


# --- symbol servers ------------------------------------------------------------------------


def test_a_one_tier_server_download_lands_in_the_dbghelp_layout(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    put(serve_root(server), HELLO_PDB)
    down = tmp_path / "down"
    symbol_path = f"srv*{down}*{server.url}"
    status, out, err = find(capsys, [alone(tmp_path)], symbol_path)
    placed = down / "hello64.pdb" / HELLO_KEY / "hello64.pdb"
    assert (status, out, err) == (0, [str(placed)], [])
    assert placed.read_bytes() == HELLO_PDB.read_bytes()
    assert gets(server) == 1 and not leftovers(down)
    # The downstream store is checked first: the server hears nothing more.
    before = len(server.requests)
    assert find(capsys, [alone(tmp_path)], symbol_path)[:2] == (0, [str(placed)])
    assert len(server.requests) == before


def test_a_two_tier_server_is_probed_once_per_run(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = serve_root(server)
    (root / "index2.txt").write_text("")
    put(root, HELLO_PDB, two_tier=True)
    hello32 = pe.read_identity(str(PE_FIXTURES / "hello32.exe")).require_codeview()
    put(root, PE_FIXTURES / "hello32.pdb", name="hello32.pdb", key=hello32.key, two_tier=True)
    down = tmp_path / "down"
    status, out, _ = find(
        capsys, [alone(tmp_path), alone(tmp_path, "hello32.exe")], f"srv*{down}*{server.url}"
    )
    assert status == 0
    assert out == [
        str(down / "hello64.pdb" / HELLO_KEY / "hello64.pdb"),
        str(down / "hello32.pdb" / hello32.key / "hello32.pdb"),
    ]
    assert server.count("/index2.txt") == 1
    assert gets(server, f"/he/hello64.pdb/{HELLO_KEY}/hello64.pdb") == 1


def test_a_two_tier_downstream_store_gets_the_two_tier_layout(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    put(serve_root(server), HELLO_PDB)
    down = tmp_path / "down"
    down.mkdir()
    (down / "index2.txt").write_text("")
    status, out, _ = find(capsys, [alone(tmp_path)], f"srv*{down}*{server.url}")
    assert (status, out) == (0, [str(down / "he" / "hello64.pdb" / HELLO_KEY / "hello64.pdb")])


def test_file_ptr_on_a_server_is_followed_inside_that_server_only(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(HELLO_PDB, serve_root(server) / "elsewhere.pdb")
    (hello_folder(serve_root(server)) / "file.ptr").write_text("PATH:elsewhere.pdb")
    placed_downstream(capsys, tmp_path, server.url)
    # The file itself and its compressed form were asked for first.
    assert gets(server) == 1 and gets(server, HELLO_URL_PATH[:-1] + "_") == 1
    assert gets(server, "/elsewhere.pdb") == 1


@pytest.mark.parametrize(
    "target",
    [
        "{local}",
        "/proc/self/environ",
        "/net/otherhost/share/hello64.pdb",
        "\\\\host\\share\\x.pdb",
        "file:///etc/passwd",
        "http://127.0.0.2:9/hello64.pdb",
        "C:\\symbols\\hello64.pdb",
    ],
)
def test_file_ptr_on_a_server_never_leads_off_that_server(
    target: str, tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "share"
    elsewhere.mkdir()
    shutil.copy(HELLO_PDB, elsewhere)
    target = target.format(local=elsewhere / "hello64.pdb")
    (hello_folder(serve_root(server)) / "file.ptr").write_text(f"PATH:{target}")
    down = tmp_path / "down"
    status, out, err = find(capsys, [alone(tmp_path)], f"srv*{down}*{server.url}")
    assert (status, out) == (1, [])
    (line,) = err
    assert f"points to {target}, outside that store: not followed" in line
    assert [p for p in down.rglob("*") if p.is_file() and p.parent.name != ".dsymfind-locks"] == []


@needs_gcab
@pytest.mark.parametrize("compress", [True, False], ids=["mszip", "stored"])
def test_a_compressed_answer_is_unpacked_into_the_downstream_store(
    compress: bool, tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    gcab(HELLO_PDB, hello_folder(serve_root(server)) / "hello64.pd_", compress=compress)
    placed = placed_downstream(capsys, tmp_path, server.url)
    assert sorted(p.name for p in placed.parent.iterdir()) == ["hello64.pdb"]


def test_an_lzx_answer_is_unpacked_into_the_downstream_store(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = write_cab("hello64.pdb", HELLO_PDB.read_bytes(), 21)
    (hello_folder(serve_root(server)) / "hello64.pd_").write_bytes(packed)
    placed_downstream(capsys, tmp_path, server.url)
    assert not leftovers(tmp_path / "down")


@pytest.mark.parametrize("answer", ["age2", "guid2", "html"])
def test_a_wrong_answer_is_never_placed_nor_remembered(
    answer: str, tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    if answer == "html":
        server.route(HELLO_URL_PATH, body(b"<html>sign in</html>", content_type="text/html"))
    else:
        put(serve_root(server), PE_FIXTURES / answer / "hello64.pdb")
    down = tmp_path / "down"
    symbol_path = f"srv*{down}*{server.url}"
    status, out, err = find(capsys, [alone(tmp_path)], symbol_path)
    assert (status, out) == (1, [])
    expected = {"age2": "age 2, not 1", "guid2": "GUID {0DDBA11C", "html": "not a PDB 7.0 file"}
    assert len(err) == 1 and expected[answer] in err[0]
    assert not (down / "hello64.pdb" / HELLO_KEY / "hello64.pdb").exists()
    assert not leftovers(down)
    # A wrong answer is not "absent": the next run asks again.
    find(capsys, [alone(tmp_path)], symbol_path)
    assert gets(server) == 2


@needs_pdbutil
def test_a_source_indexed_pdb_is_taken_under_the_images_key(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    indexed = with_ages(tmp_path / "indexed", info=2, dbi=1)  # what pdbstr leaves
    put(serve_root(server), indexed)
    down = tmp_path / "down"
    status, out, err = find(capsys, [alone(tmp_path)], f"srv*{down}*{server.url}")
    placed = down / "hello64.pdb" / HELLO_KEY / "hello64.pdb"
    assert (status, out, err) == (0, [str(placed)], [])
    assert placed.read_bytes() == indexed.read_bytes()


def test_a_pdb_published_after_a_miss_is_found_by_the_next_run(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str], cache_dir: Path
) -> None:
    """Run on purpose, `pdb` keeps no negative cache: no flag is needed after a publish."""
    symbol_path = f"srv*{tmp_path / 'down'}*{server.url}"
    status, _, err = find(capsys, [alone(tmp_path)], symbol_path)
    assert status == 1 and len(err) == 1
    assert len(server.requests) == 4  # index2.txt, the file, its compressed form, file.ptr
    assert negative_markers(cache_dir) == []
    put(serve_root(server), HELLO_PDB)

    status, out, err = find(capsys, [alone(tmp_path)], symbol_path)

    assert (status, err) == (0, [])
    assert Path(out[0]).read_bytes() == HELLO_PDB.read_bytes()
    assert gets(server) == 2


def test_a_transient_server_error_is_retried(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    put(serve_root(server), HELLO_PDB)
    server.route(HELLO_URL_PATH, statuses(503))
    status, out, _ = find(capsys, [alone(tmp_path)], f"srv*{tmp_path / 'down'}*{server.url}")
    assert status == 0 and len(out) == 1
    assert gets(server) == 2


def test_a_failing_server_is_skipped_for_a_while(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.route("/index2.txt", body(b"", 500))
    symbol_path = f"srv*{tmp_path / 'down'}*{server.url}"
    status, _, err = find(capsys, [alone(tmp_path)], symbol_path)
    assert status == 1 and "HTTP 500" in err[0]
    asked = len(server.requests)
    status, _, err = find(capsys, [alone(tmp_path)], symbol_path)
    assert status == 1 and "skipped" in err[0]
    assert len(server.requests) == asked


def test_a_chain_copies_the_find_into_every_store_to_its_left(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    put(serve_root(server), HELLO_PDB)
    first, second = tmp_path / "first", tmp_path / "second"
    status, out, _ = find(capsys, [alone(tmp_path)], f"srv*{first}*{second}*{server.url}")
    assert (status, out) == (0, [str(first / "hello64.pdb" / HELLO_KEY / "hello64.pdb")])
    assert (
        second / "hello64.pdb" / HELLO_KEY / "hello64.pdb"
    ).read_bytes() == HELLO_PDB.read_bytes()
    assert gets(server) == 1


def test_folders_come_before_stores_and_local_stores_before_servers(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    put(serve_root(server), HELLO_PDB)
    folder, store = tmp_path / "pdbs", tmp_path / "store"
    folder.mkdir()
    shutil.copy(HELLO_PDB, folder)
    in_store = put(store, HELLO_PDB)
    symbol_path = f"srv*{tmp_path / 'down'}*{server.url};srv*{store};{folder}"
    exe = alone(tmp_path)
    assert find(capsys, [exe], symbol_path)[:2] == (0, [str(folder / "hello64.pdb")])
    (folder / "hello64.pdb").unlink()
    assert find(capsys, [exe], symbol_path)[:2] == (0, [str(in_store)])
    assert server.requests == []


def test_leftovers_of_a_killed_run_are_removed(
    tmp_path: Path, server: SymbolServer, capsys: pytest.CaptureFixture[str]
) -> None:
    put(serve_root(server), HELLO_PDB)
    down = tmp_path / "down"
    stale = key_folder(down, "hello64.pdb", HELLO_KEY) / "hello64.pdb.99999.tmp"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"half a download")
    assert find(capsys, [alone(tmp_path)], f"srv*{down}*{server.url}")[0] == 0
    assert not stale.exists()


# --- the command line, as real processes ---------------------------------------------------


def test_cli_exit_status_and_one_stderr_line_per_miss(tmp_path: Path) -> None:
    shutil.copy(HELLO_EXE, tmp_path)
    shutil.copy(HELLO_PDB, tmp_path)
    files = [
        tmp_path / "hello64.exe",
        PE_FIXTURES / "nodebug64.exe",
        PE_FIXTURES / "broken" / "not_pe_signature.exe",
        alone(tmp_path, "greet64.dll"),
    ]
    done = run_cli("pdb", *map(str, files))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [str(tmp_path / "hello64.pdb")]
    lines = done.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith("dsymfind: ") for line in lines)
    assert "no CodeView entry" in lines[0] and "no PE signature" in lines[1]
    assert "no matching greet64.pdb" in lines[2]
    assert run_cli("pdb", str(tmp_path / "hello64.exe")).returncode == 0


def test_cli_symbol_path_from_the_config_else_the_environment(
    tmp_path: Path, config_file: Path
) -> None:
    folder = tmp_path / "pdbs"
    folder.mkdir()
    shutil.copy(HELLO_PDB, folder)
    env = {**os.environ, "_NT_SYMBOL_PATH": str(folder)}
    exe = alone(tmp_path)
    assert run_cli("pdb", str(exe), env=env).stdout == f"{folder / 'hello64.pdb'}\n"
    write_config(config_file, f"symbol_path = {json.dumps(str(tmp_path / 'nothing'))}\n")
    done = run_cli("pdb", str(exe), env=env)
    assert done.returncode == 1 and done.stdout == ""
    done = run_cli("pdb", "--symbol-path", str(folder), str(exe), env=env)
    assert done.returncode == 0


def test_cli_bad_symbol_path_is_one_error_line() -> None:
    done = run_cli("pdb", "--symbol-path", "symopt*0x10", str(HELLO_EXE))
    assert done.returncode == 1
    assert done.stderr.startswith("dsymfind: error: symbol path element 'symopt*0x10'")
    assert len(done.stderr.splitlines()) == 1


def test_concurrent_processes_download_a_key_once(tmp_path: Path, server: SymbolServer) -> None:
    # About 1.5 s per download, so the four processes overlap.
    server.route(HELLO_URL_PATH, slow(HELLO_PDB.read_bytes(), 8192, 0.15))
    down, exe = tmp_path / "down", alone(tmp_path)
    results: list[subprocess.CompletedProcess[str]] = []
    lock = threading.Lock()

    def one() -> None:
        done = run_cli("pdb", "--symbol-path", f"srv*{down}*{server.url}", str(exe))
        with lock:
            results.append(done)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    placed = down / "hello64.pdb" / HELLO_KEY / "hello64.pdb"
    assert [(r.returncode, r.stdout, r.stderr) for r in results] == [(0, f"{placed}\n", "")] * 4
    assert gets(server) == 1
    assert placed.read_bytes() == HELLO_PDB.read_bytes()


def test_id_shows_the_pe_identity_and_store_keys() -> None:
    done = run_cli("id", str(HELLO_EXE), str(PE_FIXTURES / "greet32.dll"))
    assert done.returncode == 0, done.stderr
    image = pe.read_identity(str(HELLO_EXE))
    lines = done.stdout.splitlines()
    assert lines[0] == str(HELLO_EXE)
    assert lines[1] == (
        f"  PE32+ x64  TimeDateStamp {image.timestamp:08X}  SizeOfImage 0x{image.size_of_image:X}"
    )
    assert f"  GUID {str(image.require_codeview().guid).upper()}  age 1  PDB hello64.pdb" in lines
    assert f"    pdb key:         hello64.pdb/{HELLO_KEY}/hello64.pdb" in lines
    assert f"    pe key:          hello64.exe/{image.pe_key}/hello64.exe" in lines
    assert "  PE32 x86" in done.stdout and r"PDB C:\build\out\greet32.pdb" in done.stdout


def test_id_json_and_errors_per_file(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("neither")
    files = [
        HELLO_EXE,
        PE_FIXTURES / "nodebug64.exe",
        PE_FIXTURES / "broken" / "truncated_optional_header.exe",
        notes,
    ]
    done = run_cli("id", "--json", *map(str, files))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert [entry["file"] for entry in report] == [str(HELLO_EXE), str(files[1])]
    assert report[0]["keys"]["pdb"] == f"hello64.pdb/{HELLO_KEY}/hello64.pdb"
    assert report[0]["format"] == "PE32+" and report[0]["age"] == 1
    assert report[1]["no_pdb"]["status"] == "no_codeview" and "pdb" not in report[1]["keys"]
    lines = done.stderr.splitlines()
    assert len(lines) == 2
    assert "optional header lies outside the file" in lines[0] and str(notes) in lines[1]
