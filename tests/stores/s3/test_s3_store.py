"""Object storage as a source, end to end: dSYMs put in a real SeaweedFS on 127.0.0.1 with
the `ci` keys, fetched by the real helper and its detached downloader with the `reader`'s."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from support import symbol_server as ss
from support.fixtures import HELLO_UUID, LAYOUT_PATHS, link_of, write_config
from support.negative import negative_marker, negative_markers
from support.processes import run_cli, run_helper
from support.seaweed import PUBLIC, SYMBOLS, SeaweedS3
from support.served import HELLO_DWARF, native_tree

from dsymfind import stores
from dsymfind.commands import doctor
from dsymfind.config_reader import read_settings
from dsymfind.errors import ConfigError, DsymfindError
from dsymfind.stores import base as sources
from dsymfind.stores import transfer
from dsymfind.stores.layouts import debug_file_key, executable_key
from dsymfind.stores.s3 import api as s3
from dsymfind.stores.s3 import presign as s3_presign
from dsymfind.uuids import uuid_hex

HEX = uuid_hex(HELLO_UUID)
SERVER = "team"
PROFILE = "symbols-read"


@pytest.fixture
def engine(s3: SeaweedS3) -> SeaweedS3:
    """The run's S3 engine (tests/conftest.py), named apart from the stores.s3 module."""
    return s3


@pytest.fixture
def prefix() -> str:
    """A prefix of this test's own: the module shares one engine and the tests one UUID."""
    return f"t{uuid.uuid4().hex[:12]}/"


def put(engine: SeaweedS3, key: str, body: bytes, *, bucket: str = SYMBOLS, **meta: str) -> None:
    who = "ci" if bucket == SYMBOLS else "admin"
    engine.client(who).put_object(Bucket=bucket, Key=key, Body=body, Metadata=meta)


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without the machine's AWS settings; never the instance
    metadata service (169.254.169.254): only loopback addresses are contacted."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.update(extra)
    return env


def keys_env(engine: SeaweedS3, who: str = "reader") -> dict[str, str]:
    identity = engine.identities[who]
    return clean_env(
        AWS_ACCESS_KEY_ID=identity.access_key, AWS_SECRET_ACCESS_KEY=identity.secret_key
    )


def write_profile(home: Path, access_key: str, secret_key: str) -> None:
    """The reader's keys as a profile in the shared credentials file under HOME."""
    folder = home / ".aws"
    folder.mkdir(exist_ok=True)
    (folder / "credentials").write_text(
        f"[{PROFILE}]\naws_access_key_id = {access_key}\naws_secret_access_key = {secret_key}\n"
    )


def configure(
    config_file: Path,
    engine: SeaweedS3,
    url: str,
    *,
    layout: str | None = None,
    profile: bool = False,
    anonymous: bool = False,
) -> None:
    lines = [
        "timeout = 30",
        "[[servers]]",
        f"name = '{SERVER}'",
        f"url = '{url}'",
        f"endpoint_url = '{engine.endpoint_url}'",
        "region = 'us-east-1'",
    ]
    if layout is not None:
        lines.append(f"layout = '{layout}'")
    if profile:
        lines.append(f"profile = '{PROFILE}'")
    if anonymous:
        lines.append("anonymous = true")
    write_config(config_file, "\n".join(lines) + "\n")


def assert_fetched(entry: dict[str, str], cache_dir: Path) -> None:
    path = Path(entry["DBGDSYMPath"])
    assert path.read_bytes() == HELLO_DWARF
    assert path.is_relative_to(cache_dir / "dsyms")
    assert link_of(cache_dir, HELLO_UUID).resolve() == path.resolve()


# -- the helper, end to end --------------------------------------------------------------


def test_unified_by_default_with_a_profile(
    engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path, isolated_home: Path
) -> None:
    key = prefix + LAYOUT_PATHS["unified"]
    put(engine, key, HELLO_DWARF, sha256=sha256(HELLO_DWARF))
    reader = engine.identities["reader"]
    write_profile(isolated_home, reader.access_key, reader.secret_key)
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}", profile=True)  # no layout

    assert_fetched(run_helper(HELLO_UUID, env=clean_env()).entry(HELLO_UUID), cache_dir)


