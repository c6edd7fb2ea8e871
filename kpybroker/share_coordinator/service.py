"""The share coordinator as the API handlers and the persister see it (Kafka's
``ShareCoordinatorService``).

One key (group, topic ID, partition) per call: the key is routed to the shard
of its ``__share_group_state`` partition ("group:topicId:partition" hashed as
Kafka's ``partitionFor``), and a routing failure (not the coordinator, still
loading, stopped) becomes the answer Kafka gives for it, with its message
("Unable to write share group state: ..."). Reads and summaries answer at
once; writes, initializations, deletions and reads that record a new leader
epoch answer once their record is replicated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
from kpybroker.share_coordinator.effects import Effects, Token
from kpybroker.share_coordinator.persister import PartitionState, ShareKey
from kpybroker.share_coordinator.runtime import ShareStateRuntime, wall_clock_ms
from kpybroker.share_coordinator.shard import ShareStateShard
from kpybroker.share_coordinator.share_coordinator_settings import ShareCoordinatorSettings
from kpybroker.share_coordinator.share_state import StateAnswer

if TYPE_CHECKING:
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

NOT_AVAILABLE = "Share coordinator is not available."


class ShareCoordinator:
    def __init__(
        self,
        settings: ShareCoordinatorSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.settings = settings
        self.runtime = ShareStateRuntime(settings, cluster, replicas, topics, clock)

    async def start(self) -> None:
        await self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    # -- finding a key's coordinator ----------------------------------------------------------

    async def find_coordinator(self, coordinator_key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the leader of the key's partition, creating the topic first."""
        return await self.runtime.coordinator_of(coordinator_key)

    def leader_of(self, coordinator_key: str) -> int | None:
        """The live broker leading the key's partition, if the topic exists."""
        return self.runtime.leader_of(coordinator_key)

    # -- the five requests, one key each -----------------------------------------------------

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> StateAnswer:
        return await self._call(
            key,
            "initialize share group state",
            lambda shard, token: shard.initialize(token, key, state_epoch, start_offset),
        )

    async def read(self, key: ShareKey, leader_epoch: int) -> StateAnswer:
        return await self._call(
            key,
            "read share group state",
            lambda shard, token: shard.read(token, key, leader_epoch),
        )

    async def write(self, key: ShareKey, state: PartitionState) -> StateAnswer:
        return await self._call(
            key,
            "write share group state",
            lambda shard, token: shard.write(token, key, state),
        )

    async def read_summary(self, key: ShareKey, leader_epoch: int) -> StateAnswer:
        """The state without its batches; ``leader_epoch`` is not checked (as in Kafka)."""
        return await self._call(
            key,
            "read share group state summary",
            lambda shard, token: shard.read_summary(token, key),
        )

    async def delete(self, key: ShareKey) -> StateAnswer:
        return await self._call(
            key,
            "delete share group state",
            lambda shard, token: shard.delete(token, key),
        )

    async def _call(
        self, key: ShareKey, what: str, event: Callable[[ShareStateShard, Token], Effects]
    ) -> StateAnswer:
        runtime = self.runtime
        if not runtime.active:
            return StateAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, NOT_AVAILABLE)
        try:
            shard = runtime.shard_for(key.coordinator_key())
            return await runtime.call(shard, lambda token: event(shard, token))
        except KafkaError as exc:
            return StateAnswer(exc.code, f"Unable to {what}: {default_message(exc.code)}")
