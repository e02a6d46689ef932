"""`check` and `index` while `gc` evicts.

check lists the entries first and claims each one's lock later, so an entry may be gone
by then: gone is not invalid, and check neither reports nor "repairs" it, and exits 0.
index must not relink an entry gc is removing (its names gone, its files going after the
grace second), and gc must unlink the links made after it listed the tree: either would
leave a link to nothing."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import GREET_UUID, HELLO_UUID, UNIVERSAL_UUIDS, zip_bundles
from support.processes import BIN, run_cli, run_helper

from dsymfind.cache import check, gc
from dsymfind.cache.removal import Removal
from dsymfind.main import main
from dsymfind.paths import CachePaths
from dsymfind.uuids import uuid_hex

BUNDLES = ("hello.dSYM", "libgreet.dylib.dSYM", "universal.dSYM")
UUIDS = (HELLO_UUID, GREET_UUID, UNIVERSAL_UUIDS["x86_64"])
RACE_ROUNDS = 6
# How much later into gc's run each round starts check (its grace is 1 s).
STAGGER = 0.25
RUN_LIMIT = 120


@pytest.fixture
def zipped(products: Path, tmp_path: Path) -> Path:
    return zip_bundles(tmp_path / "dSYMs.zip", [products / name for name in BUNDLES])


def cache_all(cache_dir: Path, zipped: Path) -> None:
    assert main(["index", str(zipped)]) == 0
    for uuid in UUIDS:
        assert (cache_dir / "dsyms" / uuid_hex(uuid)).is_dir()


def gc_first(monkeypatch: pytest.MonkeyPatch, cache_dir: Path, victim: Path) -> list[str]:
    """Claiming `victim`'s lock runs a whole real gc first (the interleaving a racing gc
    gives: after check listed the entries, before it claimed this one's lock). The entries
    gc removed, for the test to see it did."""
    claim_entry = Removal.claim_entry
    evicted: list[str] = []
    ran: list[bool] = []  # once, and not for gc's own claims

    def evicted_first(self: Removal, entry: str, **kwargs: bool) -> bool:
        if entry == str(victim) and not ran:
            ran.append(True)
            evicted.extend(run_gc_once(cache_dir))
        return claim_entry(self, entry, **kwargs)

    monkeypatch.setattr(Removal, "claim_entry", evicted_first)
    return evicted


@pytest.mark.parametrize("repair", [False, True])
def test_an_entry_evicted_between_listing_and_claim_is_gone_not_invalid(
    zipped: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    repair: bool,
) -> None:
    cache_all(cache_dir, zipped)
    capsys.readouterr()
    victim = cache_dir / "dsyms" / uuid_hex(GREET_UUID)
    evicted = gc_first(monkeypatch, cache_dir, victim)

    status = main(["check", *(["--repair"] if repair else [])])

    out = capsys.readouterr().out
    assert str(victim) in evicted and not victim.exists()  # gc did take it meanwhile
    assert status == 0, out
    assert "invalid" not in out.replace("0 invalid", ""), out
    assert "repaired" not in out, out


def test_the_report_counts_only_the_entries_it_judged(
    zipped: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_all(cache_dir, zipped)
    victim = cache_dir / "dsyms" / uuid_hex(HELLO_UUID)
    evicted = gc_first(monkeypatch, cache_dir, victim)

    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()

    assert str(victim) in evicted
    assert [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID] == []
    # Entries listed after gc ran are gone too: only those judged before it count.
    assert report.entries < len(UUIDS)


def run_gc_once(cache_dir: Path) -> list[str]:
    """A whole real gc evicting everything; the entries it removed."""
    collector = gc.Collector(CachePaths(str(cache_dir)), max_size=0, max_age=1e9, dry_run=False)
    return [entry.path for entry, _ in collector.run().removed]


def test_a_link_unlinked_between_listing_and_reading_is_gone_not_invalid(
    zipped: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_all(cache_dir, zipped)
    evicted: list[str] = []
    escape = check._escape

    def evicted_first(link: str, named: str, root: str) -> str | None:
        if not evicted:  # gc takes the link away right before check reads through it
            evicted.extend(run_gc_once(cache_dir))
        return escape(link, named, root)

    monkeypatch.setattr(check, "_escape", evicted_first)
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()

    assert len(evicted) == len(UUIDS)
    assert [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID] == []


def test_an_answer_whose_dsym_goes_while_it_is_judged_is_stale_not_invalid(
    zipped: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_all(cache_dir, zipped)
    assert "DBGDSYMPath" in run_helper(HELLO_UUID).entry(HELLO_UUID)  # remembered
    evicted: list[str] = []
    recheck = check.answers.check

    def evicted_first(*args: Any, **kwargs: Any) -> Any:
        served = recheck(*args, **kwargs)  # the answer as it stood when check read it
        if not evicted:
            evicted.extend(run_gc_once(cache_dir))
        return served

    monkeypatch.setattr(check.answers, "check", evicted_first)
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()

    assert str(cache_dir / "dsyms" / uuid_hex(HELLO_UUID)) in evicted
    assert [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID] == []


def test_check_and_gc_racing_as_processes_never_find_an_invalid_entry(
    zipped: Path, cache_dir: Path
) -> None:
    for round_ in range(RACE_ROUNDS):
        cache_all(cache_dir, zipped)
        gc_run = subprocess.Popen(
            [str(BIN / "dsymfind"), "gc", "--max-size", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Each round starts check later into gc's run: before its claims, in its grace
        # second, around its deletions.
        time.sleep(round_ * STAGGER)
        checks = [
            subprocess.run(
                [str(BIN / "dsymfind"), "check", *repair],
                capture_output=True,
                text=True,
                timeout=RUN_LIMIT,
                check=False,
            )
            for repair in ([], ["--repair"])
        ]
        _, gc_err = gc_run.communicate(timeout=RUN_LIMIT)
        assert (gc_run.returncode, gc_err) == (0, "")
        for done in checks:
            assert (done.returncode, done.stderr) == (0, ""), done.stdout
            assert "invalid: " not in done.stdout, done.stdout


def test_index_never_relinks_an_entry_being_removed(
    cache_dir: Path, products: Path, tmp_path: Path
) -> None:
    two = zip_bundles(
        tmp_path / "two.zip", [products / "hello.dSYM", products / "libgreet.dylib.dSYM"]
    )
    assert main(["index", str(two)]) == 0
    cache = CachePaths(str(cache_dir))
    hello, greet = (cache_dir / "dsyms" / uuid_hex(u) for u in (HELLO_UUID, GREET_UUID))
    with Removal(cache) as evicted:  # libgreet evicted: the zip is indexed again
        assert evicted.claim_entry(str(greet))
        evicted.take(str(greet))
    with Removal(cache) as removing:  # hello's removal under way: unnamed, in its grace
        assert removing.claim_entry(str(hello))
        removing.take(str(hello))
        done = run_cli("index", str(two))
        assert (done.returncode, done.stderr) == (0, ""), done.stdout
    assert not hello.exists()

    report = check.Checker(cache, stale_after=3600).run()
    assert [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID] == []
    assert (
        f"{HELLO_UUID} from {two}: being downloaded or removed right now; index again"
        in done.stdout
    )
    # The next run admits it again.
    assert main(["index", str(two)]) == 0
    assert run_helper(HELLO_UUID).entry(HELLO_UUID)["DBGDSYMPath"].startswith(str(hello))


def test_gc_unlinks_a_link_made_after_it_listed_the_tree(
    zipped: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listing = gc.tree_links

    def listed_before_the_index(root: str) -> dict[str, str]:
        found = listing(root)  # the tree as gc lists it, empty...
        assert main(["index", str(zipped)]) == 0  # ...and what a download or index then links
        return found

    monkeypatch.setattr(gc, "tree_links", listed_before_the_index)
    evicted = run_gc_once(cache_dir)

    assert len(evicted) == len(UUIDS)
    report = check.Checker(CachePaths(str(cache_dir)), stale_after=3600).run()
    assert [f"{f.path}: {f.reason}" for f in report.findings if f.kind == check.INVALID] == []
    assert report.links == 0
