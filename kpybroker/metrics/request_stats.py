"""Kafka's ``RequestMetrics``: requests per API and version, and how long they took.

``kafka_network_requestmetrics_requests_total{request,version}`` is what the JMX
exporter makes of Kafka's ``RequestsPerSec`` meter. Kafka's ``TotalTimeMs`` is a
histogram whose percentiles the exporter turns into a summary; here it is a
Prometheus histogram, ``kafka_network_requestmetrics_totaltimems``, in milliseconds,
by request and version (``histogram_quantile`` gives the percentiles). As in Kafka a
fetch counts as ``Fetch`` and again as ``FetchConsumer`` or ``FetchFollower``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from kpybroker.metrics.histogram import BucketCounts

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

#: Bucket bounds of the request time histogram, in milliseconds (a long-polling fetch
#: waits up to its max_wait_ms, 500 by default; an acks=all produce up to its timeout).
TOTAL_TIME_MS_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
                         10_000, 30_000)  # fmt: skip


class RequestStats:
    """Counts and times of the requests the broker answered, by API name and version."""

    def __init__(self) -> None:
        self.times: dict[tuple[str, int], BucketCounts] = {}

    def record(self, request: str, version: int, elapsed_ms: float) -> None:
        times = self.times.get((request, version))
        if times is None:
            times = self.times[(request, version)] = BucketCounts(TOTAL_TIME_MS_BUCKETS)
        times.observe(elapsed_ms)

    def totals(self) -> dict[str, tuple[int, float]]:
        """Requests answered and their milliseconds in all, by API name (every version):
        cumulative, for the console's latency chart."""
        totals: dict[str, tuple[int, float]] = {}
        for (request, _), times in self.times.items():
            count, total = totals.get(request, (0, 0.0))
            totals[request] = (count + sum(times.counts), total + times.total)
        return totals

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        """The counts and times as metric families (a prometheus_client collector)."""
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        labels = ["request", "version"]
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, by API and version (RequestsPerSec).",
            labels=labels,
        )
        total_time = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from decoding a request to its encoded response (TotalTimeMs).",
            labels=labels,
        )
        for (request, version), times in sorted(self.times.items()):
            requests.add_metric([request, str(version)], sum(times.counts))
            times.add_to(total_time, [request, str(version)])
        yield requests
        yield total_time
