"""The partitions this broker hosts, kept in step with their state znodes.

Every change of a topic or of a partition's state znode reaches ``apply_topic``
(the broker listens to ``ClusterMetadata``): partitions are created, deleted,
and switched between leader and follower, which starts or stops their
fetching. A partition whose log is missing is hosted once the ``LogCreator``
has made its log in a worker thread (``log_creation``), so that a topic of
thousands of partitions never stalls the event loop. Leaders shrink their ISR
on a timer (``run_isr_expiration``) and expand it as followers catch up,
through the ``IsrWriter``.

While the ZooKeeper session is lost this broker is *fenced*: it cannot know
whether the controller moved leadership meanwhile (its ephemeral registration
is gone, so the controller counts it dead), so it answers every request for
leadership with NOT_LEADER_OR_FOLLOWER until the session is back and the
states are read again. The group coordinator keeps its shards meanwhile; their
writes fail the same way.

The transaction coordinator's markers are written here (``append_txn_marker``,
one partition of a WriteTxnMarkers request), acks=all.

A log directory that fails (``log_dir_failure``) takes its partitions offline
here: they stop being led or followed, answer KAFKA_STORAGE_ERROR, and are not
made again elsewhere; the controller learns of it (``log_dir_events``) and
moves their leadership to other replicas. A directory unusable since start-up
does the same to the partitions whose logs could not be found.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpybroker.cluster.broker_client import PeerAddress
from kpybroker.cluster.isr import IsrWriter
from kpybroker.cluster.log_creation import LogCreator, NewLog, TopicPartition
from kpybroker.cluster.partition import Partition, Transition, monotonic_ms
from kpybroker.cluster.replica_fetcher import FetcherManager
from kpybroker.cluster.replication_settings import ReplicationSettings
from kpybroker.log.log_config import LogConfig
from kpybroker.log.log_manager import LogManager
from kpybroker.log.partition_log import PartitionLog
from kpybroker.log.slices import current_slices
from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import NO_LEADER, Endpoint, PartitionMetadata, topic_id_bytes
from kpybroker.metadata.store import MetadataStoreError
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.security.client_security import PLAINTEXT_CLIENT, ClientSecurity

log = logging.getLogger(__name__)

#: How long a marker waits for the ISR when the caller gives no timeout (Kafka's
#: WriteTxnMarkers uses request.timeout.ms, 30 s by default).
DEFAULT_MARKER_TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """The current leader for the current-leader fields of an error answer (KIP-951)."""

    leader_id: int
    leader_epoch: int


class ReplicaManager:
    def __init__(self, broker_id: int, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.broker_id = broker_id
        self.clock_ms = clock_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.topic_names: dict[bytes, str] = {}
        self.fenced = False
        self.settings = ReplicationSettings()
        #: How connections to peers authenticate (the inter-broker listener's security).
        self.peer_security: ClientSecurity = PLAINTEXT_CLIENT
        self._logs: LogManager | None = None
        self._cluster: ClusterMetadata | None = None
        self._config_for: Callable[[str], LogConfig] | None = None
        self._fetchers: FetcherManager | None = None
        self._isr: IsrWriter | None = None
        self._creator: LogCreator | None = None
        self._hosting_listeners: list[Callable[[str], None]] = []
        #: Partitions whose log directory failed: KAFKA_STORAGE_ERROR until a restart.
        self.offline: set[TopicPartition] = set()
        self._notifications: set[asyncio.Task[None]] = set()

    def start(
        self,
        logs: LogManager,
        cluster: ClusterMetadata,
        config_for: Callable[[str], LogConfig],
        settings: ReplicationSettings,
        peer_security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self.peer_security = peer_security
        self._logs = logs
        self._cluster = cluster
        self._config_for = config_for
        self.settings = settings
        self._fetchers = FetcherManager(self.broker_id, self.inter_broker_address, settings)
        self._isr = IsrWriter(cluster, self.clock_ms)
        # Bound once and shared by every partition: each ``obj.method`` is a new 64-byte object.
        self._on_caught_up: Callable[[Partition, int], None] = self._isr.expand
        self._on_disk_error: Callable[[PartitionLog, str, OSError], None] = logs.fail_log
        self._creator = LogCreator(logs, self._new_log, self._logs_created)
        logs.failures.add_listener(self._on_log_dir_failure)
        self._offline_from_start()

    def _offline_from_start(self) -> None:
        """With a log directory unusable since start-up, every partition assigned here whose
        log is in no online directory is offline: its log may be in that directory, and a
        new empty one beside it would silently diverge from its data. Kafka's
        ``getOrCreateLog`` refuses, as long as a directory is offline, to create a log
        the controller did not mark new."""
        offline_dirs = self._logs.failures.offline
        if not offline_dirs:
            return
        for name, meta in self._cluster.topics().items():
            for index, pm in meta.partitions.items():
                if self.broker_id in pm.replicas and self._logs.get(name, index) is None:
                    self.offline.add((name, index))
        log.warning(
            "Replicas offline since start-up, their log dirs %s being offline: %s",
            ", ".join(map(str, sorted(offline_dirs))),
            ", ".join(f"{t}-{p}" for t, p in sorted(self.offline)) or "(none)",
        )

    async def stop(self) -> None:
        if self._creator is not None:
            await self._creator.close()
        if self._fetchers is not None:
            await self._fetchers.close()
        if self._isr is not None:
            await self._isr.close()

    # -- following the metadata -------------------------------------------------------

    def apply_topic(self, name: str, only: int | None = None) -> None:
        """Make this broker's partitions of ``name`` match the cluster metadata: all of
        them, or only partition ``only`` (its state znode changed; the others did not,
        and a topic of thousands of partitions must not cost thousands per change)."""
        if name not in self._cluster.topics():
            self._creator.forget_topic(name)
            self._logs.delete_partitions(name, [p.index for p in self.remove_topic(name)])
            return
        if only is None:
            meta = self._cluster.topics()[name]
            topic_id = topic_id_bytes(meta.topic_id)
            changed = list(meta.partitions.items())
        else:
            found = self._cluster.partition(name, only)
            if found is None:
                return
            topic_id, changed = topic_id_bytes(found[0]), [(only, found[1])]
        config = None
        for index, pm in changed:
            if self.broker_id not in pm.replicas:
                self._creator.forget((name, index))
                self.offline.discard((name, index))
                if (gone := self.partitions.get((name, index))) is not None:
                    # Reassigned away: stop following and delete the replica, as
                    # Kafka's StopReplica with deletePartition does.
                    log.info("%s-%d: no longer assigned to this broker", name, index)
                    self._drop(gone)
                    self._logs.delete_partition(name, index)
                continue
            if (name, index) in self.offline:
                continue
            partition = self.partitions.get((name, index))
            if partition is not None and partition.topic_id != topic_id:
                log.warning("%s-%d was re-created under a new topic id", name, index)
                self._stop(partition)
                self.topic_names.pop(partition.topic_id, None)  # the old id is gone for good
                self._logs.delete_partition(name, index)
                partition = None
            if partition is None:
                plog = self._logs.get(name, index)
                if plog is None:
                    self._creator.want((name, index))
                    continue
                plog.assign_topic_id(topic_id)
                partition = self._host(plog, name, index, topic_id)
            if config is None:
                config = self._config_for(name)
            partition.min_insync_replicas = config.min_insync_replicas
            self._transition(partition, partition.apply(pm))

    def _host(self, plog: PartitionLog, name: str, index: int, topic_id: bytes) -> Partition:
        partition = Partition(plog, name, index, topic_id, self.broker_id, clock_ms=self.clock_ms)
        partition.on_caught_up = self._on_caught_up
        partition.on_disk_error = self._on_disk_error
        self.partitions[(name, index)] = partition
        self.topic_names[topic_id] = name
        return partition

    def _new_log(self, tp: TopicPartition) -> NewLog | None:
        """What a queued partition's log is made with, from the metadata as it is now;
        None when it is no longer to be hosted here."""
        name, index = tp
        meta = self._cluster.topics().get(name)
        pm = None if meta is None else meta.partitions.get(index)
        if pm is None or self.broker_id not in pm.replicas or tp in self.partitions:
            return None
        config = self._config_for(name)
        topic_id = topic_id_bytes(meta.topic_id)
        return NewLog(name, index, topic_id, config, first_epoch(pm, self.broker_id))

    def _logs_created(self, made: list[tuple[NewLog, PartitionLog]]) -> None:
        """Queued logs exist: host their partitions (or delete a log whose topic went away
        or was re-created meanwhile, or whose partition was assigned away meanwhile, as a
        cancelled reassignment does), then tell the hosting listeners, once per topic."""
        topics = set()
        stale: dict[str, list[int]] = {}
        for spec, _ in made:
            found = self._cluster.partition(spec.topic, spec.partition)
            if (
                found is None
                or found[0].bytes != spec.topic_id
                or self.broker_id not in found[1].replicas
            ):
                stale.setdefault(spec.topic, []).append(spec.partition)
                continue
            self.apply_topic(spec.topic, spec.partition)
            topics.add(spec.topic)
        for topic, partitions in stale.items():  # one checkpoint and fsync per topic
            self._logs.delete_partitions(topic, partitions)
        for topic in topics:
            for listener in list(self._hosting_listeners):
                listener(topic)

    def add_hosting_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(topic)`` when partitions of ``topic`` start being hosted here
        after their logs were made (their metadata changed earlier, without them)."""
        self._hosting_listeners.append(listener)

    def remove_hosting_listener(self, listener: Callable[[str], None]) -> None:
        self._hosting_listeners.remove(listener)

    async def wait_hosted(self, name: str, partitions: Iterable[int], timeout_s: float) -> bool:
        """Until this broker hosts (has the log of) each of ``partitions`` of ``name``
        assigned to it; False after ``timeout_s``. Logs are made in the order they were
        queued, so the check resumes where the last one stopped."""
        wanted = sorted(partitions)
        checked = 0

        def done() -> bool:
            nonlocal checked
            meta = self._cluster.topics().get(name)
            if meta is None:
                return True
            while checked < len(wanted):
                pm = meta.partitions.get(wanted[checked])
                tp = (name, wanted[checked])
                mine = pm is not None and self.broker_id in pm.replicas
                if mine and tp not in self.partitions and tp not in self.offline:
                    return False
                checked += 1
            return True

        return done() or await self._creator.wait(done, timeout_s)

    async def wait_all_hosted(self, timeout_s: float) -> bool:
        """Until every partition assigned here has its log; False (logged) after
        ``timeout_s`` for a topic. A Kafka broker stays fenced until it has applied the
        metadata it found, logs included; this one serves once it has them, so that a
        client's first request after a restart finds every partition it was told of."""
        for name, meta in list(self._cluster.topics().items()):
            if not await self.wait_hosted(name, list(meta.partitions), timeout_s):
                log.warning(
                    "%s: logs of this broker's partitions not made in %.0f s", name, timeout_s
                )
                return False
        return True

    def _transition(self, partition: Partition, transition: Transition) -> None:
        if transition is Transition.NONE:
            return
        self._fetchers.unfollow(partition.topic, partition.index)
        if transition is Transition.FOLLOWER and partition.leader != NO_LEADER:
            self._fetchers.follow(partition)

    def apply_min_insync_replicas(self, topic: str, value: int) -> None:
        for partition in self._of_topic(topic):
            partition.min_insync_replicas = value

    def remove_topic(self, topic: str) -> list[Partition]:
        self.offline = {tp for tp in self.offline if tp[0] != topic}
        removed = list(self._of_topic(topic))
        for partition in removed:
            self._stop(partition)
            self.topic_names.pop(partition.topic_id, None)
        return removed

    def _of_topic(self, topic: str) -> Iterator[Partition]:
        return (p for key, p in self.partitions.items() if key[0] == topic)

    def _drop(
        self, partition: Partition, error: ErrorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER
    ) -> None:
        """Stop hosting one partition (what waited on it gets ``error``); its topic id
        stays known while another partition of the topic is hosted."""
        self._stop(partition, error)
        if not any(p.topic_id == partition.topic_id for p in self._of_topic(partition.topic)):
            self.topic_names.pop(partition.topic_id, None)

    def _stop(
        self, partition: Partition, error: ErrorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER
    ) -> None:
        del self.partitions[(partition.topic, partition.index)]
        if self._fetchers is not None:
            self._fetchers.unfollow(partition.topic, partition.index)
        partition.close(error)

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's ``handleLogDirFailure``: the partitions in ``log_dir`` go offline (no
        more leading or fetching; KAFKA_STORAGE_ERROR for clients and waiting acks), and
        the controller is told, through a log dir event, to move their leadership."""
        failed = [p for p in self.partitions.values() if p.log.directory.parent == log_dir]
        for partition in failed:
            self._drop(partition, ErrorCode.KAFKA_STORAGE_ERROR)
            self.offline.add((partition.topic, partition.index))
        log.warning(
            "Stopping serving replicas in dir %s: %s",
            log_dir,
            ", ".join(f"{p.topic}-{p.index}" for p in failed) or "(none)",
        )
        task = asyncio.get_running_loop().create_task(self._tell_controller())
        self._notifications.add(task)
        task.add_done_callback(self._notifications.discard)

    async def _tell_controller(self) -> None:
        try:
            await self._cluster.propagate_log_dir_event(self.broker_id)
        except MetadataStoreError as exc:
            log.error("telling the controller of the failed log directory failed: %r", exc)

    def set_fenced(self, fenced: bool) -> None:
        """Fence (session lost) or unfence (session back and states re-read)."""
        if fenced != self.fenced:
            self.fenced = fenced
            log.warning(
                "ZooKeeper session %s: %s leadership",
                "lost" if fenced else "re-established",
                "fencing" if fenced else "resuming",
            )
        if fenced:
            for partition in self.partitions.values():
                partition.fail_acks(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    async def run_isr_expiration(self) -> None:
        """Drop lagging followers from the ISRs led here, every half of replica.lag.time.max.ms."""
        max_lag = self.settings.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max_lag / 2000)
            for hosted in current_slices(self.partitions):
                if not self.fenced:
                    self._isr.shrink((partition for _, partition in hosted), max_lag)
                await asyncio.sleep(0)  # the other clients are served between slices

    def inter_broker_address(self, broker_id: int) -> PeerAddress | None:
        """Where this broker reaches ``broker_id``: ``inter.broker.listener.name``, else
        the first endpoint speaking ``security.inter.broker.protocol``; with the
        security that listener asks of its clients."""
        registration = self._cluster.live_brokers().get(broker_id)
        if registration is None:
            return None
        endpoint = _pick_endpoint(registration.endpoints, self.settings)
        if endpoint is None:
            return None
        return PeerAddress(endpoint.host, endpoint.port, self.peer_security)

    # -- lookups for the request handlers ----------------------------------------------------

    def topic_name(self, topic_id: bytes) -> str | None:
        """The name of a topic of the cluster, hosted here or not: Kafka resolves topic
        IDs against its whole metadata cache (``topicIdsToNames``), so that a topic this
        broker holds no replica of is NOT_LEADER_OR_FOLLOWER rather than UNKNOWN_TOPIC_ID.
        """
        name = self.topic_names.get(topic_id)
        if name is None and self._cluster is not None:
            name = self._cluster.topic_name(topic_id)
        return name

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def knows(self, topic: str, index: int) -> bool:
        """Whether the partition exists in the cluster (Kafka's ``metadataCache.contains``),
        hosted here or not."""
        if (topic, index) in self.partitions:
            return True
        meta = self._cluster.topics().get(topic) if self._cluster else None
        return meta is not None and index in meta.partitions

    def check_known(self, topic: str, index: int) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION unless the cluster has the partition: Kafka's
        Produce and DeleteRecords check this before anything else."""
        if not self.knows(topic, index):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def partition_for(
        self, topic: str, index: int, current_leader_epoch: int = -1, *, require_leader: bool = True
    ) -> Partition:
        """The partition, checked as Kafka's ``getPartitionOrException`` and then
        ``localLogWithEpochOrThrow`` do: one this broker holds no replica of is
        NOT_LEADER_OR_FOLLOWER when the cluster has it (the client refreshes its
        metadata and finds the replicas) and UNKNOWN_TOPIC_OR_PARTITION otherwise;
        then the client's leader epoch, then leadership (while fenced, nothing is led).
        A partition whose log directory failed is KAFKA_STORAGE_ERROR."""
        if (topic, index) in self.offline:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"Partition {topic}-{index} is offline: its log directory failed",
            )
        partition = self.partitions.get((topic, index))
        if partition is None:
            self.check_known(topic, index)
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        partition.check_leader_epoch(current_leader_epoch)
        if require_leader and (self.fenced or not partition.is_leader):
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it; Kafka's errors otherwise."""
        return self.partition_for(topic, index)

    def is_offline(self, topic: str, index: int) -> bool:
        """Whether the partition's log directory here failed."""
        return (topic, index) in self.offline

    def offline_here(self, topic: str) -> frozenset[tuple[int, int]]:
        """(this broker, partition) for each partition of ``topic`` whose log directory
        failed here: offline replicas, which Metadata reports."""
        return frozenset((self.broker_id, p) for t, p in self.offline if t == topic)

    def leader_hint(self, topic: str, index: int) -> LeaderHint:
        """The leader as the cluster metadata knows it: -1 when there is none alive."""
        meta = self._cluster.topics().get(topic) if self._cluster else None
        pm = None if meta is None else meta.partitions.get(index)
        if pm is None or pm.leader not in self._cluster.live_brokers():
            return LeaderHint(-1, -1)
        return LeaderHint(pm.leader, pm.leader_epoch)

    def append_txn_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        timeout_ms: int = DEFAULT_MARKER_TIMEOUT_MS,
    ) -> ErrorCode | Coroutine[Any, Any, ErrorCode]:
        """Write the marker ending a transaction to a partition led here, answered once the
        high watermark passes it (Kafka's ``handleWriteTxnMarkersRequest``, acks=-1): the
        answer itself when it is known at once (the append failed, or no follower has to
        fetch the marker), else a coroutine that waits for it. The caller writing a
        transaction's markers thus appends them all before it waits for any, and
        without followers finishes without yielding to the event loop.

        A partition this broker holds no replica of is UNKNOWN_TOPIC_OR_PARTITION
        (Kafka asks the local log's message format first); one it does not lead
        (or while fenced) NOT_LEADER_OR_FOLLOWER; then the append's errors
        (NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
        KAFKA_STORAGE_ERROR), and the wait's: REQUEST_TIMED_OUT after ``timeout_ms``,
        NOT_LEADER_OR_FOLLOWER if leadership is lost, NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        """
        if (topic, partition) not in self.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            hosted = self.partition_for(topic, partition)
            result = hosted.append_txn_marker(
                producer_id, producer_epoch, coordinator_epoch, committed
            )
        except KafkaError as exc:
            log.debug("marker for producer %d to %s-%d: %s", producer_id, topic, partition, exc)
            return exc.code
        end = result.last_offset + 1
        outcome = hosted.acks_outcome(end)
        if outcome is not None:
            return outcome
        return _replicated(hosted, end, timeout_ms)

    async def wait_for_append(
        self,
        partitions: Iterable[Partition],
        timeout: float,
        *,
        for_follower: bool = False,
        and_high_watermark: bool = False,
    ) -> bool:
        """Wait until any of ``partitions`` gets new data (followers: an append, and
        with ``and_high_watermark`` a higher high watermark too; consumers: a higher
        high watermark), or ``timeout`` seconds pass.

        One future is parked on every partition's waiter list; nothing runs
        while the wait lasts.
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        partitions = list(partitions)
        for p in partitions:
            p.add_waiter(fut, for_follower=for_follower)
            if for_follower and and_high_watermark:
                p.add_waiter(fut, for_follower=False)
        handle = loop.call_later(timeout, lambda: fut.done() or fut.set_result(False))
        try:
            return await fut
        finally:
            handle.cancel()
            for p in partitions:
                p.remove_waiter(fut)


async def _replicated(hosted: Partition, end: int, timeout_ms: int) -> ErrorCode:
    """A marker's answer once the high watermark passes ``end``; REQUEST_TIMED_OUT after
    ``timeout_ms``."""
    try:
        return await asyncio.wait_for(
            hosted.wait_for_high_watermark(end), max(timeout_ms, 0) / 1000
        )
    except TimeoutError:
        return ErrorCode.REQUEST_TIMED_OUT


def first_epoch(pm: PartitionMetadata, broker_id: int) -> int | None:
    """The leader epoch a new log of ``pm`` starts with, if known: its state's when this
    broker leads; 0 while the state is not read yet (a new partition's, whoever leads:
    its empty log starts epoch 0 at offset 0). A follower's comes with its data."""
    if pm.state is None:
        return 0
    return pm.leader_epoch if pm.leader == broker_id else None


def _pick_endpoint(endpoints: Iterable[Endpoint], settings: ReplicationSettings) -> Endpoint | None:
    for endpoint in endpoints:
        if settings.inter_broker_listener is not None:
            if endpoint.listener == settings.inter_broker_listener:
                return endpoint
        elif endpoint.security_protocol == settings.inter_broker_protocol:
            return endpoint
    return None
