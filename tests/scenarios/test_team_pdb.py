"""Windows symbols shared through a bucket: `dsymfind publish --to s3://public/win/` puts a PE
and its PDB under their store keys, and `dsymfind pdb` finds the PDB through the bucket's
plain HTTP (anonymous GETs, path-style URLs on SeaweedFS's S3 endpoint), as a Windows
debugger's `srv*DOWNSTREAM*URL` would, verified before it is placed downstream."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.fixtures import PE_FIXTURES
from support.processes import BIN
from support.seaweed import PUBLIC, REGION, SeaweedS3

from dsymfind.windows import pe

PREFIX = "win"
HELLO_EXE = PE_FIXTURES / "hello64.exe"
HELLO_PDB = PE_FIXTURES / "hello64.pdb"


def pdb_key(exe: Path) -> str:
    """`<name>/<GUID><AGE>/<name>`, the store key of `exe`'s PDB (docs/symbol-stores.md)."""
    codeview = pe.read_identity(str(exe)).require_codeview()
    return f"{codeview.pdb_name}/{codeview.key}/{codeview.pdb_name}"


@pytest.fixture(autouse=True)
def no_ambient_symbol_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_NT_SYMBOL_PATH", raising=False)


def env_for(s3: SeaweedS3, identity: str | None) -> dict[str, str]:
    """The test's isolated environment (conftest's HOME), with `identity`'s keys or none; no
    proxy for loopback and no instance-metadata probe, which would leave the machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    if identity is not None:
        who = s3.identities[identity]
        env.update(AWS_ACCESS_KEY_ID=who.access_key, AWS_SECRET_ACCESS_KEY=who.secret_key)
    return env


def dsymfind(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dsymfind"), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def publish(s3: SeaweedS3, identity: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    to = f"s3://{PUBLIC}/{PREFIX}/"
    args = ["publish", "--to", to, "--endpoint-url", s3.endpoint_url, "--region", REGION]
    return dsymfind(env_for(s3, identity), *args, *paths)


@pytest.fixture(scope="module")
def published(s3: SeaweedS3) -> str:
    """hello64.exe and hello64.pdb in `public`, published once for the module. The harness
    grants `ci` only the `symbols` bucket and lets no one but `admin` write `public`, so admin
    publishes; the ci keys are refused there first, with nothing written."""
    refused = publish(s3, "ci", HELLO_EXE, HELLO_PDB)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"dsymfind: error: s3://{PUBLIC}/{PREFIX}/"), refused.stderr
    assert "access denied" in refused.stderr
    admin = s3.client("admin")
    assert admin.list_objects_v2(Bucket=PUBLIC, Prefix=f"{PREFIX}/").get("Contents", []) == []
    done = publish(s3, "admin", HELLO_EXE, HELLO_PDB)
    assert done.returncode == 0, done.stderr
    return done.stdout


def symbol_path(s3: SeaweedS3, downstream: Path) -> str:
    """The bucket's prefix as a symbol server: `http://127.0.0.1:PORT/public/win`."""
    return f"srv*{downstream}*{s3.endpoint_url}/{PUBLIC}/{PREFIX}"


def lone(exe: Path, folder: Path) -> Path:
    """A copy of `exe` in a folder of its own: the PDB beside it (the PE's recorded path and
    its folder come first in the search) must not answer before the server is asked."""
    folder.mkdir()
    return Path(shutil.copy(exe, folder / exe.name))


def test_a_published_pdb_is_found_through_the_buckets_http(
    s3: SeaweedS3, published: str, tmp_path: Path
) -> None:
    key = pdb_key(HELLO_EXE)
    assert f"hello64.pdb {key.split('/')[1]}: published\n" in published
    exe_id = pe.read_identity(str(HELLO_EXE)).pe_key
    assert f"hello64.exe {exe_id}: published\n" in published
    assert "build record _builds/" in published

    downstream = tmp_path / "down"
    exe = lone(HELLO_EXE, tmp_path / "app")
    done = dsymfind(env_for(s3, None), "pdb", "--symbol-path", symbol_path(s3, downstream), exe)
    assert done.returncode == 0, done.stderr
    placed = downstream / key
    assert done.stdout == f"{placed}\n"
    assert done.stderr == ""
    assert placed.read_bytes() == HELLO_PDB.read_bytes()
    # Nothing but the verified PDB under its final name (no temporary file left beside it).
    assert sorted(p.name for p in placed.parent.iterdir()) == [HELLO_PDB.name]

    # A second run is answered by the downstream store, without the server.
    s3_less = f"srv*{downstream}*http://127.0.0.1:9/{PUBLIC}/{PREFIX}"
    again = dsymfind(env_for(s3, None), "pdb", "--symbol-path", s3_less, exe)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{placed}\n"


def test_an_unpublished_pdb_is_not_found_and_asked_for_again(
    s3: SeaweedS3, published: str, tmp_path: Path
) -> None:
    # Anonymous GETs of a missing key answer 404 (not 403): a miss, where a refusal would be
    # an error.
    downstream = tmp_path / "down"
    exe = lone(PE_FIXTURES / "hello32.exe", tmp_path / "app")
    path = symbol_path(s3, downstream)
    done = dsymfind(env_for(s3, None), "pdb", "--symbol-path", path, exe)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"no matching hello32.pdb ({pdb_key(exe).split('/')[1]}) found" in done.stderr
    assert files_in(downstream) == []
    again = dsymfind(env_for(s3, None), "pdb", "--symbol-path", path, exe)
    assert again.returncode == 1
    # Run on purpose, `pdb` asks the store again: it may have been published since.
    assert again.stderr == done.stderr


def test_the_wrong_pdb_under_the_key_is_refused_not_placed(
    s3: SeaweedS3, published: str, tmp_path: Path
) -> None:
    # Another PDB planted (by admin, past publish's checks) where greet64.dll's belongs.
    key = pdb_key(PE_FIXTURES / "greet64.dll")
    s3.client("admin").put_object(Bucket=PUBLIC, Key=f"{PREFIX}/{key}", Body=HELLO_PDB.read_bytes())
    downstream = tmp_path / "down"
    exe = lone(PE_FIXTURES / "greet64.dll", tmp_path / "app")
    done = dsymfind(env_for(s3, None), "pdb", "--symbol-path", symbol_path(s3, downstream), exe)
    assert done.returncode == 1, done.stdout
    assert done.stdout == ""
    # Refused for its GUID: the planted file is hello64.pdb.
    assert "the answer is not the PDB wanted: GUID {86A03D24-" in done.stderr, done.stderr
    assert files_in(downstream) == []


def files_in(store: Path) -> list[Path]:
    """The files of a downstream store, but for its lock files."""
    found = store.rglob("*") if store.exists() else []
    return [p for p in found if p.is_file() and ".dsymfind-locks" not in p.parts]
