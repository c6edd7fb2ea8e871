"""Kafka's ``Log`` gauges per partition log on this broker, read at scrape time:
``kafka_log_log_size``, ``_logstartoffset``, ``_logendoffset``, ``_numlogsegments``,
each with ``topic`` and ``partition`` labels."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class LogState(Protocol):
    """One partition's log (``log.partition_log.PartitionLog``)."""

    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int: ...

    @property
    def segments(self) -> Sequence[object]: ...


class LogStateCollector(Collector):
    def __init__(self, logs: Iterable[tuple[tuple[str, int], LogState]]) -> None:
        self.logs = logs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of the log's segments.", labels=labels
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "The log's first offset.", labels=labels
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset", "The offset the next record gets.", labels=labels
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments of the log.", labels=labels
        )
        for (topic, partition), log in self.logs:
            key = [topic, str(partition)]
            size.add_metric(key, log.size)
            start.add_metric(key, log.log_start_offset)
            end.add_metric(key, log.log_end_offset)
            segments.add_metric(key, len(log.segments))
        yield from (size, start, end, segments)
