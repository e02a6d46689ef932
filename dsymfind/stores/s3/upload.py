"""An S3 bucket (AWS or any S3 engine) as a create-only target, through s3_api.py's client.

Per key: HEAD it. An object whose `sha256` metadata matches is `exists` (so re-publishing
a build costs one request per key); any other object is a `conflict` and is left alone.
An absent key is created with `If-None-Match: *`, which the engine refuses with 412 when
another publisher got there first: then HEAD again decides between exists and conflict.
Objects above the multipart threshold go up in parts, each retried on its own, and the
completion carries `If-None-Match: *` too; a failed upload is aborted.

botocore has no type stubs: it is imported lazily (s3_api.py), and is `Any` here.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import os
import random
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from dsymfind.stores.s3 import api as s3_api
from dsymfind.stores.s3.api import S3Options
from dsymfind.stores.writers import (
    CONFLICT,
    PUBLISHED,
    SMALL_LIMIT,
    WOULD_PUBLISH,
    Listed,
    Outcome,
    PublishError,
    WriterUnusable,
    compared,
)

if TYPE_CHECKING:
    from dsymfind.stores.writers import Body

# Above this an object goes up in parts: a single PUT of gigabytes restarts from zero on
# any hiccup, and S3 caps a single PUT at 5 GB.
MULTIPART_THRESHOLD = 64 * 1024 * 1024
# For tests only: a lower threshold, in bytes, so a multipart upload needs no 64 MiB file.
MULTIPART_THRESHOLD_ENV = "DSYMFIND_PUBLISH_MULTIPART_THRESHOLD"
PART_BYTES = 16 * 1024 * 1024
# Parts go up a few at once, as boto3's upload_file sends them: one at a time leaves the link
# idle while each part's answer comes back. Memory: this many parts in flight.
UPLOAD_THREADS = 4
MIN_PART_BYTES = 5 * 1024 * 1024  # S3's minimum for every part but the last
PART_ATTEMPTS = 3
BACKOFF_CAP = 4.0
# After a 412 the winner's object may take a moment to show; HEAD this often, this long.
SETTLE_ATTEMPTS, SETTLE_PAUSE = 10, 0.2
SHA256_METADATA = "sha256"
# Every object and every part is sent typed as opaque bytes. Untyped, SeaweedFS sniffs each
# chunk and gzips the compressible ones (DWARF is), and then unzips them on every GET: on a
# 199 MB dSYM that doubled its CPU per download. UploadPart takes no ContentType parameter,
# so the header is added to each part's request before it is signed.
CONTENT_TYPE = "application/octet-stream"
# The S3 errors that prove the endpoint speaks S3 and the keys may go on (a writer may be
# refused listing, and still put objects).
PROBE_PASSES = frozenset({"AccessDenied"})
NOT_S3 = (
    "does not answer as S3 does; check --endpoint-url (an S3 gateway, not a filer or web server)"
)
# botocore found no credentials anywhere in its chain: what the person can set.
NO_CREDENTIALS = (
    "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a "
    "profile of ~/.aws/credentials or ~/.aws/config with AWS_PROFILE or --profile"
)
# S3 removes at most this many keys in one DeleteObjects request.
DELETE_BATCH = 1000
# may_delete asks to remove a key no one writes: S3 answers a removal of an absent key as
# done, and a refused one as AccessDenied, without anything being there.
DELETE_PROBE_PREFIX = "_dsymfind-delete-probe/"
# An upload waits on a store writing megabytes: longer than a symbol lookup would.
UPLOAD_CONNECT_TIMEOUT, UPLOAD_READ_TIMEOUT = 10.0, 60.0


def make_client(options: S3Options) -> Any:
    """The S3 client publishing uses: s3_api.py's, with the patience an upload needs."""
    try:
        return s3_api.client(
            endpoint_url=options.endpoint_url,
            region=options.region,
            profile=options.profile,
            anonymous=options.anonymous,
            connect_timeout=UPLOAD_CONNECT_TIMEOUT,
            read_timeout=UPLOAD_READ_TIMEOUT,
        )
    except Exception as exc:  # noqa: BLE001 - botocore's own, named by classify()
        raise WriterUnusable(str(s3_api.classify(exc, "S3"))) from None


