"""Live throughput and latency for the console's charts: a short ring of samples.

Every second the sampler reads each topic's records (the sum of its partitions'
latest offsets) and bytes (their size on disk) and keeps the differences from the
previous sample: records/s and bytes/s, per topic and in total. A topic first seen
after the sampler started counts from zero (it was created in between); the first
sample only sets the baseline. Shrinking sizes (retention) count as no growth.

A viewer sees the topics it may describe: ``as_json`` leaves the others out, totals
included (the sampler itself reads every topic, as the broker's metrics do).

Request latency comes from an optional :class:`RequestLatency` (the metrics registry,
when the broker has one): cumulative counts and total milliseconds per request name,
whose differences give each interval's mean.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: Seconds between samples, and how many the ring keeps (five minutes).
SAMPLE_INTERVAL_S = 1.0
SAMPLES_KEPT = 300

#: topic -> (records, bytes): the cumulative figures one sample reads.
TopicTotals = Mapping[str, tuple[int, int]]


class RequestLatency(Protocol):
    """Cumulative request counts and total time, by request name (``Produce``, ``Fetch``)."""

    def totals(self) -> Mapping[str, tuple[int, float]]: ...


@dataclass
class Sample:
    """One interval: when it ended, its length, and its rates."""

    time: float
    seconds: float
    records_per_s: dict[str, float]
    bytes_per_s: dict[str, float]
    latency_ms: dict[str, float] = field(default_factory=dict)

    def as_json(self, visible: Collection[str] | None = None) -> dict[str, Any]:
        """The sample's figures, of the ``visible`` topics only when given."""
        records = {
            name: rate
            for name, rate in self.records_per_s.items()
            if visible is None or name in visible
        }
        return {
            "t": round(self.time, 3),
            "seconds": round(self.seconds, 3),
            "records_per_s": sum(records.values()),
            "bytes_per_s": sum(self.bytes_per_s.get(name, 0.0) for name in records),
            "topics": {
                name: {"records_per_s": rate, "bytes_per_s": self.bytes_per_s.get(name, 0.0)}
                for name, rate in records.items()
            },
            "latency_ms": self.latency_ms,
        }


class ThroughputSampler:
    """Keeps the last :data:`SAMPLES_KEPT` samples of the totals ``read_totals`` gives."""

    def __init__(
        self,
        read_totals: Callable[[], Awaitable[TopicTotals]],
        latency: RequestLatency | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.read_totals = read_totals
        self.latency = latency
        self.clock = clock
        self.samples: deque[Sample] = deque(maxlen=SAMPLES_KEPT)
        self._last: tuple[float, TopicTotals, Mapping[str, tuple[int, float]]] | None = None

    async def sample(self) -> None:
        """Read the totals once and record the rates since the previous reading."""
        totals = await self.read_totals()
        latency = dict(self.latency.totals()) if self.latency is not None else {}
        now = self.clock()
        if self._last is not None:
            then, before, latency_before = self._last
            seconds = max(now - then, 1e-3)
            records: dict[str, float] = {}
            sizes: dict[str, float] = {}
            for name, (count, size) in totals.items():
                old_count, old_size = before.get(name, (0, 0))
                records[name] = max(count - old_count, 0) / seconds
                sizes[name] = max(size - old_size, 0) / seconds
            self.samples.append(
                Sample(now, seconds, records, sizes, _mean_latency(latency, latency_before))
            )
        self._last = (now, totals, latency)

    async def run(self) -> None:
        """Sample every :data:`SAMPLE_INTERVAL_S` until cancelled; a failed reading is logged
        and skipped, so the charts have a gap rather than the console an end."""
        while True:
            try:
                await self.sample()
            except Exception:
                log.exception("console: throughput sample failed")
            await asyncio.sleep(SAMPLE_INTERVAL_S)

    def as_json(self, visible: Collection[str] | None = None) -> dict[str, Any]:
        return {
            "interval_s": SAMPLE_INTERVAL_S,
            "latency_available": self.latency is not None,
            "samples": [s.as_json(visible) for s in self.samples],
        }


def _mean_latency(
    now: Mapping[str, tuple[int, float]], before: Mapping[str, tuple[int, float]]
) -> dict[str, float]:
    """Each request's mean time over the interval, for those with requests in it."""
    means = {}
    for name, (count, total_ms) in now.items():
        old_count, old_total = before.get(name, (0, 0.0))
        if count > old_count:
            means[name] = (total_ms - old_total) / (count - old_count)
    return means
