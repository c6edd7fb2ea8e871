"""What a handler gets besides the request: its context and the services it may use.

Handlers never see the broker. Each receives a :class:`RequestContext`
whose ``services`` hold one narrow interface per service, written below as
the methods handlers call and nothing more: the replicas of this broker, the
topic administration, the group coordinator, the view of the cluster, the
log directories, the controller, the producer id allocator, the transaction
coordinator and its marker writer, and the current config. The broker
builds one :class:`Services` when it starts and hands it to the listeners;
a unit test builds one of fakes.

Cross-cutting concerns that are coming (the authorizer, the quota manager)
are added here, as further fields of
``Services``, and reach every handler without any handler reaching through
another object to find them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kpybroker.apis.support.metadata_answers import TopicAnswers
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import LeaderHint
    from kpybroker.cluster.view import BrokerAddress
    from kpybroker.config import BrokerConfig
    from kpybroker.config.describe import ConfigEntry
    from kpybroker.coordinator.interface import Caller
    from kpybroker.log.partition_log import PartitionLog
    from kpybroker.metadata.model import TopicMetadata
    from kpybroker.protocol.errors import ErrorCode, KafkaError
    from kpybroker.topic_admin import Topic
    from kpybroker.transaction_coordinator.shard import (
        EndResult,
        InitResult,
        ListFilter,
        ProducerIdAndEpoch,
    )
    from kpybroker.transaction_coordinator.transaction_state import TransactionMetadata

TopicPartition = tuple[str, int]


class Replicas(Protocol):
    """The partitions this broker holds a replica of (``ReplicaManager``)."""

    def partition_for(
        self, topic: str, index: int, current_leader_epoch: int = -1, *, require_leader: bool = True
    ) -> Partition: ...

    def leader_partition(self, topic: str, index: int) -> Partition: ...

    def leader_hint(self, topic: str, index: int) -> LeaderHint: ...

    def check_known(self, topic: str, index: int) -> None: ...

    def knows(self, topic: str, index: int) -> bool: ...

    def topic_name(self, topic_id: bytes) -> str | None: ...

    async def wait_for_append(
        self,
        partitions: Iterable[Partition],
        timeout: float,
        *,
        for_follower: bool = False,
        and_high_watermark: bool = False,
    ) -> bool: ...


class TopicAdmin(Protocol):
    """Creating, growing, deleting and finding topics (``kpybroker.topic_admin``)."""

    def all(self) -> list[Topic]: ...

    def get(self, name: str) -> Topic | None: ...

    def by_id(self, topic_id: bytes) -> Topic | None: ...

    async def create(
        self,
        name: str,
        *,
        num_partitions: int,
        replication_factor: int,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> Topic: ...

    async def auto_create(self, name: str) -> Topic: ...

    async def add_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None: ...

    async def delete(self, name: str) -> bytes: ...

    def describe_configs(self, topic: Topic) -> list[ConfigEntry]: ...


class Groups(Protocol):
    """The classic group coordinator (``kpybroker.coordinator.service``)."""

    async def ensure_offsets_topic(self) -> None: ...

    async def find_coordinator(self, group_id: str) -> tuple[ErrorCode, int]: ...

    def partition_for(self, group_id: str) -> int: ...

    async def join_group(self, caller: Caller, request: Any) -> Any: ...

    async def sync_group(self, request: Any) -> Any: ...

    async def heartbeat(self, request: Any) -> Any: ...

    async def leave_group(self, group_id: str, members: list[Any]) -> Any: ...

    async def commit_offsets(self, caller: Caller, request: Any) -> Any: ...

    def fetch_offsets(self, request: Any) -> Any: ...

    async def delete_offsets(self, request: Any) -> Any: ...

    def describe_groups(self, group_ids: Iterable[str]) -> list[Any]: ...

    def list_groups(self, states: Iterable[str]) -> tuple[ErrorCode, list[Any]]: ...

    async def delete_groups(self, group_ids: list[str]) -> list[Any]: ...

    def fetch_stable_offsets(self, request: Any) -> Any: ...

    async def commit_transactional_offsets(self, request: Any) -> Any: ...

    async def complete_transaction(
        self, offsets_partition: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode: ...


class ClusterView(Protocol):
    """The cluster as the metadata shows it, and its stored configs (``cluster.view``)."""

    broker_id: int
    cluster_id: str

    def topics(self) -> Mapping[str, TopicMetadata]: ...

    def live_broker_ids(self) -> set[int]: ...

    def live_brokers(self, listener: str) -> list[BrokerAddress]: ...

    def controller_id(self) -> int: ...

    def topic_overrides(self, topic: str) -> dict[str, str]: ...

    def broker_config(self, broker_id: int | None) -> dict[str, str]: ...

    async def set_topic_config(self, topic: str, configs: Mapping[str, str]) -> None: ...

    async def set_broker_config(
        self, broker_id: int | None, configs: Mapping[str, str]
    ) -> None: ...


class LogDirs(Protocol):
    """The log directories and the partition logs in them (``LogManager``)."""

    log_dirs: Sequence[Path]

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]: ...

    def log_dir_of(self, topic: str, partition: int) -> Path | None: ...

    def checkpoint_log_start_offsets(self) -> None: ...


class Elections(Protocol):
    """What the controller does on request (``Controller``); NotControllerError elsewhere."""

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition], unclean: bool
    ) -> dict[TopicPartition, KafkaError | None]: ...

    async def reassign(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, KafkaError | None]: ...


class ProducerIds(Protocol):
    async def next_id(self) -> int: ...


class Transactions(Protocol):
    """The transaction coordinator (``kpybroker.transaction_coordinator.service``)."""

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, int]: ...

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: ProducerIdAndEpoch | None
    ) -> InitResult: ...

    async def add_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        transaction_version: int = 1,
    ) -> ErrorCode: ...

    def verify_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]: ...

    async def end_txn(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        transaction_version: int = 1,
    ) -> EndResult: ...

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]: ...

    def list_transactions(
        self, wanted: ListFilter
    ) -> tuple[ErrorCode, list[TransactionMetadata]]: ...


class TxnVerifier(Protocol):
    """Asking a transaction's coordinator about a first transactional write (KIP-890;
    ``transaction_coordinator.partition_verifier``)."""

    async def add_or_verify(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        *,
        add: bool,
        abortable_known: bool,
        before_attempt: Callable[[], None] = ...,
    ) -> dict[TopicPartition, ErrorCode]: ...


class TxnMarkers(Protocol):
    """Writing end markers to led partitions (``transaction_coordinator.marker_writer``)."""

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]: ...


@dataclass(frozen=True, slots=True)
class Services:
    """Everything a handler may use, one narrow interface each; built once by the broker."""

    replicas: Replicas
    topics: TopicAdmin
    groups: Groups
    cluster: ClusterView
    logs: LogDirs
    controller: Elections
    producer_ids: ProducerIds
    transactions: Transactions
    txn_markers: TxnMarkers
    txn_verifier: TxnVerifier
    #: The current broker config: dynamic changes replace it, so it is read at each use.
    config: Callable[[], BrokerConfig]
    metadata_answers: TopicAnswers


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    services: Services
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    listener: str