@pytest.mark.parametrize(("layout", "casing"), [("debuginfod", None), ("native", "lowercase")])
def test_other_layouts_with_keys_in_the_environment(
    engine: SeaweedS3,
    prefix: str,
    config_file: Path,
    cache_dir: Path,
    layout: str,
    casing: str | None,
) -> None:
    relative = LAYOUT_PATHS[layout]
    put(engine, prefix + (relative.lower() if casing else relative), HELLO_DWARF)
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}", layout=layout)
    if casing:
        with config_file.open("a") as out:
            out.write(f"casing = '{casing}'\n")

    assert_fetched(run_helper(HELLO_UUID, env=keys_env(engine)).entry(HELLO_UUID), cache_dir)


@pytest.mark.parametrize("wrong", ["secret", "access key"])
def test_refused_keys_answer_an_error_and_are_not_remembered(
    engine: SeaweedS3,
    prefix: str,
    config_file: Path,
    cache_dir: Path,
    isolated_home: Path,
    wrong: str,
) -> None:
    put(engine, prefix + LAYOUT_PATHS["unified"], HELLO_DWARF, sha256=sha256(HELLO_DWARF))
    reader = engine.identities["reader"]
    if wrong == "secret":
        write_profile(isolated_home, reader.access_key, "x" * 40)
    else:
        write_profile(isolated_home, "AKIANOBODY0000000000", reader.secret_key)
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}", profile=True)

    began = time.monotonic()
    error = run_helper(HELLO_UUID, env=clean_env()).entry(HELLO_UUID)["DBGError"]
    assert time.monotonic() - began < 15
    assert SERVER in error and "credentials" in error, error
    assert ("SignatureDoesNotMatch" if wrong == "secret" else "InvalidAccessKeyId") in error
    assert negative_markers(cache_dir) == []
    assert not list((cache_dir / "failing-servers").glob("*"))

    # Fixed credentials work at once: nothing remembered the refusal.
    write_profile(isolated_home, reader.access_key, reader.secret_key)
    assert_fetched(run_helper(HELLO_UUID, env=clean_env()).entry(HELLO_UUID), cache_dir)


def test_an_identity_without_a_grant_is_refused(
    engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path
) -> None:
    """The reader may not read `public`: AccessDenied, an error, and no negative entry."""
    put(engine, prefix + LAYOUT_PATHS["unified"], HELLO_DWARF, bucket=PUBLIC)
    configure(config_file, engine, f"s3://{PUBLIC}/{prefix}")

    error = run_helper(HELLO_UUID, env=keys_env(engine)).entry(HELLO_UUID)["DBGError"]
    assert "AccessDenied" in error and "credentials" in error, error
    assert negative_markers(cache_dir) == []


def test_anonymous_reads_a_public_bucket(
    engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path
) -> None:
    put(engine, prefix + LAYOUT_PATHS["unified"], HELLO_DWARF, bucket=PUBLIC)
    configure(config_file, engine, f"s3://{PUBLIC}/{prefix}", anonymous=True)

    assert_fetched(run_helper(HELLO_UUID, env=clean_env()).entry(HELLO_UUID), cache_dir)


def test_a_sha256_mismatch_is_refused(
    engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path
) -> None:
    put(engine, prefix + LAYOUT_PATHS["unified"], HELLO_DWARF, sha256=sha256(b"another file"))
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}")

    error = run_helper(HELLO_UUID, env=keys_env(engine)).entry(HELLO_UUID)["DBGError"]
    assert "sha256 mismatch" in error, error
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))
    assert not (cache_dir / "dsyms" / HEX).exists()
    assert negative_markers(cache_dir) == []


def test_a_missing_key_is_not_found_and_remembered(
    engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path
) -> None:
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}")

    assert run_helper(HELLO_UUID, env=keys_env(engine)).plist == {}
    assert negative_marker(cache_dir, HELLO_UUID).exists()


def test_dsymfind_fetch(engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path) -> None:
    put(engine, prefix + LAYOUT_PATHS["unified"], HELLO_DWARF, sha256=sha256(HELLO_DWARF))
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}")

    done = run_cli("fetch", HELLO_UUID, env=keys_env(engine))
    assert done.returncode == 0, done.stderr
    assert "found" in done.stdout
    assert link_of(cache_dir, HELLO_UUID).resolve().read_bytes() == HELLO_DWARF


