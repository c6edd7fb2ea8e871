"""Topic administration: Kafka's rules for creating and deleting topics.

The checks and their messages are Kafka's (``Topic.validate``,
``ReplicationControlManager.createTopic``), in Kafka's order, so that an
admin client sees the same error for the same mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kpybroker.cluster.assignment import assign_replicas
from kpybroker.config import validate_topic_configs
from kpybroker.config.describe import ConfigEntry, topic_config_entries
from kpybroker.metadata.model import (
    PartitionMetadata,
    TopicMetadata,
    UnknownTopicError,
    random_uuid,
)
from kpybroker.metadata.topic_names import (
    INTERNAL_TOPICS,
    validate_no_collision,
    validate_topic_name,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.config import BrokerConfig
    from kpybroker.metadata.cluster_metadata import ClusterMetadata

#: How long a creation waits for this broker's new logs when the request gives no
#: timeout (Kafka's CreateTopics default timeout_ms).
DEFAULT_TIMEOUT_MS = 30_000

#: Kafka 4's controller refuses, before anything else, a CreateTopics asking for more
#: partitions than this in all (``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``)...
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
#: (and a CreatePartitions adding more than that to its existing topics)
TOO_MANY_ADDED = "Excessively large number of additional partitions per request."
#: ...and any change whose metadata records would outgrow one bounded batch
#: (``QuorumController.MAX_RECORDS_PER_USER_OP``): a record per new topic, per new
#: partition and per config set. Both answer POLICY_VIOLATION to every topic asked for.
MAX_RECORDS_PER_REQUEST = 10_000
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic as handlers see it: the cached metadata plus what follows from it."""

    meta: TopicMetadata

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def topic_id(self) -> bytes:
        return self.meta.topic_id.bytes

    @property
    def partitions(self) -> Mapping[int, PartitionMetadata]:
        return self.meta.partitions

    @property
    def configs(self) -> Mapping[str, str]:
        return self.meta.configs

    @property
    def is_internal(self) -> bool:
        return self.meta.name in INTERNAL_TOPICS

    @property
    def replication_factor(self) -> int:
        first = self.meta.partitions.get(0)
        return len(first.replicas) if first else 0


def check_replica_list(replicas: list[int], live: list[int]) -> None:
    """One partition's manual assignment: not empty, no broker twice, every broker known."""
    if not replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(replicas)) != len(replicas):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes the broker {replicas} more than once.",
        )
    unknown = [b for b in replicas if b not in live]
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes broker {unknown[0]}, but no such broker "
            "is registered.",
        )


