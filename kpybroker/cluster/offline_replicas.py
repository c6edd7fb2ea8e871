"""Which replicas of a broker are offline: asked by the controller after a log dir event.

Kafka's ZooKeeper-mode controller answers a log dir event by sending the
broker a LeaderAndIsr request for all its replicas and reading which ones
come back with KAFKA_STORAGE_ERROR. Brokers here follow the state znodes
instead of LeaderAndIsr, so the controller asks with DescribeLogDirs (all
partitions): the broker's replicas in no online directory of the answer are
offline when some directory reports KAFKA_STORAGE_ERROR. A replica still
being created counts as offline too; it only leaves the ISR, and rejoins it
as soon as it fetches, since its broker keeps following it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from kpybroker.cluster.broker_client import BrokerConnections, Locator
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: DescribeLogDirs version asked: flexible, with the top-level error code.
API_VERSION = 4
#: ``await ask(broker, its assigned replicas)``: those of them that are offline.
OfflineReplicas = Callable[[int, Iterable[TopicPartition]], Awaitable[frozenset[TopicPartition]]]


def offline_among(
    response: DescribeLogDirsResponse, assigned: Iterable[TopicPartition]
) -> frozenset[TopicPartition]:
    """The ``assigned`` replicas the answer shows in no online log directory; none while
    every directory is online (the broker restarted meanwhile)."""
    if not any(r.error_code == ErrorCode.KAFKA_STORAGE_ERROR for r in response.results):
        return frozenset()
    online = {
        (topic.name, p.partition_index)
        for result in response.results
        if result.error_code == ErrorCode.NONE
        for topic in result.topics
        for p in topic.partitions
    }
    return frozenset(tp for tp in assigned if tp not in online)


class OfflineReplicaQuery:
    """``await query(broker, assigned)``: the ``assigned`` replicas of ``broker`` whose
    log directory failed (an ``OfflineReplicas``)."""

    def __init__(self, locate: Locator, timeout_s: float) -> None:
        self._connections = BrokerConnections(locate, "controller-log-dirs", timeout_s)

    async def __call__(
        self, broker: int, assigned: Iterable[TopicPartition]
    ) -> frozenset[TopicPartition]:
        request = DescribeLogDirsRequest(topics=None)
        response = await self._connections.request(broker, request, API_VERSION)
        if response.error_code != ErrorCode.NONE:
            log.warning(
                "broker %d refused DescribeLogDirs: %s", broker, ErrorCode(response.error_code).name
            )
            return frozenset()
        return offline_among(response, assigned)

    def close(self) -> None:
        self._connections.close()
