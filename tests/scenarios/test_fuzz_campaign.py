"""scripts/fuzz in its shortest form, so the campaign cannot rot; and the checks it relies on."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsymfind.apple import macho, plists

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
from fuzzing import campaign, targets

FUZZ = Path(__file__).parents[2] / "scripts" / "fuzz"
HELLO = (targets.MACHO_FIXTURES / "hello").read_bytes()
# A few seconds per target on an idle machine (fewer inputs than the 2 s it used to run).
CAMPAIGN_RUNS = 1000


@pytest.mark.long
@pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None,
    reason="atheris is not installed (scripts/fuzz installs it from a wheel on first use)",
)
def test_short_campaign_over_every_reader(tmp_path: Path) -> None:
    """Bounded by inputs, not seconds: a loaded machine makes the campaign slower, never
    shorter, and the only time limit left is the campaign's guard against a wedged target."""
    done = subprocess.run(
        [str(FUZZ), "--runs", str(CAMPAIGN_RUNS), "--crash-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=len(campaign.SEEDS) * campaign.RUNS_GUARD_SECONDS + 60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in campaign.SEEDS:
        (line,) = (line for line in done.stdout.splitlines() if line.startswith(f"{name}: "))
        assert line.startswith(f"{name}: ok, {CAMPAIGN_RUNS} inputs"), line
    assert not any(tmp_path.rglob("crash-*"))


def test_unknown_target_is_refused() -> None:
    done = subprocess.run([str(FUZZ), "nosuch"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_a_foreign_exception_escapes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: bytes) -> list[macho.Slice]:
        raise IndexError("crafted")

    monkeypatch.setattr(macho, "read_slices_from_bytes", broken)
    with pytest.raises(IndexError):
        targets.check_macho(HELLO)


def test_a_slow_call_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(macho, "read_slices_from_bytes", lambda data: time.sleep(0.15))
    with pytest.raises(targets.Violation, match="ms, more than 100"):
        targets.check_macho(HELLO)


def test_a_huge_allocation_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    def hoarding(data: bytes) -> list[macho.Slice]:
        hoard = bytearray(targets.MAX_PEAK_BYTES + 1)
        raise macho.MachOError(f"<memory>: kept {len(hoard)} bytes")

    monkeypatch.setattr(macho, "read_slices_from_bytes", hoarding)
    with pytest.raises(targets.Violation, match="allocated"):
        targets.check_macho(HELLO)


def test_a_wrong_answer_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    real = macho.read_slices_from_bytes(HELLO)[0]
    outside = macho.Slice(real.uuid, real.arch, real.cputype, real.cpusubtype, real.filetype,
                          real.filetype_name, 0, len(HELLO) + 1)  # fmt: skip
    monkeypatch.setattr(macho, "read_slices_from_bytes", lambda data: [outside])
    with pytest.raises(targets.Violation, match="outside the file"):
        targets.check_macho(HELLO)


def test_the_readers_own_error_passes() -> None:
    assert targets.check_macho(b"\xca\xfe\xba\xbe" + bytes(4)) is None


def test_the_plist_reader_may_only_refuse_with_its_own_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def leaky(data: bytes) -> object:
        raise AttributeError("'NoneType' object has no attribute 'groupdict'")

    monkeypatch.setattr(plists, "loads", leaky)
    with pytest.raises(AttributeError):
        targets.check_plist_reader(b"<plist><date>x</date></plist>")


def test_a_value_plistlib_cannot_write_back_fails_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plists, "loads", lambda data: {"k": 1 << 64})
    with pytest.raises(OverflowError):
        targets.check_plist_reader(b"<plist><dict/></plist>")


def test_the_plist_readers_own_refusal_passes() -> None:
    assert targets.check_plist_reader(b"<plist><date>x</date></plist>") is None
    assert targets.check_plist_reader(targets.plist_from_words(b"\x07\x0d")) is None  # 2024Z
