"""Fakes of the services a request handler uses, for handler unit tests.

Each fake implements the narrow interface of ``kpybroker.apis.support.context``
with plain data: no broker, no socket, no metadata store, no log files. A
test builds :func:`services` with what it needs, calls a handler through
:func:`call`, and looks at the response and at what the fakes were asked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kpybroker.apis import all_apis
from kpybroker.apis.support.context import RequestContext, Services
from kpybroker.apis.support.metadata_answers import TopicAnswers
from kpybroker.cluster.replica_manager import LeaderHint
from kpybroker.cluster.view import BrokerAddress
from kpybroker.config import BrokerConfig
from kpybroker.metadata.entity_configs import Entity
from kpybroker.metadata.model import PartitionMetadata, PartitionState, TopicMetadata
from kpybroker.metrics.request_stats import RequestStats
from kpybroker.metrics.topic_stats import BrokerTopicStats
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.quotas.quota_managers import QuotaManagers
from kpybroker.quotas.settings import QuotaSettings
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal
from kpybroker.share_partitions.share_partition_manager import SharePartitionManager
from kpybroker.share_partitions.share_settings import share_group_settings
from kpybroker.topic_admin import Topic
from tests.helpers.memory_persister import MemoryPersister

BROKER_ID = 0
LISTENER = "PLAINTEXT"


@dataclass
class FakeLog:
    log_start_offset: int = 0
    log_end_offset: int = 0


@dataclass
class FakePartition:
    """A led partition holding ``records`` (bytes) below ``high_watermark``; ``lso`` is its
    last stable offset (default: the high watermark) and ``aborted`` the aborted
    transactions a read_committed fetch is told about."""

    records: bytes = b""
    high_watermark: int = 0
    leader_epoch: int = 0
    log: FakeLog = field(default_factory=FakeLog)
    reads: list[tuple[int, int]] = field(default_factory=list)
    lso: int | None = None
    aborted: list[Any] = field(default_factory=list)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark if self.lso is None else self.lso

    def read_records(
        self, offset: int, limit: int, min_one: bool, *, for_follower: bool, committed: bool = False
    ) -> bytes:
        self.reads.append((offset, limit))
        if offset > self.high_watermark or offset < self.log.log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
        end = self.last_stable_offset if committed else self.high_watermark
        return self.records if offset < end else b""

    def aborted_transactions(self, fetch_offset: int, records: bytes) -> list[Any]:
        return self.aborted if records else []

    def update_follower(self, replica_id: int, offset: int) -> None:
        pass

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch, self.high_watermark

    def check_leader_epoch(self, epoch: int) -> None:
        if epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if 0 <= epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)


class FakeReplicas:
    """This broker's replicas: ``partitions`` it leads; ``elsewhere`` the cluster has."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], FakePartition] = {}
        self.elsewhere: set[tuple[str, int]] = set()
        self.ids: dict[bytes, str] = {}
        self.offline: set[tuple[str, int]] = set()

    def knows(self, topic: str, index: int) -> bool:
        return (topic, index) in self.partitions or (topic, index) in self.elsewhere

    def is_offline(self, topic: str, index: int) -> bool:
        return (topic, index) in self.offline

    def check_known(self, topic: str, index: int) -> None:
        if not self.knows(topic, index):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def partition_for(
        self, topic: str, index: int, current_leader_epoch: int = -1, *, require_leader: bool = True
    ) -> FakePartition:
        self.check_known(topic, index)
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        partition.check_leader_epoch(current_leader_epoch)
        return partition

    def leader_partition(self, topic: str, index: int) -> FakePartition:
        return self.partition_for(topic, index)

    def leader_hint(self, topic: str, index: int) -> LeaderHint:
        return LeaderHint(1, 5)

    def offline_here(self, topic: str) -> frozenset[tuple[int, int]]:
        return frozenset()

    def topic_name(self, topic_id: bytes) -> str | None:
        return self.ids.get(topic_id)

    async def wait_for_append(self, partitions: Any, timeout: float, **_: Any) -> bool:
        return False


def topic_of(name: str, partitions: int = 1, leader: int = BROKER_ID) -> Topic:
    """A topic whose partitions have one replica, led by ``leader``."""
    return Topic(
        TopicMetadata(
            name,
            uuid.uuid4(),
            MappingProxyType(
                {
                    p: PartitionMetadata(p, (leader,), PartitionState(leader, 0, (leader,), 1), 0)
                    for p in range(partitions)
                }
            ),
            {},
        )
    )


