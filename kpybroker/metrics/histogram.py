"""A histogram's bucket counts, kept as plain integers on the event loop."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import HistogramMetricFamily


class BucketCounts:
    """Observations counted into buckets, for a ``HistogramMetricFamily`` at scrape time.

    prometheus_client's own ``Histogram`` takes a lock and walks its buckets on each
    observation; every observation here happens on the broker's one event loop, so a
    bisection and two additions do.
    """

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        #: One count per bound, and the last for +Inf; not cumulative.
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def add_to(self, family: HistogramMetricFamily, labels: Sequence[str]) -> None:
        """Add these counts to ``family`` as one labelled histogram (cumulative buckets)."""
        buckets = []
        running = 0
        for bound, count in zip([*self.bounds, float("inf")], self.counts, strict=True):
            running += count
            buckets.append((_bucket_label(bound), running))
        family.add_metric(list(labels), buckets, self.total)


def _bucket_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))
