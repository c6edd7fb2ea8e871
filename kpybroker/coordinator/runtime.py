"""The group coordinator's I/O: shards per led partition, their log, their timers, their waiters.

This is the only part of the group coordinator that touches the event loop,
the logs or the cluster metadata. On ``partition_runtime`` (leadership,
loading, routing, waiting requests and appends, shared with the transaction
coordinator) it

- keeps one ``CoordinatorShard`` per partition of ``__consumer_offsets`` that
  this broker leads, each reading the topics and the groups' dynamic configs
  from the metadata cache (``topics_image``, ``group_configs``);
- deletes the committed offsets of a topic that is deleted;
- replays the end markers of transactions written to a led partition
  (``complete_transaction``), which commit or abort pending offsets;
- carries out a shard's ``Effects``: appends each batch of records to the
  partition, tells the shard where it was written (``append_written``) and
  feeds the outcome back (``append_done``) once the high
  watermark passes it (at once on one broker; when followers have it if the
  partition is replicated, within ``offsets.commit.timeout.ms``), arms timers with
  ``loop.call_later`` (nothing polls; an idle group costs nothing), and
  resolves the futures that waiting requests await;
- runs the offset expiry cycle every ``offsets.retention.check.interval.ms``.

A request awaits only its own future, so a JoinGroup that waits for the rest
of its group holds nothing but its own connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group_configs import ClusterGroupConfigs
from kpybroker.coordinator.interface import Append, Effects, SetTimer, TimerKey
from kpybroker.coordinator.loader import decode_logged_batch
from kpybroker.coordinator.offsets_topic_records import encode_batch
from kpybroker.coordinator.partition_runtime import (
    CoordinatorTopic,
    PartitionRuntime,
    read_partition,
)
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.coordinator.topics_image import ClusterTopicsImage
from kpybroker.metadata.model import ChangeKind, MetadataChange
from kpybroker.metadata.topic_names import OFFSETS_TOPIC
from kpybroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

log = logging.getLogger(__name__)


def offsets_topic(settings: CoordinatorSettings) -> CoordinatorTopic:
    """``__consumer_offsets`` as the ``offsets.topic.*`` configs make it."""
    return CoordinatorTopic(
        name=OFFSETS_TOPIC,
        partitions=settings.offsets_topic_partitions,
        replication_factor=settings.offsets_topic_replication_factor,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(settings.offsets_topic_segment_bytes),
            "compression.type": "producer",
        },
        load_buffer_bytes=settings.offsets_load_buffer_bytes,
        append_timeout_ms=settings.offsets_commit_timeout_ms,
    )


class CoordinatorRuntime(PartitionRuntime[CoordinatorShard]):
    """Drives the shards of the ``__consumer_offsets`` partitions this broker leads."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
    ) -> None:
        super().__init__(offsets_topic(settings), cluster, replicas, topics)
        self.settings = settings
        self.topics_image = ClusterTopicsImage(cluster)
        self.group_configs = ClusterGroupConfigs(cluster)
        self._timers: dict[int, dict[TimerKey, asyncio.TimerHandle]] = {}

    async def start(self) -> None:
        await super().start()
        self.every(self.settings.offsets_retention_check_interval_ms, CoordinatorShard.expire)

    # -- the shards' life ---------------------------------------------------------------

    def new_shard(self, index: int, leader_epoch: int) -> CoordinatorShard:
        return CoordinatorShard(
            index, self.settings, self.topics_image, group_configs=self.group_configs
        )

    async def fill(self, shard: CoordinatorShard, plog: object) -> None:
        chunk = self.topic.load_buffer_bytes
        async for entries in read_partition(plog, chunk, decode_logged_batch):
            shard.replay_logged(entries)

    def started(self, shard: CoordinatorShard, load_ms: float) -> None:
        self.apply(shard, shard.loaded())
        groups = len(shard.membership.groups)
        log.log(
            logging.INFO if groups else logging.DEBUG,
            "loaded %d groups of %s-%d in %.0f ms",
            groups,
            OFFSETS_TOPIC,
            shard.partition,
            load_ms,
        )

    def dropped(self, shard: CoordinatorShard) -> None:
        for handle in self._timers.pop(shard.partition, {}).values():
            handle.cancel()
        self.apply(shard, shard.unload())

    def other_change(self, change: MetadataChange) -> None:
        """A deleted topic's committed offsets go too."""
        if change.kind == ChangeKind.TOPIC and change.name not in self.cluster.topics():
            for shard in list(self.shards.values()):
                self.apply(shard, shard.topic_deleted(change.name))

    # -- driving a shard ------------------------------------------------------------

    def apply(self, shard: CoordinatorShard, effects: Effects) -> None:
        """Carry out effects: appends first (and what their outcome causes), timers, replies."""
        pending = deque([effects])
        while pending:
            effects = pending.popleft()
            for append in effects.appends:
                batch = encode_batch(
                    append.records, self.settings.offsets_topic_compression, append.producer
                )
                error, partition, end = self.append(shard, batch)
                if not error:
                    shard.append_written(append, end - len(append.records))
                if error or partition is None or partition.high_watermark >= end:
                    pending.append(shard.append_done(append, error))
                else:  # replicated: done once the followers have it
                    self.start_task(self._replicated(shard, append, partition, end))
            for op in effects.timers:
                self._cancel_timer(shard.partition, op.key)
                if isinstance(op, SetTimer):
                    handle = asyncio.get_running_loop().call_later(
                        op.delay_ms / 1000, self._fire, shard, op.key, op.args
                    )
                    self._timers.setdefault(shard.partition, {})[op.key] = handle
            for reply in effects.replies:
                self.resolve(reply.token, reply.result)

    async def _replicated(
        self, shard: CoordinatorShard, append: Append, partition: Partition, end: int
    ) -> None:
        """Feed the append's outcome once the high watermark passes it (acks=all)."""
        error = await self.replicated(partition, end)
        try:
            self.apply(shard, shard.append_done(append, error))
        except Exception:
            log.exception("group coordinator failure in %r", shard)

    def _cancel_timer(self, index: int, key: TimerKey) -> None:
        handle = self._timers.get(index, {}).pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, shard: CoordinatorShard, key: TimerKey, args: tuple[int, ...]) -> None:
        if not self.serves(shard):
            return
        self._timers[shard.partition].pop(key, None)
        try:
            self.apply(shard, shard.timer_fired(key, args))
        except Exception:
            log.exception("group coordinator timer %s failed in %r", key, shard)

    # -- transactions -------------------------------------------------------------

    def complete_transaction(self, index: int, producer_id: int, committed: bool) -> ErrorCode:
        """Replay the end marker just written to partition ``index`` (nothing is appended).

        While the partition loads, COORDINATOR_LOAD_IN_PROGRESS (retriable): the
        loader may have stopped short of the marker, so it must be replayed again.
        """
        try:
            shard = self.shard_at(index)
        except KafkaError as exc:
            return exc.code
        shard.replay_marker(producer_id, committed)
        return ErrorCode.NONE