class FakeTopics:
    """Topics by name; ``created`` and ``deleted`` record what handlers asked for."""

    def __init__(self, *topics: Topic) -> None:
        self.topics = {t.name: t for t in topics}
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.deleted: list[str] = []
        self.refuse: dict[str, KafkaError] = {}

    def all(self) -> list[Topic]:
        return list(self.topics.values())

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: bytes) -> Topic | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def partitions_asked(self, num_partitions: int, assignments: int) -> int:
        return assignments or (1 if num_partitions == -1 else max(num_partitions, 0))

    async def create(self, name: str, **kwargs: Any) -> Topic:
        if name in self.refuse:
            raise self.refuse[name]
        self.created.append((name, kwargs))
        topic = topic_of(name, max(kwargs.get("num_partitions", 1), 1))
        if not kwargs.get("validate_only"):
            self.topics[name] = topic
        return topic

    async def auto_create(self, name: str) -> Topic:
        return await self.create(name, num_partitions=1, replication_factor=1)

    async def add_partitions(self, name: str, count: int, *args: Any, **kwargs: Any) -> None:
        if name in self.refuse:
            raise self.refuse[name]

    async def delete(self, name: str) -> bytes:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError.with_default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self.deleted.append(name)
        return topic.topic_id

    def describe_configs(self, topic: Topic) -> list[Any]:
        return []


