"""What the group and transaction coordinators' runtimes share: one shard per led partition.

Both coordinators keep their state in an internal compacted topic
(``__consumer_offsets``, ``__transaction_state``) and coordinate the keys that
hash to the partitions this broker leads (Kafka's ``CoordinatorRuntime`` and
``TransactionStateManager`` do the same). This base class is that part:

- following leadership through the cluster metadata: a partition led here is
  loaded into a new shard (its leader epoch given to the shard: the
  transaction coordinator's epoch), a partition led elsewhere, or led again
  at a new epoch, is unloaded (``reconcile``);
- reading a partition back, batch by batch, in chunks that yield to the event
  loop (``read_partition``), with a batch that cannot be decoded logged and
  skipped, as one bad record must not make a partition unusable;
- routing a key to its partition as Kafka does (``partition_for``) and
  answering COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
  NOT_COORDINATOR when there is no shard for it here;
- creating the topic on first need, with the coordinator's configs;
- the futures requests await (``call`` feeds an event its reply token, the
  subclass's ``apply`` resolves them), appends with acks=all that wait for the
  high watermark within the coordinator's timeout, and periodic passes.

A subclass says how to build, fill, start and drop a shard, and carries out
its own kind of effects in ``apply``.
"""

from __future__ import annotations

import abc
import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kpybroker.coordinator.partitioning import partition_for
from kpybroker.metadata.model import ChangeKind, MetadataChange
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import BatchHeader, iter_batches

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.topic_admin import TopicManager

log = logging.getLogger(__name__)

Token = int
T = TypeVar("T")
LOADING_ERRORS = (KafkaError, ValueError, IndexError, UnicodeDecodeError)


class Shard(Protocol):
    partition: int


S = TypeVar("S", bound=Shard)


