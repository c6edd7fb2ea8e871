"""Consumer group lag, as kafka_exporter names it (the name Kafka dashboards use).

Kafka itself exports no lag; kafka_exporter computes, per group and partition,
``kafka_consumergroup_current_offset`` (the committed offset) and
``kafka_consumergroup_lag`` (the partition's newest offset minus it). Here each broker
reports the groups it coordinates, for the partitions it holds a replica of, with
that replica's high watermark as the newest offset (what ListOffsets answers
consumers); a lag is never below 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kpybroker.metrics.replica_state import HostedPartitions


class CommittedOffsets(Protocol):
    """The committed offsets of the groups coordinated here (``GroupCoordinator``)."""

    def committed_offsets(self) -> Iterable[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of each."""
        ...


class GroupLagCollector(Collector):
    def __init__(self, groups: CommittedOffsets, hosted: HostedPartitions) -> None:
        self.groups = groups
        self.hosted = hosted

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "The group's committed offset.", labels=labels
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "The partition's high watermark minus the group's committed offset.",
            labels=labels,
        )
        partitions = self.hosted.partitions
        for group, topic, index, offset in self.groups.committed_offsets():
            key = [group, topic, str(index)]
            current.add_metric(key, offset)
            partition = partitions.get((topic, index))
            if partition is not None:
                lag.add_metric(key, max(0, partition.high_watermark - offset))
        yield current
        yield lag
