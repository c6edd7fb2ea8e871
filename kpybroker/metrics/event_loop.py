"""How late the event loop runs what is due: ``kpybroker_event_loop_lag_seconds``.

Every request, timer and connection of the broker shares one event loop, so work
that holds it (a large recompression, a slow scrape, a burst of requests) delays
everything else. Kafka has no such loop, hence the ``kpybroker_`` name. A task
sleeps ``SAMPLE_INTERVAL_S`` at a time and records how much later than asked it
woke up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kpybroker.metrics.histogram import BucketCounts

if TYPE_CHECKING:
    from prometheus_client.core import HistogramMetricFamily

SAMPLE_INTERVAL_S = 0.5
LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class EventLoopLag:
    """Samples the event loop's lag while ``run`` runs."""

    def __init__(self) -> None:
        self.lag = BucketCounts(LAG_BUCKETS_S)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + SAMPLE_INTERVAL_S
            await asyncio.sleep(SAMPLE_INTERVAL_S)
            self.lag.observe(max(0.0, loop.time() - due))

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """The samples as a metric family (a prometheus_client collector)."""
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(
            "kpybroker_event_loop_lag_seconds",
            f"How late the event loop woke a task sleeping {SAMPLE_INTERVAL_S} s at a time.",
            labels=[],
        )
        self.lag.add_to(family, [])
        yield family