@dataclass(frozen=True, slots=True)
class CoordinatorTopic:
    """The internal topic a coordinator keeps its state in, and how it reads and writes it."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    load_buffer_bytes: int
    append_timeout_ms: int


async def read_partition(
    plog: object, chunk_bytes: int, decode: Callable[[BatchHeader, memoryview], Iterable[T]]
) -> AsyncIterator[list[T]]:
    """Yield what ``decode`` makes of each batch of ``plog`` (a PartitionLog), by chunk.

    The log is read from its start to its end (on one broker everything
    appended is committed, as Kafka's loaders assume).
    """
    offset = plog.log_start_offset  # type: ignore[attr-defined]
    end = plog.log_end_offset  # type: ignore[attr-defined]
    while offset < end:
        data = plog.read(offset, chunk_bytes, end).read_bytes()  # type: ignore[attr-defined]
        if not data:
            break
        decoded: list[T] = []
        view = memoryview(data)
        for pos, header in iter_batches(data):
            offset = header.last_offset + 1
            try:
                decoded.extend(decode(header, view[pos : pos + header.size]))
            except LOADING_ERRORS as exc:
                log.error("%s: skipping the batch at offset %d: %s", plog, header.base_offset, exc)
        yield decoded
        await asyncio.sleep(0)


class PartitionRuntime(abc.ABC, Generic[S]):
    def __init__(
        self,
        topic: CoordinatorTopic,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
    ) -> None:
        self.topic = topic
        self.cluster = cluster
        self.replicas = replicas
        self.topics = topics
        self.shards: dict[int, S] = {}
        self.epochs: dict[int, int] = {}
        self.active = False
        self._loading: dict[int, asyncio.Task] = {}
        self._waiters: dict[Token, asyncio.Future] = {}
        self._tokens = itertools.count(1)
        self._tasks: set[asyncio.Future] = set()
        self._passes: set[asyncio.TimerHandle] = set()
        self._create_lock = asyncio.Lock()
        #: Why the topic could not be created last time (logged when it changes).
        self._creation_refused: str | None = None

    # -- what a subclass provides --------------------------------------------------------

    @abc.abstractmethod
    def new_shard(self, index: int, leader_epoch: int) -> S: ...

    @abc.abstractmethod
    async def fill(self, shard: S, plog: object) -> None:
        """Replay the partition's log into ``shard``."""

    @abc.abstractmethod
    def started(self, shard: S, load_ms: float) -> None:
        """``shard`` is loaded and serves from now on."""

    @abc.abstractmethod
    def dropped(self, shard: S) -> None:
        """``shard`` no longer serves (leadership moved, or the broker stops)."""

    def other_change(self, change: MetadataChange) -> None:
        """A metadata change of another topic than the coordinator's."""

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load every partition this broker leads before the broker accepts clients."""
        self.active = True
        self.cluster.add_listener(self._on_metadata_change)
        self.replicas.add_hosting_listener(self._on_hosted)
        self.reconcile()
        await self.wait_loaded()

    async def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        self.cluster.remove_listener(self._on_metadata_change)
        self.replicas.remove_hosting_listener(self._on_hosted)
        for handle in self._passes:
            handle.cancel()
        for task in [*self._loading.values(), *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._loading.values(), *self._tasks, return_exceptions=True)
        for index in list(self.shards):
            self.unload(index)

    def _on_metadata_change(self, change: MetadataChange) -> None:
        if change.kind not in (ChangeKind.TOPIC, ChangeKind.PARTITION):
            return
        if change.name == self.topic.name:
            self.reconcile()
        else:
            self.other_change(change)

    def _on_hosted(self, topic: str) -> None:
        """Partitions whose logs were just made are hosted (and maybe led) now."""
        if topic == self.topic.name:
            self.reconcile()

    # -- leadership -----------------------------------------------------------------------

    def led_partitions(self) -> dict[int, int]:
        """Each partition of the topic led here, with its leader epoch."""
        name = self.topic.name
        return {
            index: partition.leader_epoch
            for (topic, index), partition in self.replicas.partitions.items()
            if topic == name and partition.is_leader
        }

    def reconcile(self) -> None:
        """Load what this broker now leads (again, at a new epoch); drop what it no longer does."""
        if not self.active:
            return
        led = self.led_partitions()
        for index in list(self.shards):
            if led.get(index) != self.epochs.get(index):
                self.unload(index)
        for index, epoch in sorted(led.items()):
            if index not in self.shards and index not in self._loading:
                self._loading[index] = asyncio.create_task(
                    self._load(index, epoch), name=f"load-{self.topic.name}-{index}"
                )

    @property
    def loading(self) -> bool:
        """Whether a partition is being loaded (its keys answer LOAD_IN_PROGRESS meanwhile)."""
        return bool(self._loading)

    async def wait_loaded(self) -> None:
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    async def _load(self, index: int, epoch: int) -> None:
        started = time.monotonic()
        shard = self.new_shard(index, epoch)
        try:
            await self.fill(shard, self.replicas.get(self.topic.name, index).log)
        except Exception:
            log.exception("loading %s-%d failed", self.topic.name, index)
            return
        finally:
            self._loading.pop(index, None)
        if not self.active or self.led_partitions().get(index) != epoch:
            self.reconcile()  # leadership moved while loading
            return
        self.shards[index] = shard
        self.epochs[index] = epoch
        self.started(shard, (time.monotonic() - started) * 1000)

    def unload(self, index: int) -> None:
        shard = self.shards.pop(index)
        self.epochs.pop(index, None)
        log.info("resigned as coordinator of %s-%d", self.topic.name, index)
        self.dropped(shard)

    # -- routing -------------------------------------------------------------------------------

    def partition_count(self) -> int:
        """The topic's partition count once it exists (it may differ from the config)."""
        topic = self.topics.get(self.topic.name)
        return len(topic.partitions) if topic else self.topic.partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partition_count())

    def shard_for(self, key: str) -> S:
        return self.shard_at(self.partition_for(key))

    def shard_at(self, index: int) -> S:
        """The shard of partition ``index``; Kafka's coordinator errors when there is none here."""
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        shard = self.shards.get(index)
        if shard is not None:
            return shard
        if index in self._loading or self._about_to_lead(index):
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        raise KafkaError(ErrorCode.NOT_COORDINATOR)

    def _about_to_lead(self, index: int) -> bool:
        """Whether the metadata names this broker leader of partition ``index`` before its
        replica has become leader (FindCoordinator already sends clients here): the shard
        loads in a moment, so the client should retry here, not look elsewhere."""
        topic = self.topics.get(self.topic.name)
        state = topic.partitions.get(index) if topic else None
        return state is not None and state.leader == self.replicas.broker_id

    async def coordinator_of(self, key: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the live leader of ``key``'s partition (FindCoordinator),
        creating the topic first."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        try:
            await self.ensure_topic()
        except KafkaError as exc:
            # Kafka logs this as an ERROR at each attempt; once per reason is enough to
            # explain why clients keep hearing COORDINATOR_NOT_AVAILABLE.
            reason = str(exc)
            if reason != self._creation_refused:
                self._creation_refused = reason
                log.warning("cannot create %s: %s", self.topic.name, reason)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        self._creation_refused = None
        leader = self.leader_of(key)
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        return ErrorCode.NONE, leader

    def leader_of(self, key: str) -> int | None:
        """The live leader of ``key``'s partition, if the topic and a live leader exist."""
        topic = self.topics.get(self.topic.name)
        state = topic.partitions.get(self.partition_for(key)) if topic else None
        if state is None or state.leader not in self.cluster.live_brokers():
            return None
        return state.leader

    async def ensure_topic(self) -> None:
        """Create the topic on first need, as Kafka's FindCoordinator does.

        Raises ``KafkaError`` when it cannot be created (e.g. too few brokers
        for its replication factor).
        """
        async with self._create_lock:
            if self.topics.get(self.topic.name) is None:
                log.info("creating %s", self.topic.name)
                try:
                    await self.topics.create(
                        self.topic.name,
                        num_partitions=self.topic.partitions,
                        replication_factor=self.topic.replication_factor,
                        configs=dict(self.topic.configs),
                    )
                except KafkaError as exc:
                    if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        raise
            self.reconcile()
        await self.wait_loaded()

    # -- driving a shard --------------------------------------------------------------------

    @abc.abstractmethod
    def apply(self, shard: S, effects: Any) -> None:
        """Carry out a shard's effects, resolving replies with ``resolve``."""

    async def call(self, shard: S, event: Callable[[Token], Any]) -> Any:
        """Feed ``event`` (given its reply token) to ``shard``; await the reply."""
        token = next(self._tokens)
        future = asyncio.get_running_loop().create_future()
        self._waiters[token] = future
        try:
            try:
                self.apply(shard, event(token))
            except Exception:
                log.exception("coordinator failure in %r", shard)
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR) from None
            return await future
        finally:
            self._waiters.pop(token, None)

    def resolve(self, token: Token, result: Any) -> None:
        future = self._waiters.get(token)
        if future is not None and not future.done():
            future.set_result(result)

    def serves(self, shard: S) -> bool:
        """Whether ``shard`` is still the one serving its partition."""
        return self.shards.get(shard.partition) is shard

    def start_task(self, work: Any) -> None:
        """Run ``work`` (a coroutine) until done or the runtime stops."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def append(self, shard: S, batch: bytes | bytearray) -> tuple[ErrorCode, Partition | None, int]:
        """Append one batch to ``shard``'s partition as its leader (acks=all): the error, the
        partition and the offset its high watermark must pass for the batch to be committed."""
        name, index = self.topic.name, shard.partition
        partition = None
        try:
            partition = self.replicas.leader_partition(name, index)
            if partition.leader_epoch != self.epochs.get(index):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, partition, 0
            result = partition.append_as_leader(batch, required_acks=-1)
        except KafkaError as exc:
            log.warning("append to %s-%d failed: %s", name, index, exc)
            return exc.code, partition, 0
        except Exception:
            log.exception("append to %s-%d failed", name, index)
            return ErrorCode.UNKNOWN_SERVER_ERROR, partition, 0
        return ErrorCode.NONE, partition, result.last_offset + 1

    async def replicated(self, partition: Partition, end: int) -> ErrorCode:
        """Once the high watermark passes ``end``: NONE, or why it cannot (a timeout)."""
        try:
            async with asyncio.timeout(self.topic.append_timeout_ms / 1000):
                return await partition.wait_for_high_watermark(end)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT

    def every(self, interval_ms: int, run: Callable[[S], Any]) -> None:
        """Apply ``run(shard)`` to every shard each ``interval_ms``, until the runtime stops."""
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self._passes.discard(handle)
            for shard in list(self.shards.values()):
                try:
                    self.apply(shard, run(shard))
                except Exception:
                    log.exception("%s failed in %r", run.__name__, shard)
            self.every(interval_ms, run)

        handle = loop.call_later(interval_ms / 1000, tick)
        self._passes.add(handle)
