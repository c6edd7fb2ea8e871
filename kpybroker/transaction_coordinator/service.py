"""The transaction coordinator as the API handlers see it (Kafka's ``TransactionCoordinator``).

Each method applies Kafka's request-level checks (an empty transactional id
is INVALID_REQUEST, a timeout above ``transaction.max.timeout.ms`` is
INVALID_TRANSACTION_TIMEOUT), routes the id to the shard of its
``__transaction_state`` partition and turns routing failures (not the
coordinator, still loading) into the error the API answers. Version-specific
error mapping (PRODUCER_FENCED for old clients) stays in the handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, TypeVar

from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.transaction_coordinator.effects import Effects, Token
from kpybroker.transaction_coordinator.marker_channel import MarkerChannel
from kpybroker.transaction_coordinator.marker_writer import TxnMarkerWriter
from kpybroker.transaction_coordinator.runtime import TransactionRuntime
from kpybroker.transaction_coordinator.shard import (
    EndResult,
    InitResult,
    ListFilter,
    ProducerIdAndEpoch,
    TransactionShard,
)
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings
from kpybroker.transaction_coordinator.transaction_state import (
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
)

if TYPE_CHECKING:
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.producer_ids import ProducerIdManager
    from kpybroker.topic_admin import TopicManager

R = TypeVar("R")


class TransactionCoordinator:
    def __init__(
        self,
        settings: TransactionSettings,
        broker_id: int,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
        producer_ids: ProducerIdManager,
        markers: TxnMarkerWriter,
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        self.topics = topics
        self.producer_ids = producer_ids
        channel = MarkerChannel(
            broker_id,
            cluster.topics,
            replicas.inter_broker_address,
            markers,
            request_timeout_ms=settings.append_timeout_ms,
            retry_backoff_ms=settings.marker_retry_backoff_ms,
        )
        self.runtime = TransactionRuntime(settings, cluster, replicas, topics, channel)

    async def start(self) -> None:
        await self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    async def _call(
        self,
        transactional_id: str,
        event: Callable[[TransactionShard, Token], Effects],
        on_error: Callable[[ErrorCode], R],
    ) -> R:
        try:
            shard = self.runtime.shard_for(transactional_id)
            return await self.runtime.call(shard, lambda token: event(shard, token))
        except KafkaError as exc:
            return on_error(exc.code)

    # -- FindCoordinator ---------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the leader of the id's partition, creating the topic first."""
        return await self.runtime.coordinator_of(transactional_id)

    def leader_of(self, transactional_id: str) -> int | None:
        """The live broker leading the id's partition of ``__transaction_state``, if any
        (without creating the topic: with no topic there is no transaction to verify)."""
        return self.runtime.leader_of(transactional_id)

    # -- the producer's requests --------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: ProducerIdAndEpoch | None
    ) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        try:
            shard = self.runtime.shard_for(transactional_id)
        except KafkaError as exc:
            return InitResult(exc.code)
        fresh = None
        if shard.needs_producer_id(transactional_id):
            fresh = await self.producer_ids.next_id()
        return await self._call(
            transactional_id,
            lambda s, token: s.init_producer_id(
                token, transactional_id, timeout_ms, expected, fresh
            ),
            InitResult,
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        transaction_version: int = 1,
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        return await self._call(
            transactional_id,
            lambda s, token: s.add_partitions(
                token, transactional_id, producer, partitions, transaction_version
            ),
            lambda error: error,
        )

    async def wait_until_free(self, transactional_id: str, timeout_s: float) -> None:
        """See ``TransactionRuntime.wait_until_free``."""
        await self.runtime.wait_until_free(transactional_id, timeout_s)

    def verify_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.INVALID_REQUEST)
        try:
            shard = self.runtime.shard_for(transactional_id)
        except KafkaError as exc:
            return dict.fromkeys(partitions, exc.code)
        return shard.verify_partitions(transactional_id, producer, partitions)

    async def end_txn(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        transaction_version: int = 1,
    ) -> EndResult:
        """Version 2 bumps the epoch; a fresh producer id is claimed first if that exhausts
        it, as for InitProducerId."""
        if not transactional_id:
            return EndResult(ErrorCode.INVALID_REQUEST)
        try:
            shard = self.runtime.shard_for(transactional_id)
        except KafkaError as exc:
            return EndResult(exc.code)
        next_id = NO_PRODUCER_ID
        if shard.needs_next_producer_id(transactional_id, transaction_version):
            next_id = await self.producer_ids.next_id()
        return await self._call(
            transactional_id,
            lambda s, token: s.end_txn(
                token, transactional_id, producer, commit, transaction_version, next_id
            ),
            EndResult,
        )

    # -- administration ---------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not self.runtime.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        try:
            shard = self.runtime.shard_for(transactional_id)
        except KafkaError as exc:
            return exc.code, None
        txn = shard.describe(transactional_id)
        if txn is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, txn

    def list_transactions(self, wanted: ListFilter) -> tuple[ErrorCode, list[TransactionMetadata]]:
        """Every matching id of every loaded shard; LOAD_IN_PROGRESS while one loads."""
        if not self.runtime.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if self.runtime.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        found: Iterable[TransactionMetadata] = (
            txn for shard in self.runtime.shards.values() for txn in shard.list_transactions(wanted)
        )
        return ErrorCode.NONE, list(found)
