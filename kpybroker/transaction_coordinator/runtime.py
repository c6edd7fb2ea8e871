"""The transaction coordinator's I/O: shards per led partition, their log, their markers.

The only part of the transaction coordinator that touches the event loop,
the logs or the network. On ``coordinator.partition_runtime`` (leadership,
loading, routing, waiting requests and appends, shared with the group
coordinator) it

- keeps one ``TransactionShard`` per partition of ``__transaction_state``
  this broker leads, whose leader epoch is the shard's coordinator epoch;
- carries out a shard's ``Effects``: appends its records as one batch and
  feeds the outcome back once every in-sync replica has it (within
  ``request.timeout.ms``), hands markers to the ``MarkerChannel`` and feeds
  back when they are written, and resolves the futures requests await;
- runs the two periodic passes: aborting transactions past their timeout
  (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and
  removing idle transactional ids
  (``transaction.remove.expired.transaction.cleanup.interval.ms``);
- wakes whoever waits for an id's transaction to take requests again
  (``wait_until_free``) as each write of the id's state is done: a partition
  leader whose add met the previous transaction still completing retries as
  soon as that transaction's completion is written, not a backoff later.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from kpybroker.metadata.topic_names import TRANSACTION_STATE_TOPIC
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.transaction_coordinator.effects import Append, Effects, SendMarkers
from kpybroker.transaction_coordinator.marker_channel import MarkerChannel
from kpybroker.transaction_coordinator.shard import TransactionShard
from kpybroker.transaction_coordinator.transaction_log_records import decode_batch, encode_batch
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def transaction_state_topic(settings: TransactionSettings) -> CoordinatorTopic:
    """``__transaction_state`` with Kafka's topic configs (TransactionLog's)."""
    return CoordinatorTopic(
        name=TRANSACTION_STATE_TOPIC,
        partitions=settings.topic_partitions,
        replication_factor=settings.topic_replication_factor,
        configs={
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(settings.topic_min_isr),
            "segment.bytes": str(settings.topic_segment_bytes),
            "unclean.leader.election.enable": "false",
        },
        load_buffer_bytes=settings.load_buffer_bytes,
        append_timeout_ms=settings.append_timeout_ms,
    )


class TransactionRuntime(PartitionRuntime[TransactionShard]):
    def __init__(
        self,
        settings: TransactionSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
        markers: MarkerChannel,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        super().__init__(transaction_state_topic(settings), cluster, replicas, topics)
        self.settings = settings
        self.markers = markers
        self.clock = clock
        #: Futures of ``wait_until_free`` callers, by transactional id, done at its next write.
        self._write_waiters: dict[str, set[asyncio.Future[None]]] = {}

    async def start(self) -> None:
        await super().start()
        settings = self.settings
        self.every(settings.abort_timed_out_interval_ms, TransactionShard.abort_timed_out)
        self.every(settings.remove_expired_interval_ms, TransactionShard.expire_transactional_ids)

    async def stop(self) -> None:
        await super().stop()
        self.markers.close()

    # -- the shards' life ---------------------------------------------------------------

    def new_shard(self, index: int, leader_epoch: int) -> TransactionShard:
        return TransactionShard(index, leader_epoch, self.settings, self.clock)

    async def fill(self, shard: TransactionShard, plog: object) -> None:
        async for records in read_partition(plog, self.topic.load_buffer_bytes, decode_batch):
            for record in records:
                shard.replay(record)

    def started(self, shard: TransactionShard, load_ms: float) -> None:
        log.info(
            "loaded %d transactional ids of %s-%d at coordinator epoch %d in %.0f ms",
            len(shard.transactions),
            TRANSACTION_STATE_TOPIC,
            shard.partition,
            shard.coordinator_epoch,
            load_ms,
        )
        self.apply(shard, shard.loaded())

    def dropped(self, shard: TransactionShard) -> None:
        """Nothing to undo: markers being sent for it stop at their next answer."""

    # -- driving a shard -----------------------------------------------------------------------

    def apply(self, shard: TransactionShard, effects: Effects) -> None:
        """Carry out effects: appends (and what their outcome causes), replies, markers."""
        pending = deque([effects])
        while pending:
            effects = pending.popleft()
            for append in effects.appends:
                error, partition, end = self.append(shard, encode_batch(append.records))
                if error or partition is None or partition.high_watermark >= end:
                    pending.append(self._outcome(shard, append, error))
                else:  # replicated: done once the followers have it
                    self.start_task(self._replicated(shard, append, partition, end))
            # Replies first: an EndTxn is answered before its markers are sent, as in Kafka
            # (the request's task resumes before the markers' task starts).
            for token, result in effects.replies:
                self.resolve(token, result)
            for send in effects.markers:
                self.start_task(self._send_markers(shard, send))

    def _outcome(self, shard: TransactionShard, append: Append, error: ErrorCode) -> Effects:
        """What the shard does once its append is committed, or failed; then the waiters
        of each id written are woken, the shard having applied (or dropped) the write."""
        out = Effects()
        try:
            append.on_done(out, error)
        except Exception:
            log.exception("transaction coordinator failure in %r", shard)
        for record in append.records:
            for waiter in self._write_waiters.pop(record.transactional_id, ()):
                if not waiter.done():
                    waiter.set_result(None)
        return out

    # -- waiting for a transaction to complete ---------------------------------------------------

    async def wait_until_free(self, transactional_id: str, timeout_s: float) -> None:
        """Return once the id's transaction takes partitions again (``TransactionShard.busy``
        is false), or after ``timeout_s``; at once if this broker does not coordinate it.

        Kafka's partition leader retries an add answered CONCURRENT_TRANSACTIONS after a
        fixed backoff (``add.partitions.to.txn.retry.backoff.ms``), the usual answer to
        the first write of a transaction that follows a version-2 EndTxn, whose markers
        are written after the client has its answer. With the coordinator on this broker
        the leader can instead retry when the completion is written, which the
        producer's whole connection waits for.
        """
        try:
            shard = self.shard_for(transactional_id)
        except KafkaError:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while shard.busy(transactional_id) and self.serves(shard):
            waiter: asyncio.Future[None] = loop.create_future()
            waiting = self._write_waiters.setdefault(transactional_id, set())
            waiting.add(waiter)
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await waiter
            finally:
                waiting.discard(waiter)
                if not waiting and self._write_waiters.get(transactional_id) is waiting:
                    del self._write_waiters[transactional_id]
            if loop.time() >= deadline:
                return

    async def _replicated(
        self, shard: TransactionShard, append: Append, partition: Partition, end: int
    ) -> None:
        error = await self.replicated(partition, end)
        if not error and not self.serves(shard):
            error = ErrorCode.NOT_COORDINATOR  # resigned meanwhile: the new coordinator reloads
        self.apply(shard, self._outcome(shard, append, error))

    async def _send_markers(self, shard: TransactionShard, send: SendMarkers) -> None:
        try:
            written = await self.markers.send(send.markers)
        except Exception:
            log.exception("sending the markers of %s failed", send.markers.transactional_id)
            written = False
        if self.serves(shard):
            out = Effects()
            try:
                send.on_done(out, written)
            except Exception:
                log.exception("transaction coordinator failure in %r", shard)
            self.apply(shard, out)
