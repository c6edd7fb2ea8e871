"""Writing a transaction's end markers to the partitions this broker leads.

This is the receiving end of WriteTxnMarkers, shared by its handler (markers
sent by the coordinator on another broker) and by this broker's own
coordinator (markers for partitions it leads itself, sent without a round
trip through the network). Each marker is appended with acks=all, as Kafka's
``handleWriteTxnMarkersRequest`` does, and a marker written to a
``__consumer_offsets`` partition then completes the transaction's offset
commits in the group coordinator (Kafka's ``onTransactionCompleted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from kpybroker.metadata.topic_names import OFFSETS_TOPIC
from kpybroker.protocol.errors import ErrorCode
from kpybroker.transaction_coordinator.transaction_state import TopicPartition

#: Group coordinator errors a marker's sender does not expect, as it retries them.
NOT_READY = dict.fromkeys(
    (
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    ),
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
)


class MarkerReplicas(Protocol):
    """The replicas' part: append one marker to a led partition, once replicated."""

    async def write_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> ErrorCode: ...


class TransactionalGroups(Protocol):
    """The group coordinator's part: make a transaction's offset commits visible, or drop them."""

    async def complete_transaction(
        self, offsets_partition: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode: ...


class TxnMarkerWriter:
    def __init__(self, replicas: MarkerReplicas, groups: TransactionalGroups) -> None:
        self.replicas = replicas
        self.groups = groups

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """Write one transaction's marker to each partition; the error of each."""
        wanted = list(dict.fromkeys(partitions))

        async def one(topic: str, partition: int) -> ErrorCode:
            error = await self.replicas.write_txn_marker(
                topic, partition, producer_id, producer_epoch, coordinator_epoch, committed
            )
            if error or topic != OFFSETS_TOPIC:
                return error
            error = await self.groups.complete_transaction(
                partition, producer_id, producer_epoch, committed
            )
            # The transaction coordinator retries these as a leader change (Kafka's handler
            # translates them the same way); the group coordinator replays the marker
            # from the log when it loads the partition anyway.
            return NOT_READY.get(error, error)

        errors = await asyncio.gather(*(one(topic, partition) for topic, partition in wanted))
        return dict(zip(wanted, errors, strict=True))
