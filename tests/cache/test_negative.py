"""The negative cache on disk: `gc` sweeps what nobody reads (an earlier version's markers,
expired ones) and keeps what another configuration may still read; `check` finds a dead
writer's temporary file in a fingerprint's folder; nothing secret reaches the cache."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support import symbol_server as ss
from support.fixtures import GREET_UUID, HELLO_UUID, write_config
from support.negative import negative_marker, negative_markers, remember_absent
from support.processes import run_cli, run_helper
from support.served import url_path

from dsymfind import config_reader, settings
from dsymfind.uuids import uuid_hex

HEX = uuid_hex(HELLO_UUID)
# Older than the default negative_cache_ttl (3600 s).
EXPIRED = time.time() - 7200


def age(path: Path) -> Path:
    os.utime(path, (EXPIRED, EXPIRED))
    return path


def test_gc_sweeps_earlier_and_expired_entries_and_keeps_other_settings_fresh_ones(
    native_server: ss.SymbolServer, cache_dir: Path
) -> None:
    fresh = remember_absent(cache_dir, HELLO_UUID)
    expired = age(remember_absent(cache_dir, GREET_UUID))
    # Another configuration's: a helper with other settings may still read the fresh one.
    others, stale_folder = cache_dir / "negative" / ("0" * 16), cache_dir / "negative" / ("1" * 16)
    for folder in (others, stale_folder):
        folder.mkdir()
        (folder / HEX).touch()
    age(stale_folder / HEX)
    earlier = cache_dir / "negative" / HEX  # before fingerprints
    earlier.touch()
    earlier_pdb = cache_dir / "negative" / ("pdb-" + "a" * 16)
    earlier_pdb.touch()
    foreign = cache_dir / "negative" / "notes.txt"  # not ours: left alone
    foreign.touch()

    dry = run_cli("gc", "--dry-run")
    assert "would remove 4 negative-cache entries" in dry.stdout, dry.stdout
    assert len(negative_markers(cache_dir)) == 7

    done = run_cli("gc")

    assert done.returncode == 0, done.stderr
    assert "removed 4 negative-cache entries: expired, or of an earlier version" in done.stdout
    assert negative_markers(cache_dir) == sorted([fresh, others / HEX, foreign])
    assert not expired.exists() and not stale_folder.exists()
    assert run_helper(HELLO_UUID).plist == {}  # still remembered: no request
    assert native_server.count(url_path(HELLO_UUID)) == 0


def test_check_finds_a_dead_writers_temporary_marker(cache_dir: Path) -> None:
    marker = remember_absent(cache_dir, HELLO_UUID)
    debris = marker.with_name(f"{HEX}.99999999.tmp")
    debris.write_bytes(b'{"format": 1, "not_f')

    done = run_cli("check", "--repair")

    assert done.returncode == 0, done.stdout + done.stderr
    repaired = [line for line in done.stdout.splitlines() if line.startswith("repaired leftover")]
    assert len(repaired) == 1 and str(debris) in repaired[0], done.stdout
    assert not debris.exists() and marker.exists()


SECRET_TOKEN = "tok-3a9f-not-for-disk"
SECRET_PASSWORD = "pw-77c1-not-for-disk"


def test_nothing_secret_reaches_the_cache(config_file: Path, cache_dir: Path) -> None:
    with ss.SymbolServer() as server:
        host = server.url.removeprefix("http://")
        write_config(
            config_file,
            f"timeout = 10\n[[servers]]\nurl = 'http://me:{SECRET_PASSWORD}@{host}/'\n"
            f"layout = 'native'\nheaders = {{Authorization = 'Bearer {SECRET_TOKEN}'}}\n",
        )
        assert run_helper(HELLO_UUID).plist == {}
    assert negative_marker(cache_dir, HELLO_UUID).exists()
    for path in cache_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET_TOKEN.encode() not in data, path
            assert SECRET_PASSWORD.encode() not in data, path


def fingerprint(config: str, tmp_path: Path) -> str:
    """The fingerprint of the store settings `config` makes, as the snapshot carries it."""
    config_file = tmp_path / "config.toml"
    config_file.write_text(config)
    return config_reader.read_settings(os.environ, str(config_file))["stores_fingerprint"]


BASE = "[[servers]]\nurl = 'https://a.example/'\nlayout = 'native'\n"
SECOND = "[[servers]]\nname = 'b'\nurl = 's3://bucket/ios/'\n"


def test_what_the_fingerprint_of_the_store_settings_counts(tmp_path: Path) -> None:
    base = fingerprint(BASE + SECOND, tmp_path)
    changed = {
        "a server more": BASE + SECOND + "[[servers]]\nurl = 'https://c.example/'\n"
        "layout = 'ssqp'\n",
        "a server less": BASE,
        "its URL": BASE.replace("a.example/", "a.example/symbols/") + SECOND,
        "its layout": BASE.replace("native", "ssqp") + SECOND,
        "its casing": BASE + "casing = 'lowercase'\n" + SECOND,
        "a header": BASE + "headers = {'X-Token' = '${TOKEN}'}\n" + SECOND,
        "the variable a header names": BASE.replace(
            "native'\n", "native'\nheaders = {'X-Token' = '${OTHER}'}\n"
        )
        + SECOND,
        "an S3 profile": BASE + SECOND + "profile = 'ci'\n",
        "an S3 endpoint": BASE + SECOND + "endpoint_url = 'http://127.0.0.1:9000'\n",
    }
    for what, config in changed.items():
        assert fingerprint(config, tmp_path) != base, what
    unchanged = {
        "the order": SECOND + BASE,
        "a name": BASE.replace("[[servers]]\n", "[[servers]]\nname = 'x'\n", 1) + SECOND,
    }
    for what, config in unchanged.items():
        assert fingerprint(config, tmp_path) == base, what
    with_token = BASE + "headers = {'X-Token' = 'Bearer ${TOKEN}'}\n"
    # A header's literal text may be a secret: only the names count.
    assert fingerprint(with_token, tmp_path) == fingerprint(
        with_token.replace("Bearer", "Token"), tmp_path
    )


def test_a_debuginfod_servers_fingerprint_follows_the_servers_its_variable_lists(
    config_file: Path,
) -> None:
    write_config(config_file, "[[servers]]\nurl = 'debuginfod:'\n")
    one = dict(os.environ, DEBUGINFOD_URLS="https://a.example/")
    other = dict(os.environ, DEBUGINFOD_URLS="https://b.example/")
    first = settings.load(one)["stores_fingerprint"]
    assert settings.load(other)["stores_fingerprint"] != first  # the snapshot is made again
    assert settings.load(one)["stores_fingerprint"] == first
