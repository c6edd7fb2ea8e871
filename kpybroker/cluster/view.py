"""The cluster as one broker's request handlers see it.

A thin face over ``ClusterMetadata`` with what Metadata, DescribeCluster,
FindCoordinator and the config APIs need: who this broker is, which brokers
are alive and where each listens, the controller, the topics, and the stored
configs of topics, brokers and groups. Handlers get this view, never the broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import TopicMetadata


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where clients reach a broker on one listener."""

    broker_id: int
    host: str
    port: int
    rack: str | None


class ClusterView:
    def __init__(self, broker_id: int, cluster_id: str, cluster: ClusterMetadata) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._cluster = cluster

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._cluster.topics()

    def live_broker_ids(self) -> set[int]:
        return set(self._cluster.live_brokers())

    def live_brokers(self, listener: str) -> list[BrokerAddress]:
        """Live brokers' addresses on ``listener``, the listener the request came in on."""
        found = []
        for broker_id, reg in sorted(self._cluster.live_brokers().items()):
            for ep in reg.endpoints:
                if ep.listener == listener:
                    found.append(BrokerAddress(broker_id, ep.host, ep.port, reg.rack))
        return found

    def controller_id(self) -> int:
        controller = self._cluster.controller_id
        return -1 if controller is None else controller

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's dynamic configs (its overrides of the broker defaults)."""
        meta = self._cluster.topics().get(topic)
        return dict(meta.configs) if meta else {}

    def broker_config(self, broker_id: int | None) -> dict[str, str]:
        """A broker's stored dynamic configs (None: the cluster-wide defaults)."""
        return dict(self._cluster.broker_config(broker_id))

    def group_config(self, group_id: str) -> dict[str, str]:
        """A group's stored dynamic configs (empty when it has none)."""
        return dict(self._cluster.group_config(group_id))

    def configured_groups(self) -> list[str]:
        """The groups that have dynamic configs."""
        return self._cluster.configured_groups()

    async def set_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        await self._cluster.set_topic_config(topic, configs)

    async def set_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        await self._cluster.set_group_config(group_id, configs)

    async def set_broker_config(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        await self._cluster.set_broker_config(broker_id, configs)
