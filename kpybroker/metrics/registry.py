"""One broker's prometheus_client registry: its counters and the gauges of its state.

Each broker gets its own ``CollectorRegistry`` (never prometheus_client's global one),
so that several brokers in one process (tests, the in-process fixture) keep their
figures apart.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from kpybroker.metrics.broker_metrics import BrokerMetrics
from kpybroker.metrics.connections import Connection, ConnectionCountCollector
from kpybroker.metrics.group_lag import CommittedOffsets, GroupLagCollector
from kpybroker.metrics.log_dirs import LogDirCollector, LogDirStates
from kpybroker.metrics.log_state import LogState, LogStateCollector
from kpybroker.metrics.replica_state import (
    ControllerRole,
    HostedPartitions,
    ReplicaStateCollector,
    Topology,
)


@dataclass(frozen=True)
class BrokerState:
    """The views of the broker's state that the gauges read at each scrape."""

    hosted: HostedPartitions
    controller: ControllerRole
    topology: Topology
    logs: Iterable[tuple[tuple[str, int], LogState]]
    groups: CommittedOffsets
    listeners: Sequence[str]
    connections: Collection[Connection]
    log_dirs: LogDirStates


def broker_registry(metrics: BrokerMetrics, state: BrokerState) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for collector in (
        metrics.topics,
        metrics.requests,
        metrics.event_loop,
        ReplicaStateCollector(state.hosted, state.controller, state.topology),
        LogStateCollector(state.logs),
        LogDirCollector(state.log_dirs),
        GroupLagCollector(state.groups, state.hosted),
        ConnectionCountCollector(state.listeners, state.connections),
    ):
        registry.register(collector)
    return registry