class TopicManager:
    """Topics as the cluster metadata holds them, and Kafka's rules for changing them.

    ``config`` returns the broker config in force (dynamic changes replace it).
    """

    def __init__(
        self,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        config: Callable[[], BrokerConfig],
    ) -> None:
        self.cluster = cluster
        self.replicas = replicas
        self.config = config

    def all(self) -> list[Topic]:
        return [Topic(meta) for meta in self.cluster.topics().values()]

    def get(self, name: str) -> Topic | None:
        meta = self.cluster.topics().get(name)
        return None if meta is None else Topic(meta)

    def by_id(self, topic_id: bytes) -> Topic | None:
        name = self.replicas.topic_name(topic_id)
        return None if name is None else self.get(name)

    def check_new_name(self, name: str) -> None:
        validate_topic_name(name)
        if name in self.cluster.topics():
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        validate_no_collision(name, self.cluster.topics())

    def partitions_asked(self, num_partitions: int, assignments: int) -> int:
        """The partitions a CreateTopics topic asks for, as Kafka counts them against
        ``MAX_PARTITIONS_PER_REQUEST``: its assignments, else its count (-1: the default)."""
        if assignments:
            return assignments
        if num_partitions == -1:
            return self.config().get("num.partitions")
        return max(num_partitions, 0)

    def plan_assignment(
        self, num_partitions: int, replication_factor: int, assignments: dict[int, list[int]]
    ) -> dict[int, list[int]]:
        config = self.config()
        live = sorted(self.cluster.live_brokers())
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            return self.check_assignment(assignments, live)
        if num_partitions == -1:
            num_partitions = config.get("num.partitions")
        if num_partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        if replication_factor == -1:
            replication_factor = config.get("default.replication.factor")
        if replication_factor <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        return self.spread(num_partitions, replication_factor)

    def spread(
        self, partitions: int, replication_factor: int, first_partition: int = 0
    ) -> dict[int, list[int]]:
        """Replicas for new partitions across the live brokers and their racks; a replication
        factor above the live broker count is INVALID_REPLICATION_FACTOR, as in Kafka."""
        racks = {broker: reg.rack for broker, reg in self.cluster.live_brokers().items()}
        if replication_factor > len(racks):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{len(racks)} broker(s) are registered.",
            )
        return assign_replicas(racks, partitions, replication_factor, first_partition)

    @staticmethod
    def check_assignment(
        assignments: dict[int, list[int]], live: list[int]
    ) -> dict[int, list[int]]:
        if sorted(assignments) != list(range(len(assignments))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence, but got "
                f"{sorted(assignments)}.",
            )
        sizes = {len(r) for r in assignments.values()}
        for replicas in assignments.values():
            check_replica_list(replicas, live)
        if len(sizes) > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "All partitions in the manual partition assignment must have the same number "
                "of replicas.",
            )
        return assignments

    async def create(
        self,
        name: str,
        *,
        num_partitions: int,
        replication_factor: int,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str | None] | None = None,
        validate_only: bool = False,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> Topic:
        """Create a topic: its metadata as one unit, then this broker's logs.

        As Kafka's CreateTopics, the answer waits up to ``timeout_ms`` (none when 0 or
        less) for the new partitions to be served, here for this broker's logs of them,
        which are made off the event loop; then REQUEST_TIMED_OUT, the topic existing.
        """
        self.check_new_name(name)
        plan = self.plan_assignment(num_partitions, replication_factor, assignments or {})
        configs = configs or {}
        validate_topic_configs(configs, self.config())
        if validate_only:
            # With a fresh id, as Kafka's controller answers a validate-only creation.
            fake = TopicMetadata(
                name=name,
                topic_id=random_uuid(),
                partitions={p: PartitionMetadata(p, tuple(r)) for p, r in plan.items()},
                configs=dict(configs),
            )
            return Topic(fake)
        await self.cluster.create_topic(name, plan, configs)
        self.replicas.apply_topic(name)
        await self.wait_hosted(name, plan, timeout_ms)
        return self.get(name)

    async def wait_hosted(self, name: str, partitions: Iterable[int], timeout_ms: int) -> None:
        if timeout_ms > 0 and not await self.replicas.wait_hosted(
            name, partitions, timeout_ms / 1000
        ):
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"Topic {name} was created, but not all its partitions were ready within "
                f"{timeout_ms} ms.",
            )

    async def auto_create(self, name: str) -> Topic:
        """Create a topic a client asked for by name, with the broker's defaults.

        (``__consumer_offsets`` is the group coordinator's to create, with its
        offsets.topic.* settings: the Metadata handler asks it instead.)

        A topic that another request is creating (many clients asking for the same new
        topic at once) may exist without being visible yet: LEADER_NOT_AVAILABLE, which
        Kafka answers for a topic whose creation is under way and clients retry on.
        """
        try:
            topic = await self.create(name, num_partitions=-1, replication_factor=-1)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            topic = self.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE)
        return topic

    async def add_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        """Grow a topic to ``count`` partitions (CreatePartitions), with Kafka's checks.

        New partitions get the topic's replication factor; without ``assignments``
        their replicas are spread as at creation. Partitions are never removed. The
        addition is written as one unit; the answer waits for the logs as ``create``.
        """
        topic = self.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        current = len(topic.partitions)
        if count == current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
            )
        if count < current:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {current} partition(s); {count} would not "
                "be an increase.",
            )
        additional = count - current
        live = sorted(self.cluster.live_brokers())
        factor = topic.replication_factor
        if assignments is None:
            plan = self.spread(additional, factor, first_partition=current)
        else:
            if len(assignments) != additional:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {additional} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            for replicas in assignments:
                check_replica_list(replicas, live)
                if len(replicas) != factor:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        "The manual partition assignment includes a partition with "
                        f"{len(replicas)} replica(s), but this is not consistent with previous "
                        f"partitions, which have {factor} replica(s).",
                    )
            plan = {current + i: replicas for i, replicas in enumerate(assignments)}
        if not validate_only:
            try:
                await self.cluster.add_partitions(name, plan)
            except UnknownTopicError:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
            await self.wait_hosted(name, plan, timeout_ms)

    async def delete(self, name: str) -> bytes:
        topic = self.get(name)
        if topic is None:
            raise KafkaError.with_default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.config().get("delete.topic.enable"):
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        try:
            await self.cluster.delete_topic(name)
        except UnknownTopicError:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) from None
        self.replicas.apply_topic(name)
        return topic.topic_id

    def describe_configs(self, topic: Topic) -> list[ConfigEntry]:
        """Every topic config's value and its source, as CreateTopics v5+ returns them."""
        return topic_config_entries(self.config(), topic.configs)
