"""A partition leader asking the transaction coordinator about a first transactional write.

KIP-890, Kafka's ``AddPartitionsToTxnManager``. Before a producer's first
transactional write to a partition in a transaction, the partition's leader
(and, for offsets, the group coordinator) asks the coordinator of the
transactional id either to *verify* that the partition is in the open
transaction (clients of transaction version 1 added it themselves with
AddPartitionsToTxn; ``transaction.partition.verification.enable``) or to
*add* it (clients of version 2, Produce v12+ and TxnOffsetCommit v5, add
nothing themselves). The coordinator is this broker's own, called directly,
or another broker's, sent AddPartitionsToTxn v5 over the inter-broker
listener.

The answers are mapped as Kafka's manager maps them, for the partition
leader's caller: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (what
producers expect here); TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for
clients too old to know it; a failed connection is NETWORK_EXCEPTION; a
coordinator too old for the request skips the check. An add that finds the
previous transaction still completing (CONCURRENT_TRANSACTIONS, the usual
case right after a version-2 EndTxn) is retried every
``add.partitions.to.txn.retry.backoff.ms`` for up to
``add.partitions.to.txn.retry.backoff.max.ms``, with ``before_attempt``
run before each attempt (the leader registers its guard there). When this
broker is the coordinator, a retry does not wait out the backoff once that
transaction has completed: the producer's connection is held meanwhile, and
its completion usually comes a millisecond or two after the refusal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kpybroker.cluster.broker_client import BrokerConnectionError, BrokerConnections, Locator
from kpybroker.config.setting_fields import broker_setting, settings_from_config
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch
from kpybroker.transaction_coordinator.transaction_state import TopicPartition

if TYPE_CHECKING:
    from kpybroker.config import BrokerConfig
    from kpybroker.transaction_coordinator.service import TransactionCoordinator

log = logging.getLogger(__name__)

#: The broker-to-coordinator form (batched transactions, verify_only).
BROKER_REQUEST_VERSION = 5
CONNECTION_ERRORS = (OSError, TimeoutError, BrokerConnectionError, DecodeError)


@dataclass(frozen=True, slots=True)
class VerifierSettings:
    request_timeout_ms: int = broker_setting("request.timeout.ms")
    retry_backoff_ms: int = broker_setting("add.partitions.to.txn.retry.backoff.ms")
    retry_max_ms: int = broker_setting("add.partitions.to.txn.retry.backoff.max.ms")

    @classmethod
    def from_config(cls, config: BrokerConfig) -> VerifierSettings:
        return settings_from_config(cls, config)


class PartitionVerifier:
    def __init__(
        self,
        broker_id: int,
        coordinator: TransactionCoordinator,
        locate: Locator,
        settings: VerifierSettings,
    ) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.settings = settings
        self.peers = BrokerConnections(
            locate, f"broker-{broker_id}-txn-verifier", settings.request_timeout_ms / 1000
        )

    def close(self) -> None:
        self.peers.close()

    async def add_or_verify(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        *,
        add: bool,
        abortable_known: bool,
        before_attempt: Callable[[], None] = lambda: None,
    ) -> dict[TopicPartition, ErrorCode]:
        """The error of each partition (NONE: verified or added)."""
        deadline = time.monotonic() + self.settings.retry_max_ms / 1000
        while True:
            before_attempt()
            errors = await self._ask(transactional_id, producer, partitions, add)
            if (
                not add
                or ErrorCode.CONCURRENT_TRANSACTIONS not in errors.values()
                or time.monotonic() >= deadline
            ):
                break
            await self._backoff(transactional_id)
        return {tp: _for_leader(error, abortable_known) for tp, error in errors.items()}

    async def _backoff(self, transactional_id: str) -> None:
        """The pause before the next attempt, cut short by the local coordinator."""
        backoff_s = self.settings.retry_backoff_ms / 1000
        if self.coordinator.leader_of(transactional_id) == self.broker_id:
            await self.coordinator.wait_until_free(transactional_id, backoff_s)
        else:
            await asyncio.sleep(backoff_s)

    async def _ask(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        coordinator = self.coordinator.leader_of(transactional_id)
        if coordinator is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if coordinator == self.broker_id:
            if not add:
                return self.coordinator.verify_partitions(transactional_id, producer, partitions)
            error = await self.coordinator.add_partitions(
                transactional_id, producer, partitions, transaction_version=2
            )
            return dict.fromkeys(partitions, error)
        try:
            return await self._remote(coordinator, transactional_id, producer, partitions, add)
        except CONNECTION_ERRORS as exc:
            log.warning("AddPartitionsToTxn to broker %d failed: %s", coordinator, exc)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)

    async def _remote(
        self,
        broker: int,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, index in partitions:
            by_topic[topic].append(index)
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer.producer_id,
                    producer_epoch=producer.producer_epoch,
                    verify_only=not add,
                    topics=[
                        AddPartitionsToTxnTopic(name=name, partitions=indexes)
                        for name, indexes in by_topic.items()
                    ],
                )
            ]
        )
        response: AddPartitionsToTxnResponse = await self.peers.request(
            broker, request, BROKER_REQUEST_VERSION
        )
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            log.warning("broker %d cannot verify transactions: writing unverified", broker)
            return dict.fromkeys(partitions, ErrorCode.NONE)
        if response.error_code:
            # Kafka hides an authorization failure of the broker itself from the client.
            top = ErrorCode(response.error_code)
            if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                top = ErrorCode.INVALID_TXN_STATE
            return dict.fromkeys(partitions, top)
        errors = dict.fromkeys(partitions, ErrorCode.NONE)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    tp = (topic.name, p.partition_index)
                    if tp in errors:
                        errors[tp] = ErrorCode(p.partition_error_code)
        return errors


def _for_leader(error: ErrorCode, abortable_known: bool) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and not abortable_known:
        return ErrorCode.INVALID_TXN_STATE
    return error