class FakeGroups:
    """A group coordinator that records every call and answers with ``answers[method]``."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, method: str) -> Any:
        if method.startswith("__"):
            raise AttributeError(method)

        def called(*args: Any) -> Any:
            self.calls.append((method, args))
            answer = self.answers.get(method)
            if asyncio.iscoroutinefunction(answer):
                return answer(*args)
            return answer(*args) if callable(answer) else answer

        return called


class FakeTransactions(FakeGroups):
    """A transaction coordinator that records every call and answers with ``answers[method]``."""


class FakeShareState(FakeGroups):
    """A share coordinator that records every call and answers with ``answers[method]``
    (every method a coroutine, as the coordinator's are)."""

    def __getattr__(self, method: str) -> Any:
        called = super().__getattr__(method)

        async def answered(*args: Any) -> Any:
            answer = called(*args)
            return await answer if asyncio.iscoroutine(answer) else answer

        return answered


class FakeVerifier:
    """KIP-890 verification answering ``error`` for every partition; records each question
    as (transactional id, partitions, add)."""

    def __init__(self, error: ErrorCode = ErrorCode.NONE) -> None:
        self.error = error
        self.asked: list[tuple[str, list[tuple[str, int]], bool]] = []

    async def add_or_verify(
        self,
        transactional_id: str,
        producer: Any,
        partitions: Any,
        *,
        add: bool,
        abortable_known: bool,
        before_attempt: Any = lambda: None,
    ) -> dict[tuple[str, int], ErrorCode]:
        before_attempt()
        self.asked.append((transactional_id, list(partitions), add))
        return dict.fromkeys(partitions, self.error)


class FakeCluster:
    """The cluster view: this broker alone unless ``brokers`` says otherwise."""

    def __init__(self, topics: FakeTopics, brokers: dict[int, int] | None = None) -> None:
        self.broker_id = BROKER_ID
        self.cluster_id = "fake-cluster-id-000000"
        self._topics = topics
        self.brokers = {BROKER_ID: 9092} if brokers is None else brokers
        self.stored: dict[Any, dict[str, str]] = {}

    def topics(self) -> dict[str, TopicMetadata]:
        return {name: t.meta for name, t in self._topics.topics.items()}

    def live_broker_ids(self) -> set[int]:
        return set(self.brokers)

    def live_brokers(self, listener: str) -> list[BrokerAddress]:
        return [
            BrokerAddress(b, "127.0.0.1", port, None) for b, port in sorted(self.brokers.items())
        ]

    def controller_id(self) -> int:
        return BROKER_ID

    def topic_overrides(self, topic: str) -> dict[str, str]:
        return dict(self.stored.get(topic, {}))

    def broker_config(self, broker_id: int | None) -> dict[str, str]:
        return dict(self.stored.get(("broker", broker_id), {}))

    async def set_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        self.stored[topic] = dict(configs)

    async def set_broker_config(self, broker_id: int | None, configs: dict[str, str]) -> None:
        self.stored[("broker", broker_id)] = dict(configs)

    def group_config(self, group_id: str) -> dict[str, str]:
        return dict(self.stored.get(("group", group_id), {}))

    def configured_groups(self) -> list[str]:
        return [
            key[1]
            for key, configs in self.stored.items()
            if isinstance(key, tuple) and key[0] == "group" and configs
        ]

    async def set_group_config(self, group_id: str, configs: dict[str, str]) -> None:
        self.stored[("group", group_id)] = dict(configs)


class FakeLogs:
    def __init__(self, log_dir: Path) -> None:
        self.log_dirs = [log_dir]
        self.online_dirs = self.log_dirs
        self.logs: dict[tuple[str, int], Any] = {}

    def __iter__(self) -> Iterator[tuple[tuple[str, int], Any]]:
        return iter(self.logs.items())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self.log_dirs[0] if (topic, partition) in self.logs else None

    async def save_log_start_offsets(self) -> None:
        pass

    def future_logs(self) -> Iterator[tuple[tuple[str, int], Path, Any]]:
        return iter(())


class FakeProducerIds:
    def __init__(self) -> None:
        self.next = 1000

    async def next_id(self) -> int:
        self.next += 1
        return self.next - 1


class FakeEntityConfigs:
    """Users', client ids' and addresses' configs in a dict."""

    def __init__(self) -> None:
        self.entities: dict[Entity, dict[str, str]] = {}

    def configs(self, entity: Entity) -> Mapping[str, str]:
        return MappingProxyType(self.entities.get(entity, {}))

    def __iter__(self) -> Iterator[tuple[Entity, Mapping[str, str]]]:
        return iter(list(self.entities.items()))

    async def alter(self, entity: Entity, changes: Mapping[str, str | None]) -> None:
        configs = self.entities.setdefault(entity, {})
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = value


def services(
    *,
    topics: FakeTopics | None = None,
    replicas: FakeReplicas | None = None,
    groups: FakeGroups | None = None,
    controller: Any = None,
    transactions: Any = None,
    txn_markers: Any = None,
    txn_verifier: Any = None,
    log_dir: Path = Path("/nonexistent"),
    config: dict[str, str] | None = None,
    authorizer: AclAuthorizer | None = None,
    acls: Any = None,
    entity_configs: FakeEntityConfigs | None = None,
    share_partitions: Any = None,
    share_state: Any = None,
) -> Services:
    """Services of fakes, with a broker config of ``config`` over the defaults.

    ``authorizer``: a real ``AclAuthorizer`` to decide (None: everything is allowed)."""
    topics = topics or FakeTopics()
    settings = BrokerConfig(config or {})
    replicas = replicas or FakeReplicas()
    if share_partitions is None:
        share_partitions = SharePartitionManager(
            replicas,  # type: ignore[arg-type]
            MemoryPersister(),
            lambda group_id: share_group_settings(settings, {}),
            max_sessions=2000,
        )
    return Services(
        replicas=replicas,
        topics=topics,
        groups=groups or FakeGroups(),
        cluster=FakeCluster(topics),
        logs=FakeLogs(log_dir),
        controller=controller,
        producer_ids=FakeProducerIds(),
        transactions=transactions,
        txn_markers=txn_markers,
        txn_verifier=txn_verifier or FakeVerifier(),
        config=lambda: settings,
        metadata_answers=TopicAnswers(),
        entity_configs=entity_configs or FakeEntityConfigs(),
        quotas=QuotaManagers.from_settings(QuotaSettings.from_config(settings)),
        share_partitions=share_partitions,
        share_state=share_state or FakeShareState(),
        topic_stats=BrokerTopicStats(lambda: {t.name for t in topics.all()}),
        request_stats=RequestStats(),
        authorizer=authorizer,
        acls=acls,
    )


def call(
    services_: Services, request: Any, version: int, principal: KafkaPrincipal = ANONYMOUS
) -> Any:
    """Run the handler registered for ``request``'s API at ``version``, as dispatch does,
    and return the response as the client decodes it (None when there is no answer)."""
    spec = next(s for s in all_apis().values() if isinstance(request, s.request_class))
    assert spec.accepts(version), f"{spec.name} v{version} is not served"
    ctx = RequestContext(
        services_,
        version,
        7,
        "unit-test",
        "127.0.0.1",
        LISTENER,
        principal=principal,
        api_name=spec.name,
    )
    result: Awaitable[Any] = spec.handler(ctx, request)
    response = asyncio.run(result)
    if response is None:
        return None
    wire = b"".join(bytes(part) for part in response.encode(version))
    decoded, _ = spec.response_class.decode(wire, 0, version)
    return decoded