def test_dsymfind_fetch_says_why_a_mismatch_failed(
    engine: SeaweedS3, prefix: str, config_file: Path, cache_dir: Path
) -> None:
    put(engine, prefix + LAYOUT_PATHS["unified"], HELLO_DWARF, sha256="0" * 64)
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}")

    done = run_cli("fetch", HELLO_UUID, env=keys_env(engine))
    assert done.returncode == 1
    assert "sha256 mismatch" in done.stdout + done.stderr
    assert not os.path.lexists(link_of(cache_dir, HELLO_UUID))


# -- configuration -----------------------------------------------------------------------


def settings_of(config_file: Path, text: str) -> list[dict[str, object]]:
    write_config(config_file, text)
    servers = read_settings({}, str(config_file))["servers"]
    return [dict(server) for server in servers]


def test_s3_keys_are_read_with_defaults(config_file: Path) -> None:
    (server,) = settings_of(
        config_file,
        "[[servers]]\nurl = 's3://symbols/ios/'\nendpoint_url = 'http://127.0.0.1:8333'\n"
        "region = 'us-east-1'\nprofile = 'symbols-read'\ncasing = 'uppercase'\n",
    )
    assert server["layout"] == "unified"
    assert server["casing"] == "upper"
    assert server["name"] == "symbols"
    assert server["kind"] == "s3"
    assert server["settings"] == {
        "endpoint_url": "http://127.0.0.1:8333",
        "region": "us-east-1",
        "profile": "symbols-read",
        "anonymous": False,
    }
    (http,) = settings_of(
        config_file, "[[servers]]\nurl = 'https://a.example/'\nlayout = 'native'\n"
    )
    assert (http["kind"], http["settings"]) == ("https", {})


@pytest.mark.parametrize(
    ("server", "named"),
    [
        ("url = 'https://a.example/'\nlayout = 'native'\nregion = 'us-east-1'", "region"),
        ("url = '/srv/symbols'\nlayout = 'native'\nanonymous = true", "anonymous"),
        ("url = 'https://a.example/'\nprofile = 'p'", "layout"),
        ("url = 's3://symbols/'\nendpoint_url = 'ftp://127.0.0.1/'", "endpoint_url"),
        ("url = 's3://symbols/'\nendpoint_url = 'http://k:s@127.0.0.1/'", "endpoint_url"),
        ("url = 's3://symbols/'\nregion = 'us east'", "region"),
        ("url = 's3://symbols/'\nprofile = '[x]'", "profile"),
        ("url = 's3://symbols/'\nanonymous = 'yes'", "anonymous"),
        ("url = 's3://symbols/'\nanonymous = true\nprofile = 'p'", "profile"),
        ("url = 's3://symbols/'\ncasing = 'camel'", "casing"),
        ("url = 's3://symbols/'\nbucket = 'x'", "unknown key 'bucket'"),
        ("url = 's3://x/'", "url"),
        ("url = 's3://key:secret@symbols/'", "url"),
        ("url = 's3://symbols/a/../b/'", "url"),
    ],
)
def test_bad_s3_settings_are_named(config_file: Path, server: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_of(config_file, f"[[servers]]\n{server}\n")
    message = str(caught.value)
    assert message.startswith(str(config_file)), message
    assert named in message, message
    assert "\n" not in message


# -- the pieces --------------------------------------------------------------------------


def test_locations() -> None:
    assert s3.parse_location("s3://symbols/ios/") == ("symbols", "ios/")
    assert s3.parse_location("s3://symbols/ios/x") == ("symbols", "ios/x/")
    assert s3.parse_location("s3://symbols") == ("symbols", "")
    for bad in ("s3://", "https://symbols/", "s3://Sym/", "s3://symbols//x/", "s3://s:1/"):
        with pytest.raises(DsymfindError):
            s3.parse_location(bad)


def test_debuginfod_keys() -> None:
    lower = HEX.lower()
    assert debug_file_key("debuginfod", HELLO_UUID) == f"buildid/{lower}/debuginfo"
    assert executable_key("debuginfod", HELLO_UUID, None) == f"buildid/{lower}/executable"


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
    )


@pytest.mark.parametrize(
    ("code", "status", "kind", "retryable"),
    [
        ("NoSuchKey", 404, sources.NotFound, False),
        ("404", 404, sources.NotFound, False),
        ("AccessDenied", 403, sources.AuthFailed, False),
        ("SignatureDoesNotMatch", 403, sources.AuthFailed, False),
        ("ExpiredToken", 400, sources.AuthFailed, False),
        ("SlowDown", 503, sources.TransferError, True),
        ("InternalError", 500, sources.TransferError, True),
        ("InvalidArgument", 400, sources.TransferError, False),
    ],
)
def test_classify(code: str, status: int, kind: type, retryable: bool) -> None:
    error = s3.classify(client_error(code, status), "s3://symbols/k")
    assert type(error) is kind
    assert error.retryable is retryable
    assert code in str(error)
    if kind is sources.AuthFailed:
        assert "credentials" in str(error)


