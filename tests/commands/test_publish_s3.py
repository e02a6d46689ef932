"""`dsymfind publish --to s3://symbols/PREFIX` against a real S3 engine (SeaweedFS on loopback,
tests/support/seaweed.py), with the `ci` and `reader` identities' keys."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import symbol_server as ss
from support.fixtures import (
    FIXTURES,
    HELLO_UUID,
    UNIVERSAL_UUIDS,
    dwarf_of,
    padded_bundle,
    write_config,
)
from support.processes import BIN, run_helper
from support.s3_publish import Requests, counting, keys_env, publish_args, run_publish
from support.seaweed import REGION, SYMBOLS, SeaweedS3
from support.stalling_proxy import StallingProxy

from dsymfind import main as cli
from dsymfind.apple import macho
from dsymfind.publish import keys
from dsymfind.stores import builds
from dsymfind.stores.s3 import upload as s3_target

MIB = 1024 * 1024
DSYM_UUIDS = [HELLO_UUID, *UNIVERSAL_UUIDS.values()]


@pytest.fixture
def prefix() -> str:
    """A prefix of this test's own in the shared bucket."""
    return f"run-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    build = tmp_path / "build"
    for name in ("hello.dSYM", "universal.dSYM"):
        shutil.copytree(FIXTURES / name, build / name)
    return build


def unified(uuid_text: str, what: str = "debuginfo") -> str:
    hex_digits = uuid_text.replace("-", "").lower()
    return f"{hex_digits[:2]}/{hex_digits[2:]}/{what}"


# Every object a publish of the inputs makes: each DWARF file, and the metadata naming it.
PUBLISHED_KEYS = sorted(unified(u, what) for u in DSYM_UUIDS for what in ("debuginfo", "meta"))


