"""One broker's metrics: its own registry, what requests count, what its state shows.

Each broker has its own ``CollectorRegistry`` (never prometheus_client's global one),
so that several brokers in one process (tests, the in-process fixture) keep their
figures apart.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from prometheus_client import CollectorRegistry

from kpybroker.metrics.connections import Connection, ConnectionCountCollector
from kpybroker.metrics.event_loop import EventLoopLag
from kpybroker.metrics.group_lag import CommittedOffsets, GroupLagCollector
from kpybroker.metrics.log_state import LogState, LogStateCollector
from kpybroker.metrics.replica_state import (
    ControllerRole,
    HostedPartitions,
    ReplicaStateCollector,
    Topology,
)
from kpybroker.metrics.request_stats import RequestStats
from kpybroker.metrics.topic_stats import BrokerTopicStats


class BrokerMetrics:
    """The registry a metrics listener serves, and the counters the request path adds to."""

    def __init__(self, known_topics: Callable[[], Collection[str]]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.topics = BrokerTopicStats(known_topics)
        self.requests = RequestStats()
        self.event_loop = EventLoopLag()
        for collector in (self.topics, self.requests, self.event_loop):
            self.registry.register(collector)

    def watch(
        self,
        *,
        hosted: HostedPartitions,
        controller: ControllerRole,
        topology: Topology,
        logs: Iterable[tuple[tuple[str, int], LogState]],
        groups: CommittedOffsets,
        listeners: Sequence[str],
        connections: Collection[Connection],
    ) -> None:
        """Report the broker's state too, read from these at each scrape."""
        for collector in (
            ReplicaStateCollector(hosted, controller, topology),
            LogStateCollector(logs),
            GroupLagCollector(groups, hosted),
            ConnectionCountCollector(listeners, connections),
        ):
            self.registry.register(collector)
