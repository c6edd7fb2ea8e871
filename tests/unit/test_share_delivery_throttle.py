"""Throttled redelivery of share-group records (Kafka 4.4's SharePartition, KAFKA-17541)."""

from __future__ import annotations

from kpybroker.share_partitions.delivery_throttle import throttle_deliveries, throttled_ranges
from kpybroker.share_partitions.share_partition import (
    AckType,
    Acquired,
    LogBatch,
    SharePartition,
)

RELEASE = AckType.RELEASE


def test_the_threshold_is_half_the_limit_rounded_up_and_at_least_two() -> None:
    assert [throttle_deliveries(limit) for limit in (2, 3, 5, 6, 10)] == [2, 2, 3, 3, 5]


def test_each_delivery_past_the_threshold_halves_what_is_taken() -> None:
    # Kafka's own example: limit 6 (threshold 3), a batch of 500 records.
    assert throttled_ranges([(0, 499, True, 3)], 500, 6) == [(0, 249)]
    assert throttled_ranges([(0, 499, True, 4)], 500, 6) == [(0, 124)]
    # Records delivered fewer times before the first throttled one count toward the cap.
    assert throttled_ranges([(0, 99, True, 1), (100, 499, True, 3)], 500, 6) == [
        (0, 99),
        (100, 249),
    ]
    # Unavailable records are passed over; the record limit still applies.
    assert throttled_ranges([(0, 9, False, 3), (10, 499, True, 3)], 500, 6) == [(10, 259)]
    assert throttled_ranges([(0, 499, True, 3)], 500, 6, record_limit=7) == [(0, 6)]


def test_a_record_on_its_last_attempt_goes_out_alone() -> None:
    assert throttled_ranges([(0, 9, True, 4)], 10, 5) == [(0, 0)]
    # Three deliveries set the cap at half the batch, reached before the last attempt.
    assert throttled_ranges([(0, 4, True, 3), (5, 9, True, 4)], 10, 5) == [(0, 4)]
    assert throttled_ranges([(0, 1, True, 3), (2, 9, True, 4)], 10, 5) == [(0, 1)]
    assert throttled_ranges([(0, 1, True, 1), (2, 9, True, 4)], 10, 5) == [(0, 1)]
    # With a limit of 2 there is no last attempt to isolate: the cap alone applies.
    assert throttled_ranges([(0, 9, True, 2)], 10, 2) == [(0, 4)]


def released(sp: SharePartition, times: int, batches: list[LogBatch]) -> None:
    for _ in range(times):
        _, acquired, _ = sp.acquire("a", batches, 500)
        for a in acquired:
            sp.acknowledge("a", a.first_offset, a.last_offset, [RELEASE])


def test_a_partition_isolates_records_delivered_many_times() -> None:
    sp = SharePartition(0, delivery_count_limit=5, max_in_flight=1000)
    batches = [LogBatch(0, 99, 0, 0), LogBatch(100, 199, 0, 0)]
    released(sp, 3, batches)  # 0..199 delivered three times, the threshold of limit 5
    _, acquired, carried = sp.acquire("a", batches, 500)
    assert acquired == [Acquired(0, 99, 4)]  # 200 >> 1
    assert carried == batches[:1]
    # The next fetch starts at 100, still at three deliveries: half the batch again.
    _, acquired, _ = sp.acquire("b", batches, 500)
    assert acquired == [Acquired(100, 199, 4)]
    # 0..99 released on its fourth delivery: the last attempt goes out record by record.
    sp.acknowledge("a", 0, 99, [RELEASE])
    assert sp.acquire("a", batches, 500)[1] == [Acquired(0, 0, 5)]
    assert sp.acquire("a", batches, 500)[1] == [Acquired(1, 1, 5)]


def test_a_fetch_stops_before_a_throttled_batch_once_it_took_something() -> None:
    sp = SharePartition(0, delivery_count_limit=5, max_in_flight=1000)
    first, second, new = LogBatch(0, 9, 0, 0), LogBatch(10, 19, 0, 0), LogBatch(20, 29, 0, 0)
    sp.acquire("a", [first], 500)
    released(sp, 3, [second])  # 10..19: three deliveries
    sp.acknowledge("a", 0, 9, [RELEASE])  # 0..9: one
    # 0..9 is taken whole; the fetch stops at 10..19, and takes nothing new past it.
    _, acquired, carried = sp.acquire("b", [first, second, new], 500)
    assert (acquired, carried) == ([Acquired(0, 9, 2)], [first])
    assert sp.end_offset == 20
    # The next fetch reaches 10..19 first: half of it, then nothing more.
    _, acquired, carried = sp.acquire("b", [second, new], 500)
    assert (acquired, carried) == ([Acquired(10, 14, 4)], [second])
    assert sp.end_offset == 20