@pytest.fixture
def counted(s3: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> Requests:
    """Run publish in this process with the ci keys; its client's requests counted."""
    return counting(s3, "ci", monkeypatch)


def objects(s3: SeaweedS3, prefix: str) -> dict[str, dict[str, Any]]:
    admin = s3.client("admin")
    listed = admin.list_objects_v2(Bucket=SYMBOLS, Prefix=prefix + "/").get("Contents", [])
    return {item["Key"].removeprefix(prefix + "/"): item for item in listed}


def test_publish_then_republish_is_one_listing_and_one_head_per_key_and_a_new_record(
    s3: SeaweedS3, prefix: str, inputs: Path, counted: Requests, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(publish_args(s3, prefix, inputs)) == 0
    first = capsys.readouterr().out
    assert sorted(line for line in first.splitlines() if line.endswith(": published")) == sorted(
        [
            f"hello.dSYM {HELLO_UUID} arm64: published",
            *(f"universal.dSYM {u} {arch}: published" for arch, u in UNIVERSAL_UUIDS.items()),
        ]
    )
    stored = objects(s3, prefix)
    assert {k for k in stored if not k.startswith(builds.BOOKKEEPING)} == set(PUBLISHED_KEYS)
    ci = s3.client("ci")
    hello = ci.get_object(Bucket=SYMBOLS, Key=f"{prefix}/{unified(HELLO_UUID)}")
    body = hello["Body"].read()
    assert body == dwarf_of(FIXTURES / "hello.dSYM").read_bytes()
    assert hello["Metadata"] == {"sha256": hashlib.sha256(body).hexdigest()}

    counted.operations.clear()
    assert cli.main([*publish_args(s3, prefix, inputs), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert sorted(r["key"] for r in records) == PUBLISHED_KEYS
    assert {r["state"] for r in records} == {"exists"}
    # One listing of the store and a HEAD per key; the build's own bookkeeping: a listing of
    # the retires at work, its id's claim, its intent, a ref per UUID, its record, and the
    # intent removed.
    assert counted.operations == Counter(
        {
            "ListObjectsV2": 2,
            "HeadObject": len(PUBLISHED_KEYS),
            "PutObject": 3 + len(UNIVERSAL_UUIDS) + 1,
            "DeleteObjects": 1,
        }
    )
    again = objects(s3, prefix)
    assert {k: v for k, v in again.items() if k in PUBLISHED_KEYS} == {
        k: v for k, v in stored.items() if k in PUBLISHED_KEYS
    }
    assert len([k for k in again if k.startswith(builds.BUILDS)]) == 2


def test_the_build_record_lists_the_keys(s3: SeaweedS3, prefix: str, inputs: Path) -> None:
    done = run_publish(s3, prefix, inputs)
    assert done.returncode == 0, done.stderr
    (record_key,) = [k for k in objects(s3, prefix) if k.startswith(builds.BUILDS)]
    assert f"build record {record_key}" in done.stdout
    body = s3.client("reader").get_object(Bucket=SYMBOLS, Key=f"{prefix}/{record_key}")
    document = json.loads(body["Body"].read())
    assert sorted(o["key"] for o in document["objects"]) == PUBLISHED_KEYS
    assert all(len(o["sha256"]) == 64 for o in document["objects"])


def test_a_conflicting_object_is_refused_and_left_alone(
    s3: SeaweedS3, prefix: str, inputs: Path
) -> None:
    key = f"{prefix}/{unified(HELLO_UUID)}"
    other = b"another build's bytes"
    s3.client("ci").put_object(
        Bucket=SYMBOLS, Key=key, Body=other, Metadata={"sha256": hashlib.sha256(other).hexdigest()}
    )
    done = run_publish(s3, prefix, inputs)
    assert done.returncode == 1
    conflict = f"hello.dSYM {HELLO_UUID} arm64: conflict: s3://{SYMBOLS}/{key} holds other bytes"
    assert conflict in done.stdout
    assert s3.client("ci").get_object(Bucket=SYMBOLS, Key=key)["Body"].read() == other
    assert f"universal.dSYM {UNIVERSAL_UUIDS['arm64']} arm64: published\n" in done.stdout


def test_three_concurrent_publishers_one_object_per_key(
    s3: SeaweedS3, prefix: str, inputs: Path
) -> None:
    command = [str(BIN / "dsymfind"), *publish_args(s3, prefix, inputs), "--verbose"]
    runs = [
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=keys_env(s3, "ci"),
        )
        for _ in range(3)
    ]
    results = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    assert [code for code, _, _ in results] == [0, 0, 0], results
    stored = objects(s3, prefix)
    for uuid_text in DSYM_UUIDS:
        key = unified(uuid_text)
        assert key in stored
        assert sum(f"  published {key}\n" in out for _, out, _ in results) == 1
        assert sum(f"  exists {key}\n" in out for _, out, _ in results) == 2


def test_read_only_keys_cannot_publish(s3: SeaweedS3, prefix: str, inputs: Path) -> None:
    done = run_publish(s3, prefix, inputs, identity="reader")
    assert done.returncode == 1
    assert done.stderr.startswith("dsymfind: error: s3://symbols/"), done.stderr
    assert "access denied" in done.stderr and done.stderr.count("\n") == 1
    assert objects(s3, prefix) == {}


def test_a_large_object_goes_up_in_parts(
    s3: SeaweedS3,
    prefix: str,
    tmp_path: Path,
    counted: Requests,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real dSYM with 12 MiB of trailing padding (still a valid Mach-O), and the multipart
    # threshold lowered through the test-only variable: three 5 MiB parts.
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "big.dSYM")
    dwarf = dwarf_of(bundle)
    with dwarf.open("ab") as f:
        f.write(b"\0" * (12 * MIB))
    monkeypatch.setenv(s3_target.MULTIPART_THRESHOLD_ENV, str(5 * MIB))
    assert cli.main(publish_args(s3, prefix, bundle)) == 0
    assert counted.operations["UploadPart"] == 3
    assert counted.operations["CompleteMultipartUpload"] == 1
    # The meta file, then the build's own: its id's claim, its intent, its UUID's ref, its
    # record.
    assert counted.operations["PutObject"] == 5
    assert counted.symbols["PutObject"] == 1
    got = s3.client("ci").get_object(Bucket=SYMBOLS, Key=f"{prefix}/{unified(HELLO_UUID)}")
    data = got["Body"].read()
    assert data == dwarf.read_bytes()
    assert got["Metadata"] == {"sha256": hashlib.sha256(data).hexdigest()}
    # Another build's big object for the same key: the refused completion is aborted.
    with dwarf.open("ab") as f:
        f.write(b"\1")
    counted.operations.clear()
    assert cli.main(publish_args(s3, prefix, bundle)) == 1
    # The object and its meta file; the build's claim and intent, both removed again (no
    # record: its one file is not in the store), and the listing of retires at work.
    assert counted.operations == Counter(
        {"ListObjectsV2": 2, "HeadObject": 2, "PutObject": 2, "DeleteObjects": 1}
    )
    uploads = s3.client("ci").list_multipart_uploads(Bucket=SYMBOLS, Prefix=prefix)
    assert uploads.get("Uploads", []) == []


def test_objects_and_parts_are_stored_as_sent_not_gzipped_by_the_engine(
    s3: SeaweedS3, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two compressible dSYMs (zero padding): one under the lowered multipart threshold, one
    # above it. Untyped, SeaweedFS gzips such chunks and unzips them on every GET.
    sizes = {"small.dSYM": MIB, "big.dSYM": 12 * MIB}
    for name, padding in sizes.items():
        bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / name)
        with dwarf_of(bundle).open("ab") as f:
            f.write(b"\0" * padding)
    for variable, value in keys_env(s3, "ci").items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv(s3_target.MULTIPART_THRESHOLD_ENV, str(5 * MIB))
    for name in sizes:
        assert cli.main(publish_args(s3, f"{prefix}-{name}", tmp_path / name)) == 0
        key = f"{prefix}-{name}/{unified(HELLO_UUID)}"
        chunks = s3.stored_chunks(SYMBOLS, key)
        assert chunks and not [c for c in chunks if c.get("is_compressed")], (name, chunks)
        head = s3.client("ci").head_object(Bucket=SYMBOLS, Key=key)
        assert head["ContentType"] == s3_target.CONTENT_TYPE


def test_ci_publishes_and_a_read_only_teammate_fetches_every_slice(
    s3: SeaweedS3, prefix: str, inputs: Path, config_file: Path
) -> None:
    """The whole path: CI publishes with its keys; a developer's helper, holding only the
    reader's keys, fetches each UUID (each slice of the universal dSYM its own object)."""
    assert run_publish(s3, prefix, inputs).returncode == 0
    write_config(
        config_file,
        f"timeout = 30\n[[servers]]\nname = 'team'\nurl = 's3://{SYMBOLS}/{prefix}/'\n"
        f"endpoint_url = '{s3.endpoint_url}'\nregion = '{REGION}'\n",
    )
    teammate = keys_env(s3, "reader")
    for wanted in DSYM_UUIDS:
        answer = run_helper(wanted, env=teammate).entry(wanted)
        assert "DBGDSYMPath" in answer, answer
        (piece,) = macho.read_slices(answer["DBGDSYMPath"])  # a thin object per slice
        assert piece.uuid == wanted


@pytest.mark.parametrize("threshold", [None, 5 * MIB], ids=["whole", "in-parts"])
def test_a_file_cut_after_verification_is_not_uploaded(
    s3: SeaweedS3,
    prefix: str,
    tmp_path: Path,
    counted: Requests,
    monkeypatch: pytest.MonkeyPatch,
    threshold: int | None,
) -> None:
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "big.dSYM")
    dwarf = dwarf_of(bundle)
    with dwarf.open("ab") as f:
        f.write(b"\0" * (12 * MIB))  # three parts when the threshold is lowered
    good = dwarf.read_bytes()
    if threshold is not None:
        monkeypatch.setenv(s3_target.MULTIPART_THRESHOLD_ENV, str(threshold))
    real = keys.plan

    def plan(*args: Any, **kwargs: Any) -> list[keys.Planned]:
        dwarf.write_bytes(good[: len(good) // 2])
        return real(*args, **kwargs)

    monkeypatch.setattr(keys, "plan", plan)
    assert cli.main(publish_args(s3, prefix, bundle)) == 1
    assert objects(s3, prefix) == {}
    assert counted.symbols["PutObject"] == counted.operations["UploadPart"] == 0
    monkeypatch.setattr(keys, "plan", real)
    dwarf.write_bytes(good)
    assert cli.main(publish_args(s3, prefix, bundle)) == 0
    got = s3.client("ci").get_object(Bucket=SYMBOLS, Key=f"{prefix}/{unified(HELLO_UUID)}")
    assert got["Body"].read() == good


def test_a_multipart_publisher_that_lost_the_race_reports_a_conflict(
    s3: SeaweedS3,
    prefix: str,
    tmp_path: Path,
    counted: Requests,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Another publisher's completion lands just after ours, as on an engine whose conditional
    completion is not atomic: the HEAD after completing finds their bytes, not ours."""
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "big.dSYM")
    with dwarf_of(bundle).open("ab") as f:
        f.write(b"\0" * (6 * MIB))
    monkeypatch.setenv(s3_target.MULTIPART_THRESHOLD_ENV, str(5 * MIB))
    key = f"{prefix}/{unified(HELLO_UUID)}"
    theirs = b"the other publisher's build"
    real = s3_target.make_client

    def overwritten_after_completion(**_: Any) -> None:
        s3.client("admin").put_object(
            Bucket=SYMBOLS,
            Key=key,
            Body=theirs,
            Metadata={"sha256": hashlib.sha256(theirs).hexdigest()},
        )

    def make_client(options: s3_target.S3Options) -> Any:
        client = real(options)
        client.meta.events.register(
            "after-call.s3.CompleteMultipartUpload", overwritten_after_completion
        )
        return client

    monkeypatch.setattr(s3_target, "make_client", make_client)
    assert cli.main([*publish_args(s3, prefix, bundle), "--json"]) == 1
    assert counted.operations["CompleteMultipartUpload"] == 1
    (record,) = [r for r in json.loads(capsys.readouterr().out) if r["key"] == unified(HELLO_UUID)]
    assert record["state"] == "conflict" and "another publisher's upload won" in record["message"]
    s3_object = s3.client("ci").get_object(Bucket=SYMBOLS, Key=key)
    assert s3_object["Body"].read() == theirs


def run_publish_to(
    endpoint: str, bucket: str, env: dict[str, str], *paths: Path
) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "dsymfind"), "publish", "--to", f"s3://{bucket}/p"]
    command += ["--endpoint-url", endpoint, "--region", REGION, *map(str, paths)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_an_endpoint_that_is_not_s3_is_named_before_anything_is_written(
    s3: SeaweedS3, inputs: Path
) -> None:
    assert s3.ports is not None
    filer = f"http://127.0.0.1:{s3.ports.filer}"  # takes a PUT as a file, answers no S3
    with ss.SymbolServer(inputs) as web:
        for endpoint in (filer, web.url):
            done = run_publish_to(endpoint, SYMBOLS, keys_env(s3, "ci"), inputs)
            assert done.returncode == 1
            assert done.stderr.startswith(f"dsymfind: error: {endpoint}"), done.stderr
            assert "does not answer as S3 does" in done.stderr
            assert done.stderr.count("\n") == 1 and done.stdout == ""
    # Nothing reached the filer: the folder a PUT would have made is not there.
    with pytest.raises(urllib.error.HTTPError) as absent:
        urllib.request.urlopen(f"{filer}/{SYMBOLS}/p/", timeout=30)
    assert absent.value.code == 404


def test_refused_credentials_and_buckets_keep_their_s3_code(s3: SeaweedS3, inputs: Path) -> None:
    ci = keys_env(s3, "ci")
    cases = {
        "InvalidAccessKeyId": (SYMBOLS, {**ci, "AWS_ACCESS_KEY_ID": "NOSUCHKEYID00000000"}),
        "SignatureDoesNotMatch": (SYMBOLS, {**ci, "AWS_SECRET_ACCESS_KEY": "x" * 40}),
        "NoSuchBucket": ("no-such-bucket", keys_env(s3, "admin")),
        # Keys that may not list a bucket (theirs or none) learn no more, as on AWS.
        "AccessDenied": ("no-such-bucket", ci),
    }
    for code, (bucket, env) in cases.items():
        done = run_publish_to(s3.endpoint_url, bucket, env, inputs)
        assert done.returncode == 1
        assert done.stderr.startswith(f"dsymfind: error: s3://{bucket}/p"), done.stderr
        assert f"({code})" in done.stderr and done.stderr.count("\n") == 1


def test_a_dsym_fetched_from_the_bucket_keeps_its_names(
    s3: SeaweedS3, prefix: str, tmp_path: Path, config_file: Path
) -> None:
    """The bucket holds symsorter's `meta` beside each DWARF file: the teammate's download
    is `MyApp.app.dSYM/Contents/Resources/DWARF/MyApp`, not named by its UUID."""
    bundle = shutil.copytree(FIXTURES / "hello.dSYM", tmp_path / "build" / "MyApp.app.dSYM")
    dwarf = bundle / "Contents" / "Resources" / "DWARF"
    (dwarf / "hello").rename(dwarf / "MyApp")
    assert run_publish(s3, prefix, bundle).returncode == 0
    write_config(
        config_file,
        f"timeout = 30\n[[servers]]\nname = 'team'\nurl = 's3://{SYMBOLS}/{prefix}/'\n"
        f"endpoint_url = '{s3.endpoint_url}'\nregion = '{REGION}'\n",
    )
    answer = run_helper(HELLO_UUID, env=keys_env(s3, "reader")).entry(HELLO_UUID)
    fetched = Path(answer["DBGDSYMPath"])
    assert (fetched.parents[3].name, fetched.name) == ("MyApp.app.dSYM", "MyApp")


def test_ctrl_c_in_the_middle_of_a_multipart_upload_leaves_nothing(
    s3: SeaweedS3, prefix: str, tmp_path: Path
) -> None:
    """SIGINT while the parts are on their way (a proxy holds them there): the upload is
    aborted once the parts in flight are answered, no object gets the key, exit 130."""
    bundle = padded_bundle(tmp_path, 40 * MIB)  # eight 5 MiB parts
    assert s3.ports is not None
    env = {**keys_env(s3, "ci"), s3_target.MULTIPART_THRESHOLD_ENV: str(5 * MIB)}
    with StallingProxy(s3.ports.s3, budget=3 * MIB) as proxy:
        command = [str(BIN / "dsymfind"), "publish", "--to", f"s3://{SYMBOLS}/{prefix}"]
        command += ["--endpoint-url", proxy.url, "--region", REGION, str(bundle)]
        child = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            admin = s3.client("admin")
            while not (proxy.stalled.is_set() and in_progress(admin, prefix)):
                assert child.poll() is None, child.communicate()
                time.sleep(0.05)
            child.send_signal(signal.SIGINT)
            # An impatient second Ctrl-C, while the parts in flight are still held and the
            # abort waits for them: the cleanup goes on all the same.
            time.sleep(0.5)
            child.send_signal(signal.SIGINT)
            proxy.release()
            out, err = child.communicate(timeout=120)
        finally:
            child.kill()
    assert child.returncode == 130, (out, err)
    assert err.splitlines()[-1:] == ["interrupted: 0 published, 1 not (nothing partial was left)"]
    assert in_progress(admin, prefix) == []
    assert objects(s3, prefix) == {}


def in_progress(admin: Any, prefix: str) -> list[dict[str, Any]]:
    """The multipart uploads begun under `prefix` and neither completed nor aborted."""
    uploads: list[dict[str, Any]] = admin.list_multipart_uploads(
        Bucket=SYMBOLS, Prefix=prefix + "/"
    ).get("Uploads", [])
    return uploads


def test_without_any_credentials_publish_names_where_it_looked(
    s3: SeaweedS3, prefix: str, inputs: Path, tmp_path: Path
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # Not a credential: it keeps botocore's last resort, the instance metadata service
    # (169.254.169.254), from being asked; a test never leaves loopback.
    env.update(HOME=str(home), AWS_EC2_METADATA_DISABLED="true", NO_PROXY="127.0.0.1")
    done = subprocess.run(
        [str(BIN / "dsymfind"), *publish_args(s3, prefix, inputs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    for named in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "--profile"):
        assert named in done.stderr
    assert done.stderr.startswith(f"dsymfind: error: s3://{SYMBOLS}/{prefix}/: no S3 credentials")
    assert done.stderr.count("\n") == 1
    assert objects(s3, prefix) == {}