def test_classify_botocore_errors() -> None:
    from botocore.exceptions import (
        ConnectTimeoutError,
        NoCredentialsError,
        ProfileNotFound,
    )

    assert isinstance(s3.classify(NoCredentialsError(), "x"), sources.AuthFailed)
    assert isinstance(s3.classify(ProfileNotFound(profile="p"), "x"), sources.AuthFailed)
    timeout = s3.classify(ConnectTimeoutError(endpoint_url="http://127.0.0.1:9"), "x")
    assert type(timeout) is sources.TransferError and timeout.retryable


def test_doctor_probes_the_bucket(
    engine: SeaweedS3, prefix: str, config_file: Path, isolated_home: Path
) -> None:
    configure(config_file, engine, f"s3://{SYMBOLS}/{prefix}", profile=True)
    reader = engine.identities["reader"]
    write_profile(isolated_home, reader.access_key, reader.secret_key)
    line = next(
        text
        for text in run_cli("doctor", env=clean_env()).stdout.splitlines()
        if f"server {SERVER}" in text
    )
    assert line.startswith("ok") and f"s3://{SYMBOLS}/{prefix}" in line, line

    write_profile(isolated_home, reader.access_key, "x" * 40)
    line = next(
        text
        for text in run_cli("doctor", env=clean_env()).stdout.splitlines()
        if f"server {SERVER}" in text
    )
    assert not line.startswith("ok") and "credentials" in line, line


def server_lines(config_file: Path, engine: SeaweedS3, url: str) -> list[str]:
    """What doctor says of the one server, configured at `url` with the reader's profile."""
    configure(config_file, engine, url, profile=True)
    done = run_cli("doctor", env=clean_env())
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    return [
        line + ("\n" + lines[n + 1] if n + 1 < len(lines) and "fix:" in lines[n + 1] else "")
        for n, line in enumerate(lines)
        if f"server {SERVER}:" in line
    ]


def test_doctor_calls_an_empty_prefix_healthy_and_names_where_symbols_are(
    engine: SeaweedS3, config_file: Path, isolated_home: Path
) -> None:
    """CI publishes under `iOS/`; the developer's config says `ios/`: every lookup answers
    "not found", as an empty store does. The probe's 404 is an answer (ok); the listing
    says what is wrong."""
    run = f"t{uuid.uuid4().hex[:12]}"
    key = debug_file_key("unified", HELLO_UUID)
    put(engine, f"{run}/iOS/{key}", b"CI's build")
    put(engine, f"{run}/iOS/_manifests/20250101T000000Z-00000000.json", b"{}")
    reader = engine.identities["reader"]
    write_profile(isolated_home, reader.access_key, reader.secret_key)

    wrong = server_lines(config_file, engine, f"s3://{SYMBOLS}/{run}/ios/")
    assert wrong[0].startswith(f"ok    server {SERVER}: s3://{SYMBOLS}/{run}/ios/ answered")
    assert wrong[1] == (
        f"warn  server {SERVER}: no symbols under s3://{SYMBOLS}/{run}/ios/; one level up, "
        f"these hold some: s3://{SYMBOLS}/{run}/iOS/\n"
        f"      fix: {doctor.EMPTY_STORE_FIX}"
    )
    # Below the store: the store itself is named (it holds an older publish's manifests).
    below = server_lines(config_file, engine, f"s3://{SYMBOLS}/{run}/iOS/arm64/")
    assert below[1].startswith(
        f"warn  server {SERVER}: no symbols under s3://{SYMBOLS}/{run}/iOS/arm64/; one level "
        f"up, these hold some: s3://{SYMBOLS}/{run}/iOS/\n"
    )
    nowhere = server_lines(config_file, engine, f"s3://{SYMBOLS}/{run}-none/ios/")
    assert nowhere[1].startswith(
        f"warn  server {SERVER}: no symbols under s3://{SYMBOLS}/{run}-none/ios/\n"
    )
    right = server_lines(config_file, engine, f"s3://{SYMBOLS}/{run}/iOS/")
    assert len(right) == 1 and right[0].startswith("ok "), right


