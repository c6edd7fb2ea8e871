"""The transaction coordinator's I/O: shards per led partition, their log, their markers.

The only part of the transaction coordinator that touches the event loop,
the logs or the network. It

- keeps one ``TransactionShard`` per partition of ``__transaction_state``
  this broker leads, loading it from the log when leadership arrives (the
  leader epoch becomes its coordinator epoch) and dropping it when
  leadership goes, following the cluster metadata;
- carries out a shard's ``Effects``: appends its records as one batch and
  feeds the outcome back once every in-sync replica has it (within
  ``request.timeout.ms``), hands markers to the ``MarkerChannel`` and feeds
  back when they are written, and resolves the futures requests await;
- runs the two periodic passes: aborting transactions past their timeout
  (``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and
  removing idle transactional ids
  (``transaction.remove.expired.transaction.cleanup.interval.ms``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kpybroker.coordinator.partitioning import partition_for
from kpybroker.metadata.model import ChangeKind, MetadataChange
from kpybroker.metadata.topic_names import TRANSACTION_STATE_TOPIC
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.transaction_coordinator.effects import Append, Effects, SendMarkers, Token
from kpybroker.transaction_coordinator.marker_channel import MarkerChannel
from kpybroker.transaction_coordinator.shard import TransactionShard
from kpybroker.transaction_coordinator.transaction_log_records import (
    encode_batch,
    read_partition,
)
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionRuntime:
    def __init__(
        self,
        settings: TransactionSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
        markers: MarkerChannel,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        self.replicas = replicas
        self.topics = topics
        self.markers = markers
        self.clock = clock
        self.shards: dict[int, TransactionShard] = {}
        self.active = False
        self._loading: dict[int, asyncio.Task] = {}
        self._waiters: dict[Token, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._tasks: set[asyncio.Future] = set()
        self._passes: list[asyncio.TimerHandle] = []
        self._create_lock = asyncio.Lock()

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self.active = True
        self.cluster.add_listener(self._on_metadata_change)
        self.reconcile()
        await self.wait_loaded()
        settings = self.settings
        self._every(settings.abort_timed_out_interval_ms, TransactionShard.abort_timed_out)
        self._every(settings.remove_expired_interval_ms, TransactionShard.expire_transactional_ids)

    async def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        self.cluster.remove_listener(self._on_metadata_change)
        for handle in self._passes:
            handle.cancel()
        for task in [*self._loading.values(), *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._loading.values(), *self._tasks, return_exceptions=True)
        self.shards.clear()
        self.markers.close()

    def _on_metadata_change(self, change: MetadataChange) -> None:
        if change.kind in (ChangeKind.TOPIC, ChangeKind.PARTITION) and (
            change.name == TRANSACTION_STATE_TOPIC
        ):
            self.reconcile()

    # -- leadership ---------------------------------------------------------------------

    def led_partitions(self) -> dict[int, int]:
        """Each led partition of ``__transaction_state`` and its leader epoch."""
        return {
            index: partition.leader_epoch
            for (topic, index), partition in self.replicas.partitions.items()
            if topic == TRANSACTION_STATE_TOPIC and partition.is_leader
        }

    def reconcile(self) -> None:
        """Load what this broker now leads (again, at a new epoch); drop what it no longer does."""
        if not self.active:
            return
        led = self.led_partitions()
        for index, shard in list(self.shards.items()):
            if led.get(index) != shard.coordinator_epoch:
                log.info(
                    "resigned as transaction coordinator of %s-%d", TRANSACTION_STATE_TOPIC, index
                )
                del self.shards[index]
        for index, epoch in sorted(led.items()):
            if index not in self.shards and index not in self._loading:
                self._loading[index] = asyncio.create_task(
                    self._load(index, epoch), name=f"load-{TRANSACTION_STATE_TOPIC}-{index}"
                )

    @property
    def loading(self) -> bool:
        return bool(self._loading)

    async def wait_loaded(self) -> None:
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    async def _load(self, index: int, epoch: int) -> None:
        started = time.monotonic()
        shard = TransactionShard(index, epoch, self.settings, self.clock)
        try:
            partition = self.replicas.get(TRANSACTION_STATE_TOPIC, index)
            async for records in read_partition(partition.log, self.settings.load_buffer_bytes):
                for record in records:
                    shard.replay(record)
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, index)
            return
        finally:
            self._loading.pop(index, None)
        if not self.active or self.led_partitions().get(index) != epoch:
            self.reconcile()
            return
        self.shards[index] = shard
        log.info(
            "loaded %d transactional ids of %s-%d at coordinator epoch %d in %.0f ms",
            len(shard.transactions),
            TRANSACTION_STATE_TOPIC,
            index,
            epoch,
            (time.monotonic() - started) * 1000,
        )
        self.apply(shard, shard.loaded())

    # -- routing -----------------------------------------------------------------------------

    def partition_count(self) -> int:
        topic = self.topics.get(TRANSACTION_STATE_TOPIC)
        return len(topic.partitions) if topic else self.settings.topic_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    def shard_for(self, transactional_id: str) -> TransactionShard:
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        index = self.partition_for(transactional_id)
        shard = self.shards.get(index)
        if shard is not None:
            return shard
        if index in self._loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise KafkaError(ErrorCode.NOT_COORDINATOR)

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first need, with Kafka's topic configs."""
        async with self._create_lock:
            if self.topics.get(TRANSACTION_STATE_TOPIC) is None:
                settings = self.settings
                log.info("creating %s", TRANSACTION_STATE_TOPIC)
                try:
                    await self.topics.create(
                        TRANSACTION_STATE_TOPIC,
                        num_partitions=settings.topic_partitions,
                        replication_factor=settings.topic_replication_factor,
                        configs={
                            "cleanup.policy": "compact",
                            "compression.type": "uncompressed",
                            "min.insync.replicas": str(settings.topic_min_isr),
                            "segment.bytes": str(settings.topic_segment_bytes),
                            "unclean.leader.election.enable": "false",
                        },
                    )
                except KafkaError as exc:
                    if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise
            self.reconcile()
        await self.wait_loaded()

    # -- driving a shard -----------------------------------------------------------------------

    async def call(self, shard: TransactionShard, event: Callable[[Token], Effects]) -> Any:
        """Feed ``event`` (given its reply token) to ``shard``; await the reply."""
        token = next(self._tokens)
        future = asyncio.get_running_loop().create_future()
        self._waiters[token] = future
        try:
            try:
                self.apply(shard, event(token))
            except Exception:
                log.exception("transaction coordinator failure in %r", shard)
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR) from None
            return await future
        finally:
            self._waiters.pop(token, None)

    def apply(self, shard: TransactionShard, effects: Effects) -> None:
        """Carry out effects: appends (and what their outcome causes), markers, replies."""
        pending = deque([effects])
        while pending:
            effects = pending.popleft()
            for append in effects.appends:
                self._start(self._append(shard, append))
            for send in effects.markers:
                self._start(self._send_markers(shard, send))
            for token, result in effects.replies:
                future = self._waiters.get(token)
                if future is not None and not future.done():
                    future.set_result(result)

    def _start(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _follow_up(self, shard: TransactionShard, then: Callable[[Effects], None]) -> None:
        """Run a continuation of ``shard`` and carry out its effects, if it is still loaded."""
        out = Effects()
        try:
            then(out)
        except Exception:
            log.exception("transaction coordinator failure in %r", shard)
            return
        self.apply(shard, out)

    async def _append(self, shard: TransactionShard, append: Append) -> None:
        error = await self._write(shard, append)
        if self.shards.get(shard.partition) is not shard and not error:
            error = ErrorCode.NOT_COORDINATOR  # resigned meanwhile: a new coordinator reloads
        self._follow_up(shard, lambda out: append.on_done(out, error))

    async def _write(self, shard: TransactionShard, append: Append) -> ErrorCode:
        partition: Partition | None = None
        try:
            partition = self.replicas.leader_partition(TRANSACTION_STATE_TOPIC, shard.partition)
            if partition.leader_epoch != shard.coordinator_epoch:
                return ErrorCode.NOT_COORDINATOR
            result = partition.append_as_leader(encode_batch(append.records), required_acks=-1)
        except KafkaError as exc:
            log.warning("append to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, shard.partition, exc)
            return exc.code
        except Exception:
            log.exception("append to %s-%d failed", TRANSACTION_STATE_TOPIC, shard.partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        end = result.last_offset + 1
        if partition.high_watermark >= end:
            return ErrorCode.NONE
        try:
            async with asyncio.timeout(self.settings.append_timeout_ms / 1000):
                return await partition.wait_for_high_watermark(end)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT

    async def _send_markers(self, shard: TransactionShard, send: SendMarkers) -> None:
        try:
            written = await self.markers.send(send.markers)
        except Exception:
            log.exception("sending the markers of %s failed", send.markers.transactional_id)
            written = False
        if self.shards.get(shard.partition) is shard:
            self._follow_up(shard, lambda out: send.on_done(out, written))

    # -- periodic passes ---------------------------------------------------------------------------

    def _every(self, interval_ms: int, run: Callable[[TransactionShard], Effects]) -> None:
        def tick() -> None:
            for shard in list(self.shards.values()):
                try:
                    self.apply(shard, run(shard))
                except Exception:
                    log.exception("%s failed in %r", run.__name__, shard)
            self._passes.remove(handle)
            self._every(interval_ms, run)

        handle = asyncio.get_running_loop().call_later(interval_ms / 1000, tick)
        self._passes.append(handle)
