"""The heap is frozen as partitions are added, and thawed and collected as they go away."""

from __future__ import annotations

import gc
import weakref

import pytest

from kpybroker.server.heap_freezer import HeapFreezer


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def thawed():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_growth_freezes_the_heap_and_a_steady_count_leaves_it() -> None:
    heap = HeapFreezer()
    heap.settle(10)
    frozen = gc.get_freeze_count()
    assert frozen > 0
    kept = [Cycle() for _ in range(100)]
    heap.settle(10)
    assert gc.get_freeze_count() == frozen
    heap.settle(11)
    assert gc.get_freeze_count() >= frozen + len(kept)


def test_cycles_of_what_went_away_are_collected_and_the_heap_frozen_again() -> None:
    heap = HeapFreezer()
    gone = Cycle()
    alive = weakref.ref(gone)
    heap.settle(10)
    del gone  # a frozen cycle: reference counting alone cannot free it
    gc.collect()
    assert alive() is not None
    heap.settle(9)
    assert gc.get_freeze_count() == 0
    heap.settle(9)
    assert gc.get_freeze_count() > 0
    assert alive() is None
