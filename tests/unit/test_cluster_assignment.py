"""Replica assignment across brokers and racks (Kafka's AdminUtils)."""

import random
from collections import Counter

import pytest

from kpybroker.cluster.assignment import assign_replicas


@pytest.mark.parametrize("seed", range(5))
def test_rack_unaware_spreads_leaders_and_replicas_evenly(seed: int) -> None:
    brokers = dict.fromkeys(range(5))
    plan = assign_replicas(brokers, 10, 3, rng=random.Random(seed))
    assert sorted(plan) == list(range(10))
    assert all(len(set(r)) == 3 for r in plan.values())
    assert Counter(r[0] for r in plan.values()) == dict.fromkeys(range(5), 2)
    assert set(Counter(b for r in plan.values() for b in r).values()) == {6}


def test_kafkas_layout_with_a_fixed_start() -> None:
    class Fixed(random.Random):
        def randrange(self, n: int) -> int:  # type: ignore[override]
            return 0

    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, factor 3, start 0.
    plan = assign_replicas(dict.fromkeys(range(5)), 10, 3, rng=Fixed())
    assert plan == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
def test_rack_aware_puts_each_partition_on_as_many_racks_as_it_can(seed: int) -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    plan = assign_replicas(racks, 12, 3, rng=random.Random(seed))
    for replicas in plan.values():
        assert len({racks[b] for b in replicas}) == 3
    assert Counter(r[0] for r in plan.values()) == dict.fromkeys(range(6), 2)
    two = assign_replicas(racks, 6, 2, first_partition=12, rng=random.Random(seed))
    assert sorted(two) == list(range(12, 18))
    assert all(len({racks[b] for b in r}) == 2 for r in two.values())


def test_more_replicas_than_racks_still_uses_every_rack() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: None}  # no rack counts as a rack of its own
    for replicas in assign_replicas(racks, 8, 3, rng=random.Random(1)).values():
        assert len(set(replicas)) == 3
        assert len({racks[b] for b in replicas}) == 3


def test_one_broker() -> None:
    assert assign_replicas({7: None}, 3, 1) == {0: [7], 1: [7], 2: [7]}