class S3Writer:
    def __init__(self, url: str, client: Any, env: Mapping[str, str]) -> None:
        self.bucket, self.prefix = s3_api.parse_location(url)
        self.local_root: str | None = None
        self.client = client
        type_parts_as_bytes(client)
        self.threshold = _threshold(env)
        self.part_bytes = min(PART_BYTES, max(MIN_PART_BYTES, self.threshold))
        self._errors = importlib.import_module("botocore.exceptions")
        self._parser_error = importlib.import_module("botocore.parsers").ResponseParserError
        self._refused_code = ""

    def where(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def probe(self) -> None:
        """Before anything is written: one listing, whose answer only S3 gives (an XML body
        with S3's error codes), so a web server or a filer that would take a PUT is named,
        and so are a wrong bucket, key id or secret, by their S3 code."""
        try:
            answer = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
        except self._errors.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in PROBE_PASSES:
                self._refused_code = code  # what a HEAD's bodiless 403 will mean
                return
            if not code or code.isdigit():  # an HTTP status, not an S3 error body
                raise WriterUnusable(f"{self._endpoint()}: {NOT_S3} (HTTP {code})") from None
            message = exc.response.get("Error", {}).get("Message") or code
            raise WriterUnusable(f"{self.where('')}: {message} ({code})") from None
        except self._parser_error:
            raise WriterUnusable(f"{self._endpoint()}: {NOT_S3}") from None
        except self._errors.NoCredentialsError:
            raise WriterUnusable(f"{self.where('')}: {NO_CREDENTIALS}") from None
        except self._errors.BotoCoreError as exc:
            raise WriterUnusable(f"{self.where('')}: {exc}") from None
        if "KeyCount" not in answer and "Name" not in answer:
            raise WriterUnusable(f"{self._endpoint()}: {NOT_S3}")

    def _endpoint(self) -> str:
        return str(self.client.meta.endpoint_url)

    def check(self, key: str, sha256: str) -> Outcome:
        theirs = self._head(key)
        return (
            Outcome(WOULD_PUBLISH)
            if theirs is None
            else compared(sha256, theirs[0], self.where(key))
        )

    def put(self, key: str, body: Body) -> Outcome:
        theirs = self._head(key)
        if theirs is not None:
            return compared(body.sha256, theirs[0], self.where(key))
        try:
            if body.size <= self.threshold:
                self._put_whole(key, body)
                return Outcome(PUBLISHED)
            self._put_in_parts(key, body)
        except _Taken:
            return self._settled(key, body.sha256)
        return self._completed(key, body.sha256)

    def _completed(self, key: str, sha256: str) -> Outcome:
        """Whose bytes a completed multipart upload left. Some engines (SeaweedFS) check
        `If-None-Match` on completion apart from the write, so two racing publishers can both
        complete; only the one whose bytes the key holds has published (SECURITY.md)."""
        theirs = self._head(key)
        if theirs is not None and theirs[0] == sha256:
            return Outcome(PUBLISHED)
        holder = "nothing" if theirs is None else f"SHA-256 {theirs[0]}"
        return Outcome(
            CONFLICT,
            f"{self.where(key)}: completed, but another publisher's upload won (it holds "
            f"{holder}); left alone",
        )

    # -- managing what was written (stores/writers.py Manager) ------------------------------

    def listed(self, prefix: str) -> Iterator[Listed]:
        """One ListObjectsV2 request per 1,000 keys."""
        token: dict[str, str] = {}
        while True:
            page = self._call(
                "list_objects_v2", prefix, Prefix=self.prefix + prefix, MaxKeys=1000, **token
            )
            for item in page.get("Contents") or ():
                key = str(item["Key"])[len(self.prefix) :]
                yield Listed(key, int(item.get("Size", 0)), item["LastModified"].timestamp())
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": str(page["NextContinuationToken"])}

    def read_small(self, key: str, limit: int = SMALL_LIMIT) -> bytes | None:
        try:
            answer = self._call("get_object", key, Key=self.prefix + key)
        except _Absent:
            return None
        with contextlib.closing(answer["Body"]) as body:
            if int(answer.get("ContentLength", 0)) > limit:
                raise PublishError(f"{self.where(key)}: larger than {limit} bytes")
            data = body.read(limit + 1)
        if len(data) > limit:
            raise PublishError(f"{self.where(key)}: larger than {limit} bytes")
        return bytes(data)

    def create_small(self, key: str, data: bytes) -> bool:
        try:
            self._create(key, data, {})
        except _Taken:
            return False
        return True

    def delete(self, keys: Sequence[str]) -> list[tuple[str, str]]:
        failures = []
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            answer = self._call(
                "delete_objects",
                batch[0],
                Delete={
                    "Objects": [{"Key": self.prefix + key} for key in batch],
                    "Quiet": True,
                },
            )
            for error in answer.get("Errors") or ():
                key = str(error.get("Key", ""))[len(self.prefix) :]
                failures.append((key, str(error.get("Message") or error.get("Code") or "")))
        return failures

    def may_delete(self) -> str | None:
        probe = f"{DELETE_PROBE_PREFIX}{secrets.token_hex(8)}"
        try:
            failures = self.delete([probe])
        except WriterUnusable as exc:
            return str(exc)
        if failures:
            return (
                f"s3://{self.bucket}/{self.prefix}: these credentials may not delete objects "
                f"({failures[0][1]}): retiring needs s3:DeleteObject"
            )
        return None

    # -- requests ------------------------------------------------------------------------

    def _head(self, key: str) -> tuple[str | None] | None:
        """None when the key is absent, else (its sha256 metadata or None,)."""
        try:
            answer = self._call("head_object", key, Key=self.prefix + key)
        except _Absent:
            return None
        metadata = answer.get("Metadata") or {}
        value = metadata.get(SHA256_METADATA)
        return (value if isinstance(value, str) else None,)

    def _settled(self, key: str, sha256: str) -> Outcome:
        """Someone else created the key as we tried: theirs stays; same bytes or not?"""
        for _ in range(SETTLE_ATTEMPTS):
            theirs = self._head(key)
            if theirs is not None:
                return compared(sha256, theirs[0], self.where(key))
            time.sleep(SETTLE_PAUSE)
        raise PublishError(f"{self.where(key)}: refused as existing (412) yet absent")

    def _put_whole(self, key: str, body: Body) -> None:
        # Below the threshold the bytes fit in memory: read (and checked) once, sent as read.
        data = b"".join(body.chunks())
        self._create(key, data, {SHA256_METADATA: body.sha256})
        body.sent(len(data))

    def _create(self, key: str, data: bytes, metadata: dict[str, str]) -> None:
        """One PUT that only creates: _Taken when the key exists (412)."""
        self._call(
            "put_object",
            key,
            Key=self.prefix + key,
            Body=data,
            IfNoneMatch="*",
            ContentType=CONTENT_TYPE,
            Metadata=metadata,
        )

    def _put_in_parts(self, key: str, body: Body) -> None:
        created = self._call(
            "create_multipart_upload",
            key,
            Key=self.prefix + key,
            ContentType=CONTENT_TYPE,
            Metadata={SHA256_METADATA: body.sha256},
        )
        upload_id = created["UploadId"]
        try:
            parts = self._upload_parts(key, body, upload_id)
            self._call(
                "complete_multipart_upload",
                key,
                Key=self.prefix + key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
        except BaseException:
            self._abort(key, upload_id)  # a refused or failed upload must not linger, billed
            raise

    def _upload_parts(self, key: str, body: Body, upload_id: str) -> list[dict[str, Any]]:
        """Every part, a few at once, in part order. The parts are read in order here, so the
        body checks the whole before the caller completes: a Changed ends it, uncompleted."""
        parts: list[dict[str, Any]] = []
        with ThreadPoolExecutor(max_workers=UPLOAD_THREADS) as pool:
            sending: collections.deque[Future[dict[str, Any]]] = collections.deque()
            for number, chunk in enumerate(body.chunks(self.part_bytes), 1):
                if len(sending) == UPLOAD_THREADS:
                    parts.append(sending.popleft().result())
                sending.append(
                    pool.submit(self._upload_part, key, upload_id, number, chunk, body.sent)
                )
            parts.extend(future.result() for future in sending)
        return parts

    def _upload_part(
        self, key: str, upload_id: str, number: int, chunk: bytes, sent: Callable[[int], None]
    ) -> dict[str, Any]:
        """One part, tried PART_ATTEMPTS times: a part is cheap to send again, the upload not."""
        for attempt in range(1, PART_ATTEMPTS + 1):
            try:
                answer = self._call(
                    "upload_part",
                    key,
                    Key=self.prefix + key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=chunk,
                )
                sent(len(chunk))
                return {"ETag": str(answer["ETag"]), "PartNumber": number}
            except PublishError:
                if attempt == PART_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, min(BACKOFF_CAP, 0.25 * 2**attempt)))  # noqa: S311 - jitter
        raise AssertionError("unreachable")

    def _abort(self, key: str, upload_id: str) -> None:
        # Best effort: an upload left open is billed, but a lifecycle rule can clean it.
        with contextlib.suppress(self._errors.BotoCoreError, self._errors.ClientError):
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=self.prefix + key, UploadId=upload_id
            )

    def _call(self, operation: str, key: str, **params: Any) -> Any:
        """One client call; S3's answers turned into _Absent, _Taken or a PublishError."""
        try:
            return getattr(self.client, operation)(Bucket=self.bucket, **params)
        except self._errors.ClientError as exc:
            raise self._client_error(exc, operation, key) from None
        except self._errors.NoCredentialsError:
            raise WriterUnusable(f"{self.where(key)}: {NO_CREDENTIALS}") from None
        except self._parser_error:
            raise WriterUnusable(f"{self._endpoint()}: {NOT_S3}") from None
        except self._errors.BotoCoreError as exc:
            raise PublishError(f"{self.where(key)}: {exc}") from None

    def _client_error(self, exc: Any, operation: str, key: str) -> Exception:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if (status == 404 and operation == "head_object") or code == "NoSuchKey":
            return _Absent()
        if status == 412 or code == "PreconditionFailed":
            return _Taken()
        if status == 403 or code == "AccessDenied":
            verb = _VERBS.get(operation, "write")
            if not code or code.isdigit():  # a HEAD's answer has no body to name the error
                code = self._refused_code or str(status)
            return WriterUnusable(
                f"{self.where(key)}: access denied ({code}): these credentials may not "
                f"{verb} s3://{self.bucket}/{self.prefix}, or the bucket does not exist"
            )
        detail = error.get("Message") or code or f"HTTP {status}"
        return PublishError(f"{self.where(key)}: {operation} failed: {detail}")


