"""What a handler gets besides the request: its context and the services it may use.

Handlers never see the broker. Each receives a :class:`RequestContext`
whose ``services`` hold one narrow interface per service, written below as
the methods handlers call and nothing more: the replicas of this broker, the
topic administration, the group coordinator, the view of the cluster, the
log directories, the controller, the producer id allocator, the transaction
coordinator and its marker writer, and the current config. The broker
builds one :class:`Services` when it starts and hands it to the listeners;
a unit test builds one of fakes.

Cross-cutting concerns are fields of ``Services`` too, and reach every
handler without any handler reaching through another object to find them:
the authorizer (None when ``authorizer.class.name`` is empty: everything is
allowed, as in Kafka), asked through the ``RequestContext`` methods that put
the request's principal and address into each question, Kafka's ``AuthHelper``;
the ACLs themselves, the users' and clients' configs (quotas, SCRAM
credentials), and the client quota managers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kpybroker.security.acls.authorizer import client_host as acl_host
from kpybroker.security.acls.model import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    supported_operations,
    to_32bit_field,
)
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kpybroker.apis.support.metadata_answers import TopicAnswers
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import LeaderHint
    from kpybroker.cluster.view import BrokerAddress
    from kpybroker.config import BrokerConfig
    from kpybroker.config.describe import ConfigEntry
    from kpybroker.coordinator.interface import Caller
    from kpybroker.log.log_dir_moves import LogDirMove
    from kpybroker.log.partition_log import PartitionLog
    from kpybroker.metadata.entity_configs import Entity
    from kpybroker.metadata.model import TopicMetadata
    from kpybroker.metrics.request_stats import RequestStats
    from kpybroker.metrics.topic_stats import BrokerTopicStats
    from kpybroker.protocol.errors import ErrorCode, KafkaError
    from kpybroker.quotas.quota_managers import QuotaManagers
    from kpybroker.security.acls.acl_store import AclDeleteResult, AclError
    from kpybroker.security.acls.model import AclBinding, AclBindingFilter
    from kpybroker.share_coordinator.persister import PartitionState, ShareKey
    from kpybroker.share_coordinator.share_state import StateAnswer
    from kpybroker.share_partitions.share_partition import Refusal
    from kpybroker.share_partitions.share_partition_manager import Ack, Fetched
    from kpybroker.share_partitions.share_sessions import ShareSession, ShareSessions
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

    def offline_here(self, topic: str) -> frozenset[tuple[int, int]]: ...

    def check_known(self, topic: str, index: int) -> None: ...

    def knows(self, topic: str, index: int) -> bool: ...

    def is_offline(self, topic: str, index: int) -> bool: ...

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
    """The group coordinator (``kpybroker.coordinator.service``): classic, consumer
    (KIP-848) and share (KIP-932) groups, committed offsets."""

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

    def list_groups(
        self, states: Iterable[str], types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[Any]]: ...

    async def consumer_group_heartbeat(self, caller: Caller, request: Any) -> Any: ...

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[Any]: ...

    async def share_group_heartbeat(self, caller: Caller, request: Any) -> Any: ...

    def describe_share_groups(self, group_ids: Iterable[str]) -> list[Any]: ...

    async def describe_share_group_offsets(self, request: Any) -> Any: ...

    async def alter_share_group_offsets(self, group_id: str, topics: list[Any]) -> Any: ...

    async def delete_share_group_offsets(self, group_id: str, topic_names: list[str]) -> Any: ...

    async def delete_groups(self, group_ids: list[str]) -> list[Any]: ...

    def fetch_stable_offsets(self, request: Any) -> Any: ...

    async def commit_transactional_offsets(self, request: Any) -> Any: ...

    async def complete_transaction(
        self, offsets_partition: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode: ...


class SharePartitions(Protocol):
    """The share partitions this broker leads and its share sessions (``SharePartitionManager``)."""

    sessions: ShareSessions

    def lock_duration_ms(self, group_id: str) -> int: ...

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        wanted: Sequence[tuple[ShareKey, str]],
        *,
        max_records: int,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        record_limit: bool = False,
        batch_size: int | None = None,
    ) -> Mapping[ShareKey, Fetched]: ...

    async def acknowledge(
        self, member_id: str, key: ShareKey, topic: str, acks: Sequence[Ack], renew: bool
    ) -> Refusal | None: ...

    def session_ended(self, session: ShareSession) -> None: ...

    def connection_closed(self, connection_id: str) -> None: ...


class ShareState(Protocol):
    """The share coordinator (``kpybroker.share_coordinator.service``): the state of the
    share partitions whose ``__share_group_state`` partition this broker leads, by key."""

    async def find_coordinator(self, coordinator_key: str) -> tuple[ErrorCode, int]: ...

    async def initialize(
        self, key: ShareKey, state_epoch: int, start_offset: int
    ) -> StateAnswer: ...

    async def read(self, key: ShareKey, leader_epoch: int) -> StateAnswer: ...

    async def write(self, key: ShareKey, state: PartitionState) -> StateAnswer: ...

    async def read_summary(self, key: ShareKey, leader_epoch: int) -> StateAnswer: ...

    async def delete(self, key: ShareKey) -> StateAnswer: ...


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

    def group_config(self, group_id: str) -> dict[str, str]: ...

    def configured_groups(self) -> list[str]: ...

    async def set_topic_config(self, topic: str, configs: Mapping[str, str]) -> None: ...

    async def set_group_config(self, group_id: str, configs: Mapping[str, str]) -> None: ...

    async def set_broker_config(
        self, broker_id: int | None, configs: Mapping[str, str]
    ) -> None: ...


class LogDirs(Protocol):
    """The log directories and the partition logs in them (``LogManager``)."""

    log_dirs: Sequence[Path]

    @property
    def online_dirs(self) -> Sequence[Path]: ...

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]: ...

    def log_dir_of(self, topic: str, partition: int) -> Path | None: ...

    async def save_log_start_offsets(self) -> None: ...

    def find_log_dir(self, path: str) -> Path | None: ...

    def move_to(self, topic: str, partition: int, log_dir: Path) -> bool: ...

    def future_logs(self) -> Iterator[tuple[TopicPartition, Path, LogDirMove]]: ...


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


class Authorizer(Protocol):
    """The ACL authorizer (``security.acls.authorizer.AclAuthorizer``)."""

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool: ...

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool: ...

    def authorized_operations_field(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int: ...

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...


class AclAdmin(Protocol):
    """Creating and deleting ACLs, in the metadata store (``security.acls.acl_store``)."""

    async def create(self, bindings: Sequence[AclBinding]) -> list[AclError | None]: ...

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]: ...


class EntityConfigStore(Protocol):
    """The configs of users, client ids and addresses (``metadata.entity_configs``)."""

    def configs(self, entity: Entity) -> Mapping[str, str]: ...

    def __iter__(self) -> Iterator[tuple[Entity, Mapping[str, str]]]: ...

    async def alter(self, entity: Entity, changes: Mapping[str, str | None]) -> None: ...


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
    entity_configs: EntityConfigStore
    quotas: QuotaManagers
    share_partitions: SharePartitions
    share_state: ShareState
    #: Kafka's BrokerTopicMetrics, which Produce and Fetch add to per partition.
    topic_stats: BrokerTopicStats
    #: Kafka's RequestMetrics, which dispatch adds to per request.
    request_stats: RequestStats
    #: None: no ``authorizer.class.name``, every request is allowed.
    authorizer: Authorizer | None = None
    #: None exactly when ``authorizer`` is: the ACL APIs answer SECURITY_DISABLED.
    acls: AclAdmin | None = None


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    services: Services
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    listener: str
    #: Who the request acts as: ``User:ANONYMOUS`` until TLS or SASL says otherwise.
    principal: KafkaPrincipal = ANONYMOUS
    #: The API's name (``Produce``), for messages.
    api_name: str = ""
    #: The request's size in bytes (header and body), which byte-rate quotas count.
    request_size: int = 0
    #: The connection it came on (local and remote address), as Kafka names connections.
    connection_id: str = ""

    # -- authorization (Kafka's AuthHelper) ------------------------------------------

    def authorize(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """May this request's principal, from its address, do ``operation`` on the resource?"""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize(
            self.principal,
            acl_host(self.client_host),
            operation,
            resource_type,
            name,
            log_if_denied=log_if_denied,
        )

    def authorize_cluster(self, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
        return self.authorize(
            operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied
        )

    def cluster_denial_message(self, operation: AclOperation) -> str:
        """The message of Kafka's ``authorizeClusterOperation`` refusal, which the admin
        APIs answered by the controller carry ("Request ... needs ALTER permission."); Kafka
        prints its whole internal request there, kpybroker the API and the principal."""
        return (
            f"Request {self.api_name}(principal={self.principal}, clientId={self.client_id}) "
            f"needs {operation.name} permission."
        )

    def authorized_names(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_if_denied: bool = True,
    ) -> set[str]:
        """The names among ``names`` the principal may act on (Kafka's filterByAuthorized:
        one question per distinct name)."""
        distinct = set(names)
        if self.services.authorizer is None:
            return distinct
        return {
            name
            for name in distinct
            if self.authorize(operation, resource_type, name, log_if_denied=log_if_denied)
        }

    def authorize_by_resource_type(
        self, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do ``operation`` on some resource of this type?"""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(
            self.principal, acl_host(self.client_host), operation, resource_type
        )

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The 32-bit field of what the principal may do on the resource (every supported
        operation without an authorizer)."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return to_32bit_field(supported_operations(resource_type))
        return authorizer.authorized_operations_field(
            self.principal, acl_host(self.client_host), resource_type, name
        )
