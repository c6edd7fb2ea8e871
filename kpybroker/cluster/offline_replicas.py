"""Which replicas of a broker are offline: asked by the controller after a log dir event,
when it is elected, and when a broker registers.

Kafka's ZooKeeper-mode controller sends the broker a LeaderAndIsr request for
all its replicas (after a log dir event, at its election, at the broker's start)
and reads which ones come back with KAFKA_STORAGE_ERROR. Brokers here follow
the state znodes instead of LeaderAndIsr, so the controller asks with
DescribeLogDirs: first for no partition, which only lists the directories (a
small answer, and the only one while every directory is online); then, if some
directory reports KAFKA_STORAGE_ERROR, for all partitions: the broker's replicas
in no online directory of the answer are offline. A replica still being created
counts as offline too; it only leaves the ISR, and rejoins it as soon as it
fetches, since its broker keeps following it.
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
        directories = await self._describe(broker, DescribeLogDirsRequest(topics=[]))
        if not any(r.error_code == ErrorCode.KAFKA_STORAGE_ERROR for r in directories.results):
            return frozenset()
        return offline_among(
            await self._describe(broker, DescribeLogDirsRequest(topics=None)), assigned
        )

    async def _describe(
        self, broker: int, request: DescribeLogDirsRequest
    ) -> DescribeLogDirsResponse:
        """The broker's answer; one refused (not authorized) counts as all dirs online."""
        response = await self._connections.request(broker, request, API_VERSION)
        if response.error_code != ErrorCode.NONE:
            log.warning(
                "broker %d refused DescribeLogDirs: %s", broker, ErrorCode(response.error_code).name
            )
            return DescribeLogDirsResponse(error_code=response.error_code, results=[])
        return response

    def close(self) -> None:
        self._connections.close()