# -- endpoints that misbehave: a loopback server speaking just enough S3 -----------------


@pytest.fixture
def endpoint() -> Iterator[ss.SymbolServer]:
    """An S3 endpoint on 127.0.0.1 whose every answer the test sets (its fallback)."""
    with ss.SymbolServer() as running:
        yield running


def configure_endpoint(
    config_file: Path, endpoint: ss.SymbolServer, *, timeout: float, then: str = ""
) -> None:
    write_config(
        config_file,
        f"timeout = 20\ndownload_timeout = {timeout:g}\n"
        f"[[servers]]\nname = '{SERVER}'\nurl = 's3://{SYMBOLS}/'\n"
        f"endpoint_url = '{endpoint.url}'\nregion = 'us-east-1'\nanonymous = true\n{then}",
    )


def test_a_permanent_redirect_without_a_region_fails_that_server_only(
    endpoint: ss.SymbolServer, config_file: Path, cache_dir: Path, tmp_path: Path
) -> None:
    """botocore's region redirector would HEAD the bucket, be redirected again, and so on
    to a RecursionError; the HTTP server beside it has the file."""
    endpoint.fallback = ss.s3_error("PermanentRedirect", 301)
    with ss.SymbolServer(native_tree(tmp_path / "served")) as http:
        http_server = f"[[servers]]\nurl = '{http.url}/'\nlayout = 'native'\n"
        configure_endpoint(config_file, endpoint, timeout=20, then=http_server)

        assert_fetched(run_helper(HELLO_UUID, env=clean_env()).entry(HELLO_UUID), cache_dir)


def test_a_permanent_redirect_is_this_sources_failure(
    endpoint: ss.SymbolServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3_presign, "_signers", {})
    endpoint.fallback = ss.s3_error("PermanentRedirect", 301)
    options = sources.Options(settings={"endpoint_url": endpoint.url, "anonymous": True})
    with transfer.Session() as session:
        store = stores.open_reader(f"s3://{SYMBOLS}/", session, options)
        with pytest.raises(sources.TransferError) as raised:
            store.get(LAYOUT_PATHS["unified"], str(tmp_path / "dest"), sources.Terms())

    assert "the bucket is in another region; set `region`" in str(raised.value)
    assert not isinstance(raised.value, sources.ReaderBug)


def test_a_permanent_redirect_is_a_client_error_not_a_recursion(
    endpoint: ss.SymbolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The region redirector of our botocore clients (publish uses them too) is bounded."""
    endpoint.fallback = ss.s3_error("PermanentRedirect", 301)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = s3.client(endpoint_url=endpoint.url, region="us-east-1", profile=None, anonymous=True)

    with pytest.raises(ClientError) as raised:
        client.get_object(Bucket=SYMBOLS, Key="k")

    assert s3.error_code(raised.value) == ("PermanentRedirect", 301)
    assert len(endpoint.requests) <= 2 * s3.MAX_ATTEMPTS


# A 403 whose error body drips one byte a second: 150-odd seconds to read it whole.
DRIP = 1.0
DEADLINE = 3.0
MARGIN = 10.0


def test_a_dripping_refusal_does_not_hold_a_fetch_past_its_deadline(
    endpoint: ss.SymbolServer, config_file: Path
) -> None:
    endpoint.fallback = ss.s3_error("AccessDenied", 403, drip=DRIP)
    configure_endpoint(config_file, endpoint, timeout=DEADLINE)

    began = time.monotonic()
    done = run_cli("fetch", HELLO_UUID, env=clean_env(), timeout=DEADLINE + MARGIN)

    assert time.monotonic() - began < DEADLINE + MARGIN
    assert done.returncode == 1 and "access denied" in done.stdout, done.stdout


def test_doctor_probes_a_dripping_endpoint_within_its_budget(
    endpoint: ss.SymbolServer, config_file: Path
) -> None:
    endpoint.fallback = ss.s3_error("AccessDenied", 403, drip=DRIP)
    configure_endpoint(config_file, endpoint, timeout=600)

    done = run_cli("doctor", env=clean_env(), timeout=doctor.PROBE_TIMEOUT + MARGIN)

    line = next(text for text in done.stdout.splitlines() if f"server {SERVER}" in text)
    assert line.startswith("FAIL") and "access denied" in line, line
