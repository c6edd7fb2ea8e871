"""Kafka's ``ReplicaManager`` and ``KafkaController`` gauges, read at scrape time.

``kafka_server_replicamanager_*`` count this broker's replicas: all it hosts
(``partitioncount``), those it leads (``leadercount``), and of those the ones whose
in-sync replicas are fewer than their replicas (``underreplicatedpartitions``) or than
``min.insync.replicas`` (``underminisrpartitioncount``).
``kafka_controller_kafkacontroller_activecontrollercount`` is 1 on the active controller,
which alone also reports ``offlinepartitionscount``, the partitions without a leader.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kpybroker.metadata.model import TopicMetadata


class HostedPartition(Protocol):
    """A replica this broker holds (``cluster.partition.Partition``)."""

    min_insync_replicas: int

    @property
    def is_leader(self) -> bool: ...

    @property
    def isr(self) -> tuple[int, ...]: ...

    @property
    def replicas(self) -> tuple[int, ...]: ...

    @property
    def high_watermark(self) -> int: ...


class HostedPartitions(Protocol):
    """The replicas this broker holds, by topic and partition (``ReplicaManager``)."""

    @property
    def partitions(self) -> Mapping[tuple[str, int], HostedPartition]: ...


class ControllerRole(Protocol):
    """Whether this broker is the active controller (``cluster.controller.Controller``)."""

    @property
    def active(self) -> bool: ...


class Topology(Protocol):
    """The cluster's topics as the metadata has them (``cluster.view.ClusterView``)."""

    def topics(self) -> Mapping[str, TopicMetadata]: ...


class ReplicaStateCollector(Collector):
    def __init__(
        self, hosted: HostedPartitions, controller: ControllerRole, topology: Topology
    ) -> None:
        self.hosted = hosted
        self.controller = controller
        self.topology = topology

    def collect(self) -> Iterator[GaugeMetricFamily]:
        partitions = self.hosted.partitions.values()
        led = [p for p in partitions if p.is_leader]
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(
            prefix + "partitioncount", "Replicas on this broker.", value=len(partitions)
        )
        yield GaugeMetricFamily(
            prefix + "leadercount", "Partitions this broker leads.", value=len(led)
        )
        yield GaugeMetricFamily(
            prefix + "underreplicatedpartitions",
            "Partitions led here with fewer in-sync replicas than replicas.",
            value=sum(len(p.isr) < len(p.replicas) for p in led),
        )
        yield GaugeMetricFamily(
            prefix + "underminisrpartitioncount",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas.",
            value=sum(len(p.isr) < p.min_insync_replicas for p in led),
        )
        active = self.controller.active
        prefix = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(
            prefix + "activecontrollercount",
            "1 on the active controller, else 0.",
            value=int(active),
        )
        offline = 0
        if active:
            topics = self.topology.topics().values()
            offline = sum(p.leader < 0 for t in topics for p in t.partitions.values())
        yield GaugeMetricFamily(
            prefix + "offlinepartitionscount",
            "Partitions without a leader (reported by the active controller only).",
            value=offline,
        )
