"""The controller: one broker, elected through the ephemeral ``/controller`` znode.

Every broker runs this; one at a time is active. The active controller
reconciles the partition states with the live brokers (``elections``): it
elects leaders when brokers die or return, creates the states of partitions
that had no live replica at creation, moves leadership back to preferred
replicas (``auto.leader.rebalance.enable`` and ElectLeaders). It runs on
every change it may care about, coalesced: a pass looks at the partitions whose
topic or state changed since the last one, and at all of them after a change of
brokers, controller, session or broker config (or a failed pass).

How brokers learn the new states
--------------------------------
The controller only writes the state znodes; every broker already watches
them through ``ClusterMetadata`` and acts on each change (``ReplicaManager``).
Kafka's ZooKeeper mode sent LeaderAndIsr and UpdateMetadata requests instead,
for two reasons that do not apply here: ZooKeeper watches were once costly
with many thousands of partitions, and brokers cached metadata the controller
pushed. Here the watches exist anyway (every broker answers Metadata from its
own cache), ZooKeeper delivers one session's events in order, and no second
channel can disagree with the znodes. The leader epoch in the znode orders the
decisions, so a broker that misses intermediate states (a watch fires once
for several changes) still ends up right.

Failed log directories
----------------------
A broker whose log directory fails writes a log dir event
(``log_dir_events``); the controller takes the events, asks each such broker
which of its replicas are offline (``offline_replicas``), and from then on
counts those replicas as dead: they leave the ISR, and leadership moves to
another in-sync replica, as in Kafka's ``onReplicasBecomeOffline``. The
broker's next registration (a restart: a new broker epoch) forgets them.

Kafka's controller also sends LeaderAndIsr to every live broker when it is
elected and to each broker that starts, and marks offline the replicas that
answer KAFKA_STORAGE_ERROR. The equivalent here: a newly elected controller
asks every registered broker, and then each new registration (a broker that
starts, perhaps with a directory unusable since start-up), once. The questions
run in the background, so that no election waits for a slow or dying broker;
an answer with news brings a pass over everything. Until a broker has answered, no
unclean election picks its replicas: an unclean leader whose replica turns out
offline would leave the partition with an ISR of that replica alone, stuck even
after the last in-sync replica returns. (A clean election may pick one of its
replicas in the ISR; the answer moves leadership off it again, as in Kafka.)

Fencing
-------
Each controller takes a new ``/controller_epoch`` when elected and writes it
into every state it sets. Every write is a compare-and-set on the state
znode's version, so a deposed controller that has not noticed yet cannot
overwrite a decision it has not seen; and a controller that finds a state
written under a higher controller epoch resigns at once. A controller also
resigns when ``/controller`` names another broker or its session is lost.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kpybroker.cluster import elections, replica_moves
from kpybroker.cluster.broker_client import BrokerConnectionError
from kpybroker.cluster.offline_replicas import OfflineReplicas
from kpybroker.cluster.replication_settings import ReplicationSettings
from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import (
    Assignment,
    ChangeKind,
    MetadataChange,
    PartitionMetadata,
    PartitionState,
    PartitionStateConflictError,
)
from kpybroker.metadata.store import MetadataStoreError
from kpybroker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: What a pass looks at: (topic, partition), or (topic, None) for all of a topic's
#: partitions; None for every partition.
Scope = set[tuple[str, int | None]] | None

#: Attempts at an ElectLeaders election that loses a compare-and-set race.
ELECTION_ATTEMPTS = 5


class NotControllerError(KafkaError):
    def __init__(self) -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")


@dataclass(frozen=True, slots=True)
class Write:
    """One state change the controller decided."""

    topic: str
    partition: int
    state: PartitionState
    version: int | None
    why: str


class Controller:
    def __init__(
        self,
        broker_id: int,
        cluster: ClusterMetadata,
        settings: ReplicationSettings,
        unclean_allowed: Callable[[str], bool],
        offline_replicas: OfflineReplicas,
    ) -> None:
        self.broker_id = broker_id
        self.cluster = cluster
        self.settings = settings
        self.unclean_allowed = unclean_allowed
        self.offline_replicas = offline_replicas
        #: broker -> (its broker epoch, its replicas in failed log directories)
        self._offline: dict[int, tuple[int, frozenset[TopicPartition]]] = {}
        #: broker -> the broker epoch (registration) asked for its offline replicas
        self._asked: dict[int, int] = {}
        #: brokers asked whose answer has not come yet
        self._unanswered: set[int] = set()
        #: a pass held an unclean election back until such an answer
        self._unclean_deferred = False
        self._questions: set[asyncio.Task[None]] = set()
        self._log_dir_events = False
        self.epoch: int | None = None
        """The controller epoch while this broker is the active controller, else None."""
        self._wake = asyncio.Event()
        self._pending: Scope = None

    @property
    def active(self) -> bool:
        return self.epoch is not None

    @property
    def offline(self) -> dict[int, frozenset[TopicPartition]]:
        """The replicas this controller counts offline, per broker."""
        return {broker: replicas for broker, (_, replicas) in self._offline.items()}

    def on_change(self, change: MetadataChange) -> None:
        """Metadata listener: any change may call for a pass (a config change may enable
        unclean leader election)."""
        if change.kind is ChangeKind.LOG_DIR_EVENT:
            self._log_dir_events = True
        elif self._pending is not None:
            if change.kind is ChangeKind.PARTITION:
                self._pending.add((change.name, change.partition))
            elif change.kind in (ChangeKind.TOPIC, ChangeKind.TOPIC_CONFIG):
                self._pending.add((change.name, None))
            else:
                self._pending = None
        self._wake.set()

    async def start(self) -> None:
        """Contend for ``/controller`` once before the broker serves, so that a single
        broker names itself controller from its first answer."""
        await self._try_step()

    async def run(self) -> None:
        """Contend for ``/controller`` and, while holding it, reconcile on every change."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not await self._try_step():
                await asyncio.sleep(self.settings.fetch_backoff_ms / 1000)

    async def _try_step(self) -> bool:
        """One pass; a failed one (ZooKeeper unreachable) is retried by the next."""
        try:
            await self._step()
        except (KafkaError, MetadataStoreError) as exc:
            log.warning("controller pass failed (%r); retrying", exc)
            self._wake.set()
            return False
        return True

    async def run_rebalance(self) -> None:
        """``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds``."""
        while True:
            await asyncio.sleep(self.settings.leader_imbalance_check_interval_s)
            if self.active:
                try:
                    await self._apply(self._imbalanced())
                except MetadataStoreError as exc:
                    log.warning("preferred leader elections failed (%r)", exc)

    async def _step(self) -> None:
        cluster = self.cluster
        if cluster.session_lost:
            self._resign("the ZooKeeper session is lost")
            return
        if self.active and cluster.controller_id != self.broker_id:
            self._resign(f"broker {cluster.controller_id} is controller")
        if not self.active and cluster.controller_id is None:
            self.epoch = await cluster.elect_controller(self.broker_id)
            if self.active:
                log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
                self._pending = None
                self._log_dir_events = True
                self._offline.clear()
                self._asked.clear()
                self._unanswered.clear()
        if self.active:
            if self._log_dir_events:
                self._log_dir_events = False
                for broker in await self.cluster.take_log_dir_events():
                    self._ask(broker)
            for broker in self.cluster.live_brokers():
                self._ask(broker, only_new=True)
            scope, self._pending = self._pending, set()
            try:
                await self._apply(self._reconcile(scope))
                await self._complete_reassignments(scope)
            except BaseException:
                self._pending = None
                raise

    def _resign(self, why: str) -> None:
        if self.active:
            log.warning("broker %d resigns as controller: %s", self.broker_id, why)
            self.epoch = None

    # -- failed log directories ----------------------------------------------------------

    def _ask(self, broker: int, *, only_new: bool = False) -> None:
        """Ask ``broker`` in the background which of its replicas are offline (after its
        log dir event; with ``only_new``, only if its registration was not asked yet)."""
        registration = self.cluster.live_brokers().get(broker)
        if registration is None:
            return  # gone: all its replicas count as dead anyway
        if only_new and self._asked.get(broker) == registration.epoch:
            return
        self._asked[broker] = registration.epoch
        self._unanswered.add(broker)
        task = asyncio.get_running_loop().create_task(
            self._question(broker, registration.epoch, self.epoch)
        )
        self._questions.add(task)
        task.add_done_callback(self._questions.discard)

    async def _question(self, broker: int, broker_epoch: int, controller_epoch: int) -> None:
        """Ask until answered, while this controller and the broker's registration last
        (a starting broker answers once it serves); learn the answer."""

        def current() -> bool:
            registration = self.cluster.live_brokers().get(broker)
            return (
                self.epoch == controller_epoch
                and registration is not None
                and registration.epoch == broker_epoch
            )

        failures = 0
        learned = False
        try:
            while current():
                assigned = [
                    (topic, pm.partition)
                    for topic, pm in self._partitions()
                    if broker in pm.replicas
                ]
                try:
                    offline = await self.offline_replicas(broker, assigned)
                except (BrokerConnectionError, OSError, TimeoutError) as exc:
                    failures += 1
                    if failures == 1:
                        log.info("asking broker %d for offline replicas: %r; retrying", broker, exc)
                    await asyncio.sleep(self.settings.fetch_backoff_ms / 1000)
                    continue
                learned = current() and self._learn(broker, broker_epoch, offline)
                return
        finally:
            if self.epoch == controller_epoch and self._asked.get(broker) == broker_epoch:
                self._unanswered.discard(broker)
                if learned or self._unclean_deferred:
                    self._unclean_deferred = False  # the pass sets it again if need be
                    self._pending = None
                    self._wake.set()

    def _learn(self, broker: int, broker_epoch: int, offline: frozenset[TopicPartition]) -> bool:
        """Count ``offline`` among ``broker``'s offline replicas until it registers again;
        True if any of them is news."""
        epoch, known = self._offline.get(broker, (broker_epoch, frozenset()))
        if epoch != broker_epoch:
            known = frozenset()  # learned of its previous registration
        if offline <= known:
            return False
        self._offline[broker] = (broker_epoch, known | offline)
        log.info(
            "broker %d: replicas offline after a log directory failure: %s",
            broker,
            ", ".join(f"{t}-{p}" for t, p in sorted(known | offline)),
        )
        return True

    def _answered(self, replicas: Iterable[int]) -> bool:
        """Whether every broker of ``replicas`` has told which of its replicas are offline
        (if not, an unclean election among them waits for the answers)."""
        if self._unanswered.isdisjoint(replicas):
            return True
        self._unclean_deferred = True
        return False

    def _online(self, topic: str, partition: int, live: Collection[int]) -> Collection[int]:
        """The live brokers whose replica of the partition is not in a failed directory."""
        failed = {b for b, (_, replicas) in self._offline.items() if (topic, partition) in replicas}
        return set(live) - failed if failed else live

    def _forget_restarted(self) -> None:
        """Offline replicas count until their broker registers again (a restart)."""
        brokers = self.cluster.live_brokers()
        self._offline = {
            broker: entry
            for broker, entry in self._offline.items()
            if broker in brokers and brokers[broker].epoch == entry[0]
        }

    # -- decisions -------------------------------------------------------------------------

    def _partitions(self) -> Iterable[tuple[str, PartitionMetadata]]:
        for name, meta in list(self.cluster.topics().items()):
            for pm in meta.partitions.values():
                yield name, pm

    def _in_scope(self, scope: Scope) -> Iterable[tuple[str, PartitionMetadata]]:
        if scope is None:
            yield from self._partitions()
            return
        topics = self.cluster.topics()
        whole = {name for name, partition in scope if partition is None}
        for name in whole:
            if (meta := topics.get(name)) is not None:
                for pm in meta.partitions.values():
                    yield name, pm
        for name, partition in scope:
            if name in whole or (meta := topics.get(name)) is None:
                continue
            if (pm := meta.partitions.get(partition)) is not None:
                yield name, pm

    def _reconcile(self, scope: Scope = None) -> list[Write]:
        """States that must change, for the live brokers as they are now, among the
        partitions in ``scope``."""
        live = self.cluster.live_brokers().keys()
        unclean_allowed = functools.cache(self.unclean_allowed)
        self._forget_restarted()
        writes = []
        for topic, pm in self._in_scope(scope):
            if pm.state is None:
                if scope is not None:
                    # A new topic's states are written by its creator and may not be
                    # read yet; those it could not write (no live replica) wait for a
                    # broker change, which brings a pass over everything.
                    continue
                state = elections.initial_state(pm.replicas, live, self.epoch)
                why = "first live replica"
            else:
                state = elections.after_broker_changes(
                    pm.replicas,
                    pm.state,
                    self._online(topic, pm.partition, live),
                    unclean_allowed(topic) and self._answered(pm.replicas),
                    self.epoch,
                )
                why = "brokers changed"
            if state is not None:
                writes.append(Write(topic, pm.partition, state, pm.state_version, why))
        return writes

    def _imbalanced(self) -> list[Write]:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for each broker whose share of
        the partitions it prefers but does not lead exceeds
        ``leader.imbalance.per.broker.percentage``, elect it where it can lead."""
        live = self.cluster.live_brokers().keys()
        by_preferred: dict[int, list[tuple[str, PartitionMetadata]]] = {}
        for topic, pm in self._partitions():
            if pm.replicas and pm.state is not None and pm.replicas[0] in live:
                by_preferred.setdefault(pm.replicas[0], []).append((topic, pm))
        threshold = self.settings.leader_imbalance_per_broker_percentage / 100
        writes = []
        for broker, partitions in by_preferred.items():
            moved = [(t, pm) for t, pm in partitions if pm.leader != broker]
            if len(moved) / len(partitions) <= threshold:
                continue
            for topic, pm in moved:
                try:
                    state = elections.preferred(pm.replicas, pm.state, live, self.epoch)
                except KafkaError:
                    continue
                writes.append(Write(topic, pm.partition, state, pm.state_version, "preferred"))
        return writes

    # -- writing -------------------------------------------------------------------------

    async def _apply(self, writes: list[Write]) -> None:
        """Write every decision; then raise the first store failure (ZooKeeper unreachable),
        so that the pass is retried."""
        outcomes = await asyncio.gather(*(self._write(w) for w in writes), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _write(self, write: Write) -> bool:
        """Compare-and-set one decision; False when it lost a race (the watch on the znode
        brings the winner's state, and with it another pass)."""
        if not self.active:
            return False
        current = self._current(write.topic, write.partition)
        written_by = (
            -1 if current is None or current.state is None else current.state.controller_epoch
        )
        if written_by > self.epoch:
            self._resign(f"a state was written by controller epoch {written_by}")
            return False
        try:
            await self.cluster.set_partition_state(
                write.topic, write.partition, write.state, write.version
            )
        except KafkaError as exc:
            log.info("%s-%d: %s", write.topic, write.partition, exc.message)
            return False
        state = write.state
        log.info(
            "%s-%d: leader %d, epoch %d, ISR %s (%s)",
            write.topic,
            write.partition,
            state.leader,
            state.leader_epoch,
            list(state.isr),
            write.why,
        )
        return True

    def _current(self, topic: str, partition: int) -> PartitionMetadata | None:
        meta = self.cluster.topics().get(topic)
        return None if meta is None else meta.partitions.get(partition)

    # -- reassignments -------------------------------------------------------------------

    async def reassign(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments: start moving partitions to their target replicas
        (None: cancel the move); per partition, None or the error. The passes complete
        the moves. NotControllerError unless this broker is the controller."""
        if not self.active:
            raise NotControllerError()
        by_topic: dict[str, dict[int, Sequence[int] | None]] = {}
        for (topic, partition), target in targets.items():
            by_topic.setdefault(topic, {})[partition] = target
        outcomes: dict[TopicPartition, KafkaError | None] = {}
        for topic, wanted in by_topic.items():
            for _ in range(ELECTION_ATTEMPTS):
                try:
                    outcomes |= await self._reassign_topic(
                        topic, wanted, allow_replication_factor_change
                    )
                    break
                except PartitionStateConflictError:
                    if not self.active:
                        raise NotControllerError() from None
                    await self.cluster.refresh_topic(topic)
                    await asyncio.gather(
                        *(self.cluster.refresh_partition_state(topic, p) for p in wanted)
                    )
            else:
                busy = KafkaError(ErrorCode.REQUEST_TIMED_OUT, "the topic kept changing")
                outcomes |= {(topic, p): busy for p in wanted}
        return outcomes

    async def _reassign_topic(
        self, topic: str, wanted: Mapping[int, Sequence[int] | None], allow_rf_change: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        meta = self.cluster.topics().get(topic)
        live = self.cluster.live_brokers().keys()
        outcomes: dict[TopicPartition, KafkaError | None] = {}
        changes: dict[int, Assignment] = {}
        for partition, target in wanted.items():
            pm = None if meta is None else meta.partitions.get(partition)
            try:
                if pm is None:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        # Kafka's ReplicationControlManager.alterPartitionReassignment
                        f"Unable to find a topic named {topic}."
                        if meta is None
                        else f"Unable to find partition {topic}:{partition}.",
                    )
                assignment = replica_moves.start(pm, target, live, allow_rf_change)
                # Replicas dropped at once (a cancellation, a new target) first give up
                # leadership and their ISR places, as Kafka changes both together.
                if pm.state is not None and set(pm.replicas) - set(assignment.replicas):
                    fitted = replica_moves.fitted_state(
                        pm.state, assignment.replicas, live, self.epoch
                    )
                    if fitted is not None:
                        why = "reassignment cancelled or changed"
                        write = Write(topic, partition, fitted, pm.state_version, why)
                        if not await self._write(write):
                            raise PartitionStateConflictError(topic, partition, pm.state_version)
            except KafkaError as exc:
                if isinstance(exc, PartitionStateConflictError):
                    raise
                outcomes[(topic, partition)] = exc
                continue
            changes[partition] = assignment
            outcomes[(topic, partition)] = None
        if changes:
            await self.cluster.reassign(topic, changes)
            for partition, assignment in changes.items():
                log.info(
                    "%s-%d: replicas %s (adding %s, removing %s)",
                    topic,
                    partition,
                    list(assignment.replicas),
                    list(assignment.adding),
                    list(assignment.removing),
                )
        return outcomes

    async def _complete_reassignments(self, scope: Scope) -> None:
        """Finish the moves whose target replicas are all in sync: the removed replicas
        leave the ISR and leadership, then the assignment becomes the target."""
        done = [
            (topic, pm)
            for topic, pm in self._in_scope(scope)
            if replica_moves.ready_to_complete(pm)
        ]
        if done:
            await asyncio.gather(*(self._complete(topic, pm) for topic, pm in done))

    async def _complete(self, topic: str, pm: PartitionMetadata) -> None:
        target = replica_moves.target_replicas(pm)
        assert pm.state is not None
        live = self.cluster.live_brokers().keys()
        try:
            fitted = replica_moves.fitted_state(pm.state, target, live, self.epoch)
        except KafkaError:
            return  # no target replica can lead yet: a later pass will see one
        if fitted is not None:
            write = Write(topic, pm.partition, fitted, pm.state_version, "reassignment")
            if not await self._write(write):
                return  # the winner's state brings another pass
        try:
            await self.cluster.reassign(topic, {pm.partition: Assignment(target)})
        except PartitionStateConflictError:
            return  # the topic changed meanwhile: its watch brings another pass
        log.info("%s-%d: reassignment to %s complete", topic, pm.partition, list(target))

    # -- ElectLeaders ----------------------------------------------------------------------

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition], unclean: bool
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect preferred (or, with ``unclean``, any live) leaders; per partition, None
        on success or the error. NotControllerError unless this broker is the controller."""
        if not self.active:
            raise NotControllerError()
        wanted = list(dict.fromkeys(partitions))
        outcomes = await asyncio.gather(*(self._elect(t, p, unclean) for t, p in wanted))
        return dict(zip(wanted, outcomes, strict=True))

    async def _elect(self, topic: str, partition: int, unclean: bool) -> KafkaError | None:
        strategy = elections.unclean if unclean else elections.preferred
        for _ in range(ELECTION_ATTEMPTS):
            pm = self._current(topic, partition)
            if pm is None or pm.state is None:
                # Kafka's ReplicationControlManager.electLeader
                unknown_topic = self.cluster.topics().get(topic) is None
                return KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such topic as {topic}"
                    if unknown_topic
                    else f"No such partition as {topic}-{partition}",
                )
            live = self._online(topic, partition, self.cluster.live_brokers().keys())
            try:
                state = strategy(pm.replicas, pm.state, live, self.epoch)
            except KafkaError as exc:
                return exc
            why = "unclean election" if unclean else "preferred leader election"
            if await self._write(Write(topic, partition, state, pm.state_version, why)):
                return None
            if not self.active:
                return NotControllerError()
            await self.cluster.refresh_partition_state(topic, partition)
        return KafkaError(ErrorCode.REQUEST_TIMED_OUT, "the partition kept changing; try again")