# What a refused operation says the credentials may not do.
_VERBS = {
    "head_object": "read",
    "get_object": "read",
    "list_objects_v2": "list",
    "delete_objects": "delete from",
}


class _Absent(Exception):
    """HEAD found no object."""


class _Taken(Exception):
    """The conditional create was refused: the key was created meanwhile."""


def type_parts_as_bytes(client: Any) -> None:
    """Have `client`'s every UploadPart request say CONTENT_TYPE (see there why)."""
    client.meta.events.register(
        "before-sign.s3.UploadPart", _typed_as_bytes, unique_id="dsymfind-typed-part"
    )


def _typed_as_bytes(request: Any, **_: Any) -> None:
    request.headers["Content-Type"] = CONTENT_TYPE


def _threshold(env: Mapping[str, str]) -> int:
    text = env.get(MULTIPART_THRESHOLD_ENV)
    if not text:
        return MULTIPART_THRESHOLD
    try:
        value = int(text)
    except ValueError:
        raise PublishError(f"{MULTIPART_THRESHOLD_ENV}: expected bytes, got {text!r}") from None
    return max(1, value)


def target_for(url: str, options: S3Options, env: Mapping[str, str] = os.environ) -> S3Writer:
    s3_api.parse_location(url)  # a bad URL is named before a client is made
    target = S3Writer(url, make_client(options), env)
    target.probe()
    return target
