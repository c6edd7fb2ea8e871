"""The share coordinator's I/O: shards per led partition of ``__share_group_state``.

The only part of the share coordinator that touches the event loop, the logs
or the cluster metadata. On ``coordinator.partition_runtime`` (leadership,
loading, routing, waiting requests and appends, shared with the other
coordinators) it

- creates ``__share_group_state`` on first need with Kafka's configs for it
  (``ShareCoordinatorService.shareGroupStateTopicConfigs``: cleanup.policy
  delete with retention.ms -1, since the coordinator prunes it itself,
  compression.type producer, and the share.coordinator.state.topic.* configs);
- keeps one ``ShareStateShard`` per partition of it this broker leads,
  replayed from the log when leadership arrives (on start, after a restart,
  at a failover);
- carries out a shard's ``Effects``: appends its records as one batch,
  replays them into the shard at their offsets as soon as the log has them,
  and feeds the outcome back once every in-sync replica has them (within
  ``share.coordinator.write.timeout.ms``);
- runs the periodic passes: snapshotting cold share partitions
  (``share.coordinator.cold.partition.snapshot.interval.ms``) and pruning the
  records no longer needed (``share.coordinator.state.topic.prune.interval.ms``:
  the log start offset moves up to the oldest latest snapshot, as Kafka's
  ``performRecordPruning`` does with DeleteRecords);
- tombstones the state of share partitions whose topic is deleted.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from kpybroker.coordinator.partition_runtime import (
    CoordinatorTopic,
    PartitionRuntime,
    read_partition,
)
from kpybroker.metadata.model import ChangeKind, MetadataChange
from kpybroker.metadata.topic_names import SHARE_GROUP_STATE_TOPIC
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.share_coordinator.effects import Append, Effects
from kpybroker.share_coordinator.shard import ShareStateShard
from kpybroker.share_coordinator.share_coordinator_settings import ShareCoordinatorSettings
from kpybroker.share_coordinator.share_state_records import decode_logged, encode_batch

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def share_state_topic(settings: ShareCoordinatorSettings) -> CoordinatorTopic:
    """``__share_group_state`` with Kafka's topic configs (as defined in KIP-932)."""
    return CoordinatorTopic(
        name=SHARE_GROUP_STATE_TOPIC,
        partitions=settings.topic_partitions,
        replication_factor=settings.topic_replication_factor,
        configs={
            "cleanup.policy": "delete",
            "compression.type": "producer",
            "segment.bytes": str(settings.topic_segment_bytes),
            "min.insync.replicas": str(settings.topic_min_isr),
            "retention.ms": "-1",
        },
        load_buffer_bytes=settings.load_buffer_bytes,
        append_timeout_ms=settings.write_timeout_ms,
    )


class ShareStateRuntime(PartitionRuntime[ShareStateShard]):
    def __init__(
        self,
        settings: ShareCoordinatorSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        super().__init__(share_state_topic(settings), cluster, replicas, topics)
        self.settings = settings
        self.clock = clock
        #: The ID of every topic by name, to know a deleted topic's ID.
        self._topic_ids: dict[str, bytes] = {}
        #: Per partition, the log start offset pruning last moved it to.
        self._pruned: dict[int, int] = {}

    async def start(self) -> None:
        self._topic_ids = {name: t.topic_id.bytes for name, t in self.cluster.topics().items()}
        await super().start()
        settings = self.settings
        self.every(settings.cold_snapshot_interval_ms, ShareStateShard.snapshot_cold)
        self.every(settings.prune_interval_ms, self.prune)

    # -- the shards' life ---------------------------------------------------------------

    def new_shard(self, index: int, leader_epoch: int) -> ShareStateShard:
        return ShareStateShard(index, self.settings, self.clock, self.partition_count_of)

    def partition_count_of(self, topic_id: bytes) -> int | None:
        topic = self.topics.by_id(topic_id)
        return None if topic is None else len(topic.partitions)

    async def fill(self, shard: ShareStateShard, plog: object) -> None:
        async for entries in read_partition(plog, self.topic.load_buffer_bytes, decode_logged):
            for offset, record in entries:
                shard.replay(record, offset)

    def started(self, shard: ShareStateShard, load_ms: float) -> None:
        log.info(
            "loaded the state of %d share partitions of %s-%d in %.0f ms",
            len(shard.states),
            SHARE_GROUP_STATE_TOPIC,
            shard.partition,
            load_ms,
        )

    def dropped(self, shard: ShareStateShard) -> None:
        """Nothing to undo: writes in flight answer NOT_COORDINATOR when replicated."""
        self._pruned.pop(shard.partition, None)

    def other_change(self, change: MetadataChange) -> None:
        """A deleted topic's share partitions lose their state (Kafka's ``onTopicsDeleted``)."""
        if change.kind != ChangeKind.TOPIC:
            return
        meta = self.cluster.topics().get(change.name)
        if meta is not None:
            self._topic_ids[change.name] = meta.topic_id.bytes
            return
        deleted = self._topic_ids.pop(change.name, None)
        if deleted is not None:
            for shard in list(self.shards.values()):
                self.apply(shard, shard.forget_topics({deleted}))

    # -- driving a shard ------------------------------------------------------------

    def apply(self, shard: ShareStateShard, effects: Effects) -> None:
        """Carry out effects: appends (replayed once in the log; their outcome fed back once
        replicated), then replies."""
        pending = deque([effects])
        while pending:
            effects = pending.popleft()
            for append in effects.appends:
                batch = encode_batch(append.records, self.settings.topic_compression)
                error, partition, end = self.append(shard, batch)
                if not error:
                    first = end - len(append.records)
                    for i, record in enumerate(append.records):
                        shard.replay(record, first + i)
                if error or partition is None or partition.high_watermark >= end:
                    pending.append(self._outcome(shard, append, error))
                else:  # replicated: done once the followers have it
                    self.start_task(self._replicated(shard, append, partition, end))
            for token, result in effects.replies:
                self.resolve(token, result)

    def _outcome(self, shard: ShareStateShard, append: Append, error: ErrorCode) -> Effects:
        out = Effects()
        try:
            append.on_done(out, error)
        except Exception:
            log.exception("share coordinator failure in %r", shard)
        return out

    async def _replicated(
        self, shard: ShareStateShard, append: Append, partition: Partition, end: int
    ) -> None:
        error = await self.replicated(partition, end)
        if not error and not self.serves(shard):
            error = ErrorCode.NOT_COORDINATOR  # resigned meanwhile: the new coordinator reloads
        self.apply(shard, self._outcome(shard, append, error))

    # -- pruning ----------------------------------------------------------------------------

    def prune(self, shard: ShareStateShard) -> Effects:
        """Move the partition's log start offset up to what the shard still needs."""
        name, index = self.topic.name, shard.partition
        try:
            partition = self.replicas.leader_partition(name, index)
        except KafkaError:
            return Effects()
        offset = shard.redundant_offset(partition.high_watermark)
        done = max(partition.log.log_start_offset, self._pruned.get(index, -1))
        if offset is None or offset <= done:
            return Effects()
        try:
            partition.log.delete_records(offset)
        except (KafkaError, OSError) as exc:
            log.warning("pruning %s-%d below %d failed: %s", name, index, offset, exc)
            return Effects()
        self._pruned[index] = offset
        log.info("pruned %s-%d below offset %d", name, index, offset)
        return Effects()
