"""Writing a transaction's end markers to the partitions this broker leads.

This is the receiving end of WriteTxnMarkers, shared by its handler (markers
sent by the coordinator on another broker) and by this broker's own
coordinator (markers for partitions it leads itself, sent without a round
trip through the network). Each marker is appended with acks=all, as Kafka's
``handleWriteTxnMarkersRequest`` does, and a marker written to a
``__consumer_offsets`` partition then completes the transaction's offset
commits in the group coordinator (Kafka's ``onTransactionCompleted``).

Every marker is appended before any is waited for, and the waits are only
for followers: on partitions without followers a transaction's markers are
written without yielding to the event loop. Its coordinator on this broker
then completes it in the step that follows its EndTxn answer, before a request
read meanwhile (the producer's next write, which would otherwise find it
completing) is handled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

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
    """The replicas' part: append one marker to a led partition; its error, known at once
    or once the followers have it (``ReplicaManager.append_txn_marker``)."""

    def append_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> ErrorCode | Coroutine[Any, Any, ErrorCode]: ...


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
        appended = {
            (topic, partition): self.replicas.append_txn_marker(
                topic, partition, producer_id, producer_epoch, coordinator_epoch, committed
            )
            for topic, partition in wanted
        }
        errors = await _settled(appended)
        completions = {
            tp: self._complete_offsets(tp[1], producer_id, producer_epoch, committed)
            for tp, error in errors.items()
            if not error and tp[0] == OFFSETS_TOPIC
        }
        errors.update(await _settled(completions))
        return errors

    async def _complete_offsets(
        self, offsets_partition: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        error = await self.groups.complete_transaction(
            offsets_partition, producer_id, producer_epoch, committed
        )
        # The transaction coordinator retries these as a leader change (Kafka's handler
        # translates them the same way); the group coordinator replays the marker
        # from the log when it loads the partition anyway.
        return NOT_READY.get(error, error)


async def _settled(
    outcomes: dict[TopicPartition, ErrorCode | Coroutine[Any, Any, ErrorCode]],
) -> dict[TopicPartition, ErrorCode]:
    """Each outcome's error: those known already as they are, the others awaited together
    (with nothing to await, without yielding)."""
    waits = {tp: o for tp, o in outcomes.items() if not isinstance(o, ErrorCode)}
    errors = {tp: o for tp, o in outcomes.items() if isinstance(o, ErrorCode)}
    if waits:
        errors.update(zip(waits, await asyncio.gather(*waits.values()), strict=True))
    return {tp: errors[tp] for tp in outcomes}
