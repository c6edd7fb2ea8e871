"""Open Kafka connections per listener: ``kafka_server_socket_server_metrics_connection_count``.

The name is what the JMX exporter's rule for Kafka's ``socket-server-metrics`` (as
Strimzi ships it) makes of the ``connection-count`` attribute; Kafka has one per
network processor, this broker one event loop, so there is no ``networkProcessor``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class Connection(Protocol):
    """An open client connection (``server.connection.KafkaConnection``)."""

    listener: str


class ConnectionCountCollector(Collector):
    def __init__(self, listeners: Sequence[str], connections: Collection[Connection]) -> None:
        self.listeners = listeners
        self.connections = connections

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = Counter(connection.listener for connection in self.connections)
        family = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections.",
            labels=["listener"],
        )
        for listener in self.listeners:
            family.add_metric([listener], counts[listener])
        yield family
