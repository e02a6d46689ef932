"""symbolicate/workers.py on its own: shares, the two rounds, order, and lost inputs."""

from __future__ import annotations

import os
import sys

import pytest

from dsymfind.symbolicate import workers


def test_shares_are_contiguous_cover_every_index_once_and_differ_by_one_at_most():
    for total in (0, 1, 99, 100, 101, 1000):
        for count in (1, 2, 3, 7):
            shares = workers.shares(total, count)
            assert [i for share in shares for i in share] == list(range(total))
            assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_a_short_batch_gets_no_workers():
    assert workers.count(workers.MIN_REPORTS - 1) == 0


class Doubler:
    """Keeps what its first round read for its second, as a batch keeps its reports."""

    def __init__(self) -> None:
        self.kept: dict[int, int] = {}

    def first(self, item: int) -> int:
        print(f"read {item}", file=sys.stderr)
        self.kept[item] = item * 2
        return os.getpid()

    def second(self, item: int, settled: int) -> int:
        print(f"wrote {item}", file=sys.stderr)
        return self.kept[item] + settled


def test_both_rounds_come_back_in_input_order_with_what_each_input_said():
    items = list(range(50))
    doubler = Doubler()
    with workers.Pool(items, doubler.first, doubler.second, 3) as pool:
        first = list(pool.first())
        pool.settle(1000)
        second = list(pool.second())
    assert [(i, said) for i, said, _ in first] == [(i, f"read {i}\n") for i in items]
    assert len({pid for _, _, pid in first}) == 3 and os.getpid() not in {p for *_, p in first}
    assert second == [(i, f"wrote {i}\n", 2 * i + 1000) for i in items]
    assert doubler.kept == {}  # the parent read nothing itself


def test_a_dead_worker_loses_its_unsent_inputs_and_only_those():
    parent = os.getpid()

    def first(item: int) -> int:
        if item == 30 and os.getpid() != parent:
            os._exit(7)
        return item

    with workers.Pool(list(range(40)), first, lambda item, settled: item, 2) as pool:
        results = [result for _, _, result in pool.first()]
        pool.settle(None)
        again = [result for _, _, result in pool.second()]
    assert results[:30] == list(range(30))
    assert results[30:] == [workers.Lost("exit status 7")] * 10
    assert again[:20] == list(range(20))
    assert again[20:] == [workers.Lost("exit status 7")] * 20


def test_leaving_early_stops_the_workers(tmp_path):
    """A parent that stops reading (an interrupt) closes the pipes; no worker lingers."""
    pids = []
    with workers.Pool(list(range(100)), lambda item: os.getpid(), lambda i, s: i, 2) as pool:
        for _, _, pid in pool.first():
            pids.append(pid)
            break
    for pid in set(pids):
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_what_a_worker_sends_again_arrives_as_what_it_sent_before():
    """One Pickler a worker, one Unpickler for it in the parent: an object sent before is
    sent again as a reference, and the parent has it once."""
    shared = ("an image", "its UUID", 0x1000)

    with workers.Pool(list(range(10)), lambda item: shared, lambda i, s: [i, shared], 2) as pool:
        first = [result for _, _, result in pool.first()]
        pool.settle(None)
        second = [result for _, _, result in pool.second()]
    assert first == [shared] * 10
    assert all(result is first[0] for result in first[:5] + [r[1] for r in second[:5]])
    assert all(result is first[5] for result in first[5:] + [r[1] for r in second[5:]])
    assert first[0] is not first[5]  # each worker's own
    assert [r[0] for r in second] == list(range(10))
