"""Request latency for the console's chart from a Prometheus histogram, when there is one.

The broker's metrics (``kpybroker.metrics``) keep Kafka's request time as a
prometheus_client histogram, ``kafka_network_requestmetrics_totaltimems`` labelled by
``request`` and ``version``. Its ``_count`` and ``_sum`` samples are cumulative, which
is what :class:`~kpybroker.console.throughput.RequestLatency` asks for: the sampler
turns their differences into each interval's mean. Nothing here imports the metrics
package; it reads whichever registry it is given.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

REQUEST_TIME = "kafka_network_requestmetrics_totaltimems"


class PrometheusLatency:
    """:class:`RequestLatency` from a histogram of milliseconds labelled ``request``."""

    def __init__(self, registry: CollectorRegistry, histogram: str = REQUEST_TIME) -> None:
        self.registry = registry
        self.histogram = histogram

    def totals(self) -> Mapping[str, tuple[int, float]]:
        counts: dict[str, int] = defaultdict(int)
        sums: dict[str, float] = defaultdict(float)
        for metric in self.registry.collect():
            if metric.name != self.histogram:
                continue
            for sample in metric.samples:
                request = sample.labels.get("request", "")
                if sample.name == f"{self.histogram}_count":
                    counts[request] += int(sample.value)
                elif sample.name == f"{self.histogram}_sum":
                    sums[request] += sample.value
        return {request: (count, sums[request]) for request, count in counts.items()}
