"""Sending a transaction's end markers to its partitions' leaders, until each has one.

Kafka's ``TransactionMarkerChannelManager``: the partitions are grouped by
their current leader; those this broker leads are written directly (the
``TxnMarkerWriter``), the others with a WriteTxnMarkers request to their
leader over the inter-broker listener. Each partition's answer decides:

- written: done;
- the leader moved, is not caught up, or timed out (NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT,
  KAFKA_STORAGE_ERROR), or the connection failed: looked up and sent again
  after a short backoff, for as long as it takes;
- the partition no longer exists (its topic was deleted): dropped, since no
  reader can see it;
- INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED: a newer producer
  epoch or coordinator has taken over, so this coordinator stops;
- any other error is logged and the partition counted as done, as Kafka
  does for errors it cannot retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping

from kpybroker.cluster.broker_client import BrokerConnectionError, BrokerConnections, Locator
from kpybroker.metadata.model import NO_LEADER, TopicMetadata
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kpybroker.transaction_coordinator.effects import TxnMarkers
from kpybroker.transaction_coordinator.marker_writer import TxnMarkerWriter
from kpybroker.transaction_coordinator.transaction_state import TopicPartition

log = logging.getLogger(__name__)

#: Version 2 carries each marker's transaction version (KIP-1228); every kpybroker has it.
WRITE_TXN_MARKERS_VERSION = 2
RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
CONNECTION_ERRORS = (OSError, TimeoutError, BrokerConnectionError, DecodeError)


class Fenced(Exception):
    """A leader refused the markers for good: a newer epoch exists."""


class MarkerChannel:
    def __init__(
        self,
        broker_id: int,
        topics: Callable[[], Mapping[str, TopicMetadata]],
        locate: Locator,
        local: TxnMarkerWriter,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.topics = topics
        self.local = local
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.peers = BrokerConnections(
            locate, f"broker-{broker_id}-txn-marker-sender", request_timeout_ms / 1000
        )

    def close(self) -> None:
        self.peers.close()

    async def send(self, markers: TxnMarkers) -> bool:
        """Write ``markers`` everywhere; False if a leader fenced them."""
        remaining = set(markers.partitions)
        while True:
            by_leader = self._by_leader(remaining)
            sends = [self._send_to(leader, markers, parts) for leader, parts in by_leader.items()]
            try:
                # One leader (this broker, alone, most often) is awaited directly: written
                # without followers, its markers then take no turn of the event loop.
                for done in [await sends[0]] if len(sends) == 1 else await asyncio.gather(*sends):
                    remaining -= done
            except Fenced as exc:
                log.warning("stopped sending the markers of %s: %s", markers.transactional_id, exc)
                return False
            if not remaining:
                return True
            await asyncio.sleep(self.retry_backoff_s)

    def _by_leader(self, remaining: set[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """The partitions to send to each leader now; drops those whose topic is gone."""
        topics = self.topics()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in sorted(remaining):
            topic = topics.get(tp[0])
            meta = topic.partitions.get(tp[1]) if topic is not None else None
            if meta is None:
                log.info("dropping the transaction marker of %s-%d: it no longer exists", *tp)
                remaining.discard(tp)
            elif meta.leader != NO_LEADER:
                by_leader[meta.leader].append(tp)
        return by_leader

    async def _send_to(
        self, leader: int, markers: TxnMarkers, partitions: list[TopicPartition]
    ) -> set[TopicPartition]:
        """The partitions ``leader`` wrote (or that need no marker)."""
        if leader == self.broker_id:
            errors = await self.local.write(
                markers.producer_id,
                markers.producer_epoch,
                markers.committed,
                markers.coordinator_epoch,
                partitions,
            )
        else:
            try:
                errors = await self._remote(leader, markers, partitions)
            except CONNECTION_ERRORS as exc:
                log.debug("markers to broker %d failed: %s", leader, exc)
                return set()
        done = set()
        for tp, error in errors.items():
            if error in FENCED:
                raise Fenced(f"{tp[0]}-{tp[1]} answered {error.name}")
            if error in RETRIABLE:
                continue
            if error:
                log.error("marker for %s-%d failed with %s: not retried", *tp, error.name)
            done.add(tp)
        return done

    async def _remote(
        self, leader: int, markers: TxnMarkers, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in partitions:
            by_topic[topic].append(index)
        request = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=markers.producer_id,
                    producer_epoch=markers.producer_epoch,
                    transaction_result=markers.committed,
                    topics=[
                        WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                        for name, indexes in by_topic.items()
                    ],
                    coordinator_epoch=markers.coordinator_epoch,
                    transaction_version=markers.transaction_version,
                )
            ]
        )
        response: WriteTxnMarkersResponse = await self.peers.request(
            leader, request, WRITE_TXN_MARKERS_VERSION
        )
        errors = {
            (topic.name, p.partition_index): ErrorCode(p.error_code)
            for result in response.markers
            for topic in result.topics
            for p in topic.partitions
        }
        # A partition the answer leaves out is sent again.
        return {tp: errors.get(tp, ErrorCode.REQUEST_TIMED_OUT) for tp in partitions}
