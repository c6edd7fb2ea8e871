"""Throttled redelivery: records delivered many times go out a few at a time, the last
attempt alone (Kafka 4.4's SharePartition, KAFKA-17541).

A record that keeps coming back (a consumer that fails on it, releases it or lets its
lock run out) would otherwise take its whole batch with it each time, and a batch
reaching ``share.delivery.count.limit`` because of one bad record would be archived
whole. Kafka isolates such records:

- An in-flight batch is *throttled* when one of its available records in the fetch has
  been delivered at least ``max(2, ceil(limit / 2))`` times.
- A fetch that has acquired anything stops before a throttled batch; a fetch that
  reaches one first acquires from it alone, record by record, and stops after it.
- From the first throttled record on, at most ``batch records >> (count - threshold + 1)``
  records are taken: half the batch at the threshold, a quarter one delivery later.
- With a limit above 2, a record on its last attempt goes out alone: it ends the
  acquisition when something is already taken, and is the only record taken otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: The fewest deliveries that throttle a record, whatever the limit.
MINIMUM_THROTTLE_DELIVERIES = 2


def throttle_deliveries(delivery_count_limit: int) -> int:
    """Deliveries after which a record is throttled (Kafka's throttleRecordsDeliveryLimit)."""
    return max(MINIMUM_THROTTLE_DELIVERIES, math.ceil(delivery_count_limit / 2))


def throttled_ranges(
    segments: Iterable[tuple[int, int, bool, int]],
    batch_records: int,
    delivery_count_limit: int,
    record_limit: int | None = None,
) -> list[tuple[int, int]]:
    """The offset ranges to acquire from a throttled in-flight batch of ``batch_records``
    records, given its records in the fetch as ``segments`` in order: (first, last,
    available, delivery count). ``record_limit``: ShareFetch's record-limit mode's
    remaining records (None in the batch-optimized mode)."""
    threshold = throttle_deliveries(delivery_count_limit)
    alone_from = delivery_count_limit - 1 if delivery_count_limit > 2 else None
    cap: int | None = None
    got = 0
    ranges: list[tuple[int, int]] = []
    for first, last, available, count in segments:
        if not available:
            continue
        if count == alone_from and got > 0:
            break
        if count >= threshold and cap is None:
            cap = max(1, batch_records >> (count - threshold + 1))
        take = 1 if count == alone_from else last - first + 1
        if record_limit is not None:
            take = min(take, record_limit - got)
        if cap is not None and got < cap:
            take = min(take, cap - got)
        if take <= 0:
            break
        ranges.append((first, first + take - 1))
        got += take
        if count == alone_from or got in (record_limit, cap):
            break
    return ranges
