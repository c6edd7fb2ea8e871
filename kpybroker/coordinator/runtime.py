"""The coordinator's I/O: shards per led partition, their log, their timers, their waiters.

This is the only part of the coordinator that touches the event loop, the
logs or the cluster metadata. It

- keeps one ``CoordinatorShard`` per partition of ``__consumer_offsets`` that
  this broker leads, loading it from the log when leadership arrives and
  unloading it when leadership goes (``reconcile``, run on every metadata
  change of that topic: issue 8 moves leadership, one broker leads all);
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
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import Append, Effects, SetTimer, TimerKey, Token
from kpybroker.coordinator.loader import read_partition
from kpybroker.coordinator.offsets_topic_records import encode_batch
from kpybroker.coordinator.partitioning import partition_for
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.metadata.model import ChangeKind, MetadataChange
from kpybroker.metadata.topic_names import OFFSETS_TOPIC
from kpybroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

log = logging.getLogger(__name__)


class CoordinatorRuntime:
    """Drives the shards of the ``__consumer_offsets`` partitions this broker leads.

    It follows leadership through the cluster metadata's changes and the
    replicas, and creates the topic through the topic administration.
    """

    def __init__(
        self,
        settings: CoordinatorSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        self.replicas = replicas
        self.topics = topics
        self.shards: dict[int, CoordinatorShard] = {}
        self.active = False
        self._loading: dict[int, asyncio.Task] = {}
        self._timers: dict[int, dict[TimerKey, asyncio.TimerHandle]] = {}
        self._waiters: dict[Token, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._expiry: asyncio.TimerHandle | None = None
        self._replicating: set[asyncio.Future] = set()
        self._create_lock = asyncio.Lock()

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Load every partition this broker leads before the broker accepts clients."""
        self.active = True
        self.cluster.add_listener(self._on_metadata_change)
        self.reconcile()
        await self.wait_loaded()
        self._schedule_expiry()

    async def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        self.cluster.remove_listener(self._on_metadata_change)
        if self._expiry is not None:
            self._expiry.cancel()
        for task in [*self._loading.values(), *self._replicating]:
            task.cancel()
        await asyncio.gather(*self._loading.values(), *self._replicating, return_exceptions=True)
        for partition in list(self.shards):
            self.unload(partition)

    def _on_metadata_change(self, change: MetadataChange) -> None:
        if change.kind not in (ChangeKind.TOPIC, ChangeKind.PARTITION):
            return
        if change.name == OFFSETS_TOPIC:
            self.reconcile()
        elif change.kind == ChangeKind.TOPIC and change.name not in self.cluster.topics():
            for shard in list(self.shards.values()):
                self.apply(shard, shard.topic_deleted(change.name))

    # -- leadership -----------------------------------------------------------------

    def led_partitions(self) -> set[int]:
        return {
            index
            for (topic, index), partition in self.replicas.partitions.items()
            if topic == OFFSETS_TOPIC and partition.is_leader
        }

    def reconcile(self) -> None:
        """Load the partitions this broker now leads; unload those it no longer leads."""
        if not self.active:
            return
        led = self.led_partitions()
        for partition in sorted(led - self.shards.keys() - self._loading.keys()):
            self._loading[partition] = asyncio.create_task(
                self._load(partition), name=f"load-{OFFSETS_TOPIC}-{partition}"
            )
        for partition in list(self.shards):
            if partition not in led:
                self.unload(partition)

    @property
    def loading(self) -> bool:
        """Whether a partition is being loaded (its groups answer LOAD_IN_PROGRESS meanwhile)."""
        return bool(self._loading)

    async def wait_loaded(self) -> None:
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    async def _load(self, index: int) -> None:
        started = time.monotonic()
        shard = CoordinatorShard(index, self.settings)
        try:
            partition = self.replicas.get(OFFSETS_TOPIC, index)
            chunk = self.settings.offsets_load_buffer_bytes
            async for entries in read_partition(partition.log, chunk):
                shard.replay_logged(entries)
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, index)
            return
        finally:
            self._loading.pop(index, None)
        if not self.active or index not in self.led_partitions():
            return
        self.shards[index] = shard
        self.apply(shard, shard.loaded())
        groups = len(shard.membership.groups)
        log.log(
            logging.INFO if groups else logging.DEBUG,
            "loaded %d groups of %s-%d in %.0f ms",
            groups,
            OFFSETS_TOPIC,
            index,
            (time.monotonic() - started) * 1000,
        )

    def unload(self, index: int) -> None:
        shard = self.shards.pop(index)
        for handle in self._timers.pop(index, {}).values():
            handle.cancel()
        self.apply(shard, shard.unload())

    # -- routing ------------------------------------------------------------------

    def partition_count(self) -> int:
        """The topic's partition count once it exists (it may differ from the config)."""
        topic = self.topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic else self.settings.offsets_topic_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    def shard_for(self, group_id: str) -> CoordinatorShard:
        """The shard of ``group_id``; Kafka's coordinator errors when there is none here."""
        return self.shard_at(self.partition_for(group_id))

    def shard_at(self, index: int) -> CoordinatorShard:
        """The shard of partition ``index``; Kafka's coordinator errors when there is none here."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        shard = self.shards.get(index)
        if shard is not None:
            return shard
        if index in self._loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise KafkaError(ErrorCode.NOT_COORDINATOR)

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first need, as Kafka's FindCoordinator does.

        Raises ``KafkaError`` when it cannot be created (e.g. too few brokers
        for ``offsets.topic.replication.factor``).
        """
        async with self._create_lock:
            if self.topics.get(OFFSETS_TOPIC) is None:
                settings = self.settings
                log.info("creating %s", OFFSETS_TOPIC)
                try:
                    await self.topics.create(
                        OFFSETS_TOPIC,
                        num_partitions=settings.offsets_topic_partitions,
                        replication_factor=settings.offsets_topic_replication_factor,
                        configs={
                            "cleanup.policy": "compact",
                            "segment.bytes": str(settings.offsets_topic_segment_bytes),
                            "compression.type": "producer",
                        },
                    )
                except KafkaError as exc:
                    if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise
            self.reconcile()
        await self.wait_loaded()

    # -- driving a shard ------------------------------------------------------------

    async def call(self, shard: CoordinatorShard, event: Callable[[Token], Effects]) -> Any:
        """Feed ``event`` (given its reply token) to ``shard``; await the reply."""
        token = next(self._tokens)
        future = asyncio.get_running_loop().create_future()
        self._waiters[token] = future
        try:
            try:
                self.apply(shard, event(token))
            except Exception:
                log.exception("group coordinator failure in %r", shard)
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR) from None
            return await future
        finally:
            self._waiters.pop(token, None)

    def apply(self, shard: CoordinatorShard, effects: Effects) -> None:
        """Carry out effects: appends first (and what their outcome causes), timers, replies."""
        pending = deque([effects])
        while pending:
            effects = pending.popleft()
            for append in effects.appends:
                error, partition, end = self._append(shard.partition, append)
                if not error:
                    shard.append_written(append, end - len(append.records))
                if error or partition.high_watermark >= end:
                    pending.append(shard.append_done(append, error))
                else:  # replicated: done once the followers have it
                    task = asyncio.ensure_future(self._replicated(shard, append, partition, end))
                    self._replicating.add(task)
                    task.add_done_callback(self._replicating.discard)
            for op in effects.timers:
                self._cancel_timer(shard.partition, op.key)
                if isinstance(op, SetTimer):
                    handle = asyncio.get_running_loop().call_later(
                        op.delay_ms / 1000, self._fire, shard, op.key, op.args
                    )
                    self._timers.setdefault(shard.partition, {})[op.key] = handle
            for reply in effects.replies:
                future = self._waiters.get(reply.token)
                if future is not None and not future.done():
                    future.set_result(reply.result)

    def _append(self, index: int, append: Append) -> tuple[ErrorCode, Partition | None, int]:
        """Append one batch: (error, the partition, the offset the high watermark must reach)."""
        partition = None
        try:
            partition = self.replicas.leader_partition(OFFSETS_TOPIC, index)
            compression = self.settings.offsets_topic_compression
            batch = encode_batch(append.records, compression, append.producer)
            result = partition.append_as_leader(batch, required_acks=-1)
        except KafkaError as exc:
            log.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, index, exc)
            return exc.code, partition, 0
        except Exception:
            log.exception("append to %s-%d failed", OFFSETS_TOPIC, index)
            return ErrorCode.UNKNOWN_SERVER_ERROR, partition, 0
        return ErrorCode.NONE, partition, result.last_offset + 1

    async def _replicated(
        self, shard: CoordinatorShard, append: Append, partition: Partition, end: int
    ) -> None:
        """Feed the append's outcome once the high watermark passes it (acks=all)."""
        timeout = self.settings.offsets_commit_timeout_ms / 1000
        try:
            error = await asyncio.wait_for(partition.wait_for_high_watermark(end), timeout)
        except TimeoutError:
            error = ErrorCode.REQUEST_TIMED_OUT
        try:
            self.apply(shard, shard.append_done(append, error))
        except Exception:
            log.exception("group coordinator failure in %r", shard)

    def _cancel_timer(self, index: int, key: TimerKey) -> None:
        handle = self._timers.get(index, {}).pop(key, None)
        if handle is not None:
            handle.cancel()

    def _fire(self, shard: CoordinatorShard, key: TimerKey, args: tuple[int, ...]) -> None:
        if self.shards.get(shard.partition) is not shard:
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

    # -- offset expiry -------------------------------------------------------------

    def _schedule_expiry(self) -> None:
        interval = self.settings.offsets_retention_check_interval_ms / 1000
        self._expiry = asyncio.get_running_loop().call_later(interval, self._expire)

    def _expire(self) -> None:
        for shard in list(self.shards.values()):
            try:
                self.apply(shard, shard.expire())
            except Exception:
                log.exception("offset expiry failed in %r", shard)
        self._schedule_expiry()
