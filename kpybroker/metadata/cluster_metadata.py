"""``ClusterMetadata``: the broker's cached, watched view of the cluster, and every write.

The znodes and their payloads are those of Kafka 3.x in ZooKeeper mode
(``kafka.zk.ZkData``; the table is in ``znodes``), so that Kafka's tooling and
habits for reading ZooKeeper apply unchanged.

The cache is level-triggered: a watch event only says "look again"; the
handler re-reads the node (which re-arms the watch), stores the result, and
tells listeners *what* changed (``MetadataChange``) only when the decoded value
differs. Listeners then read the new value from the cache. Refreshes run one at
a time per node and apply what they read before awaiting anything else; since a
session's replies come back in request order, the cache applies each node's
changes in the order the store made them.

Every write method refreshes what it wrote before returning, so the caller sees
its own write in the cache.

This module is where the pieces meet: it follows the layout of ``znodes``
with the machinery of ``watches``, serves reads from the views that builds,
and is the only place that writes cluster metadata, so that each write can
refresh what it changed. The values it hands out are those of ``model``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from contextlib import suppress
from functools import partial
from types import MappingProxyType
from typing import TypeVar

from kpybroker.metadata.log_dir_events import (
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    pending_log_dir_events,
    propagate_log_dir_event,
    take_log_dir_events,
)
from kpybroker.metadata.model import (
    Assignment,
    BrokerIdInUseError,
    BrokerRegistration,
    ChangeKind,
    ChangeListener,
    Endpoint,
    MetadataChange,
    PartitionMetadata,
    PartitionState,
    PartitionStateConflictError,
    TopicExistsError,
    TopicMetadata,
    UnknownTopicError,
    random_uuid,
    uuid_to_str,
)
from kpybroker.metadata.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SessionState,
    WatchCallback,
    WatchedEvent,
    join_path,
)
from kpybroker.metadata.topic_names import validate_topic_name
from kpybroker.metadata.watches import (
    ChildMirror,
    Refresher,
    TopicViewCache,
    TopicViews,
    decode_or_none,
    read_watched,
    store_value,
)
from kpybroker.metadata.znodes import (
    BROKER_CONFIGS_PATH,
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONTAINER_PATHS,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DEFAULT_BROKER_ENTITY,
    GROUP_CONFIGS_PATH,
    TOPIC_CONFIGS_PATH,
    TOPICS_PATH,
    decode_broker,
    decode_cluster_id,
    decode_config,
    decode_controller,
    decode_controller_epoch,
    decode_state_entry,
    decode_topic,
    encode_broker,
    encode_cluster_id,
    encode_config,
    encode_controller,
    encode_controller_epoch,
    encode_state,
    encode_topic,
    group_entity,
    group_of_entity,
    partition_path,
    partition_state_path,
    topic_path,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError

__all__ = ["ClusterMetadata"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Partition state znodes written or read at once: a topic of 50,000 partitions is
#: handled in slices, each a short turn of the event loop, so that clients are
#: served in between.
CHUNK = 200


def _validate_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """The checks of Kafka's AdminZkClient.validateTopicCreate on a replica assignment."""

    def invalid(message: str) -> KafkaError:
        return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

    if not assignment:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "a topic needs at least one partition")
    if sorted(assignment) != list(range(len(assignment))):
        raise invalid("partitions should be a consecutive 0-based integer sequence")
    if len({len(replicas) for replicas in assignment.values()}) != 1:
        raise invalid("all partitions should have the same number of replicas")
    for partition, replicas in assignment.items():
        if not replicas or len(set(replicas)) != len(replicas) or min(replicas) < 0:
            raise invalid(f"invalid replicas {list(replicas)} for partition {partition}")


def _slices(items: Sequence[_T]) -> list[Sequence[_T]]:
    """``items`` in slices of ``CHUNK`` (``itertools.batched`` is Python 3.12)."""
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and (exc := done.exception()) is not None:
        log.warning("refreshing cluster metadata failed", exc_info=exc)


# -- the cluster view ------------------------------------------------------------


class ClusterMetadata:
    """The broker's cached, watched view of the cluster, and the writes it makes.

    ``await start()`` loads everything and arms the watches; ``close()`` stops
    following changes (it does not close the store). After the store's session
    is lost and re-established, the broker registration is recreated and
    everything is read again, as Kafka brokers did.

    Issue independent writes concurrently (``asyncio.gather``): stores commit
    concurrent writes together, while each sequential write pays a full commit
    (for the built-in store, a snapshot write and fsync).
    """

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._refresher = Refresher()
        self._listeners: list[ChangeListener] = []
        mirror = partial(ChildMirror, store, self._refresher, self._refresh_later)
        self._brokers = mirror(
            BROKER_IDS_PATH, decode_broker, partial(self._changed, ChangeKind.BROKER)
        )
        self._topic_nodes = mirror(TOPICS_PATH, decode_topic, self._topic_changed)
        self._topic_configs = mirror(
            TOPIC_CONFIGS_PATH, decode_config, partial(self._changed, ChangeKind.TOPIC_CONFIG)
        )
        self._broker_configs = mirror(
            BROKER_CONFIGS_PATH, decode_config, partial(self._changed, ChangeKind.BROKER_CONFIG)
        )
        self._group_configs = mirror(GROUP_CONFIGS_PATH, decode_config, self._group_config_changed)
        self._states: dict[str, dict[int, tuple[PartitionState, int]]] = {}
        self._views = TopicViewCache(self._topic_nodes, self._topic_configs, self._states)
        #: The watch left on every partition state znode: bound once, not a new 64-byte
        #: bound method per znode for the store to keep.
        self._partition_watch: WatchCallback = self._on_partition_event
        self._controller_id: int | None = None
        self._registration: tuple[int, tuple[Endpoint, ...], str | None] | None = None
        self._session_lost = False
        self._stale = False
        """From a session loss until everything is read again on the new session."""
        self._closed = False

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        for path in (*CONTAINER_PATHS, LOG_DIR_EVENT_NOTIFICATION_PATH):
            await self._ensure_node(path, make_parents=True)
        self.store.add_session_listener(self._on_session_state)
        await self._load_all()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with suppress(ValueError):  # not started
            self.store.remove_session_listener(self._on_session_state)
        await self._refresher.close()

    def add_listener(self, listener: ChangeListener) -> None:
        """Call ``listener`` after each change of the cache (on the event loop; must not block)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        self._listeners.remove(listener)

    # -- reads -----------------------------------------------------------------

    def topics(self) -> Mapping[str, TopicMetadata]:
        """All topics, by name. The mapping is live; each ``TopicMetadata`` is a snapshot."""
        return TopicViews(self._views)

    def partition(self, topic: str, index: int) -> tuple[uuid.UUID, PartitionMetadata] | None:
        """The topic id and one partition of ``topic``, or None: cheaper than
        ``topics()[topic]`` while a topic of thousands of partitions is being loaded."""
        return self._views.partition(topic, index)

    def topic_name(self, topic_id: bytes) -> str | None:
        """The name of the topic with this id (16 bytes), or None."""
        return self._views.name_of(topic_id)

    def live_brokers(self) -> Mapping[int, BrokerRegistration]:
        return {broker.broker_id: broker for broker in self._brokers.items.values()}

    @property
    def controller_id(self) -> int | None:
        return self._controller_id

    @property
    def session_lost(self) -> bool:
        """True from a session loss until the new session has re-read everything: the cache
        may be stale, and this broker's registration (and any /controller node) is gone."""
        return self._stale

    def broker_config(self, broker_id: int | None) -> Mapping[str, str]:
        """Dynamic configs of ``broker_id``, or the cluster-wide ones for None."""
        entity = DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        return MappingProxyType(self._broker_configs.items.get(entity, {}))

    def group_config(self, group_id: str) -> Mapping[str, str]:
        """The dynamic configs of group ``group_id`` (empty when it has none)."""
        return MappingProxyType(self._group_configs.items.get(group_entity(group_id), {}))

    def configured_groups(self) -> list[str]:
        """The ids of the groups that have dynamic configs."""
        return [
            group_of_entity(entity)
            for entity, configs in self._group_configs.items.items()
            if configs
        ]

    # -- log directory failures --------------------------------------------------

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller that a log directory of ``broker_id`` failed; every broker
        then sees a LOG_DIR_EVENT change, which the controller acts on."""
        await propagate_log_dir_event(self.store, broker_id)

    async def take_log_dir_events(self) -> list[int]:
        """For the controller: the brokers whose log directories failed since the last
        call; the notifications are deleted."""
        return await take_log_dir_events(self.store)

    # -- writes ----------------------------------------------------------------

    async def ensure_cluster_id(self) -> str:
        """Return the cluster id, creating it first if this is a new cluster."""
        new = encode_cluster_id(uuid_to_str(random_uuid()))
        with suppress(NodeExistsError):
            await self.store.create(CLUSTER_ID_PATH, new, make_parents=True)
        data, _ = await self.store.get(CLUSTER_ID_PATH)
        return decode_cluster_id(data)

    async def register_broker(
        self, broker_id: int, endpoints: Sequence[Endpoint], rack: str | None = None
    ) -> BrokerRegistration:
        """Register this broker (ephemeral node); re-registered after a session loss.

        Raises ``BrokerIdInUseError`` when another session holds the id.
        """
        self._registration = (broker_id, tuple(endpoints), rack)
        await self._register(*self._registration)
        return self._brokers.items[str(broker_id)]

    async def elect_controller(self, broker_id: int) -> int | None:
        """Try to become controller; return the new controller epoch, or None if another
        broker is controller."""
        controller = encode_controller(broker_id)
        try:
            await self.store.create(CONTROLLER_PATH, controller, ephemeral=True)
        except NodeExistsError:
            await self._refresher.request(self._load_controller)
            return None
        await self._ensure_node(CONTROLLER_EPOCH_PATH, encode_controller_epoch(0))
        while True:
            data, stat = await self.store.get(CONTROLLER_EPOCH_PATH)
            epoch = decode_controller_epoch(data) + 1
            with suppress(BadVersionError):
                data = encode_controller_epoch(epoch)
                await self.store.set(CONTROLLER_EPOCH_PATH, data, stat.version)
                break
        await self._refresher.request(self._load_controller)
        return epoch

    async def create_topic(
        self,
        name: str,
        replica_assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
    ) -> uuid.UUID:
        """Create a topic and its partition states; return its new topic id.

        Writes in Kafka's order: config, topic node, then partition states
        (leader = first live replica, ISR = live replicas; partitions with no
        live replica get no state, as with Kafka's controller).
        """
        validate_topic_name(name)
        _validate_assignment(replica_assignment)
        path = topic_path(name)
        if await self.store.exists(path) is not None:
            raise TopicExistsError(name)
        await self._set_or_create(join_path(TOPIC_CONFIGS_PATH, name), encode_config(configs or {}))
        topic_id = random_uuid()
        try:
            await self.store.create(path, encode_topic(topic_id, replica_assignment))
        except NodeExistsError:
            raise TopicExistsError(name) from None
        await self._ensure_node(join_path(path, "partitions"))
        await self._create_states(name, replica_assignment)
        await asyncio.gather(self._topic_nodes.refresh(name), self._topic_configs.refresh(name))
        await self._refresher.request(self._load_partition_states, name, False)
        return topic_id

    async def add_partitions(self, name: str, new_partitions: Mapping[int, Sequence[int]]) -> None:
        """Add partitions to a topic: the assignment first, then their states, as
        ``create_topic`` writes them. Raises ``UnknownTopicError``, and
        ``PartitionStateConflictError`` when the topic's assignment changed meanwhile."""
        validate_topic_name(name)
        path = topic_path(name)
        try:
            data, stat = await self.store.get(path)
        except NoNodeError:
            raise UnknownTopicError(name) from None
        node = decode_topic(name, data, stat)
        if node.replicas.keys() & new_partitions.keys():
            raise PartitionStateConflictError(name, min(new_partitions), stat.version)
        assignment = {**node.replicas, **new_partitions}
        _validate_assignment(assignment)
        try:
            data = encode_topic(node.topic_id, assignment, node.adding, node.removing)
            await self.store.set(path, data, stat.version)
        except (BadVersionError, NoNodeError) as exc:
            raise PartitionStateConflictError(name, min(new_partitions), stat.version) from exc
        await self._create_states(name, new_partitions)
        await self._topic_nodes.refresh(name)
        await self._refresher.request(self._load_partition_states, name, False)

    async def reassign(self, name: str, changes: Mapping[int, Assignment]) -> None:
        """Rewrite partitions' replicas (and their reassignment's adding and removing
        replicas) in the topic znode, compare-and-set on the version this cache read:
        ``PartitionStateConflictError`` when the znode changed meanwhile."""
        node = self._topic_nodes.items.get(name)
        if node is None:
            raise UnknownTopicError(name)
        replicas = dict(node.replicas)
        adding, removing = dict(node.adding), dict(node.removing)
        for partition, assignment in changes.items():
            replicas[partition] = assignment.replicas
            adding[partition] = assignment.adding
            removing[partition] = assignment.removing
        data = encode_topic(node.topic_id, replicas, adding, removing)
        try:
            await self.store.set(topic_path(name), data, node.version)
        except (BadVersionError, NoNodeError) as exc:
            raise PartitionStateConflictError(name, min(changes), node.version) from exc
        await self._topic_nodes.refresh(name)

    async def delete_topic(self, name: str) -> None:
        """Delete the topic's znodes (assignment, partition states, config)."""
        validate_topic_name(name)
        try:
            await self.store.delete(topic_path(name), recursive=True)
        except NoNodeError:
            raise UnknownTopicError(name) from None
        with suppress(NoNodeError):
            await self.store.delete(join_path(TOPIC_CONFIGS_PATH, name))
        await asyncio.gather(self._topic_nodes.refresh(name), self._topic_configs.refresh(name))

    async def set_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int | None
    ) -> int:
        """Compare-and-set a partition's state; return the state znode's new version.

        ``expected_version`` is the cached ``PartitionMetadata.state_version``:
        None creates the state, which must not exist yet. Raises
        ``PartitionStateConflictError`` when the znode is not as expected.
        """
        node = self._topic_nodes.items.get(topic)
        if node is None or partition not in node.replicas:
            raise UnknownTopicError(f"{topic}-{partition}")
        data = encode_state(state)
        if expected_version is None:
            try:
                await self._create_state(topic, partition, data)
            except NodeExistsError as exc:
                raise PartitionStateConflictError(topic, partition, expected_version) from exc
            except NoNodeError as exc:
                raise UnknownTopicError(topic) from exc
            version = 0
        else:
            path = partition_state_path(topic, partition)
            try:
                version = (await self.store.set(path, data, expected_version)).version
            except (BadVersionError, NoNodeError) as exc:
                raise PartitionStateConflictError(topic, partition, expected_version) from exc
        await self._refresher.request(self._load_partition, topic, partition)
        return version

    async def refresh_partition_state(self, topic: str, partition: int) -> None:
        """Read a partition's state znode again (after a failed compare-and-set, say)."""
        await self._refresher.request(self._load_partition, topic, partition)

    async def refresh_topic(self, topic: str) -> None:
        """Read a topic znode (its assignment) again (after a failed compare-and-set)."""
        await self._topic_nodes.refresh(topic)

    async def set_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides."""
        validate_topic_name(topic)
        if await self.store.exists(topic_path(topic)) is None:
            raise UnknownTopicError(topic)
        await self._set_or_create(join_path(TOPIC_CONFIGS_PATH, topic), encode_config(configs))
        await self._topic_configs.refresh(topic)

    async def set_broker_config(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``broker_id``, or the cluster-wide ones for None."""
        entity = DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        await self._set_or_create(join_path(BROKER_CONFIGS_PATH, entity), encode_config(configs))
        await self._broker_configs.refresh(entity)

    async def set_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of group ``group_id``; with none left, its znode goes
        (as Kafka drops a config resource whose last config is deleted)."""
        entity = group_entity(group_id)
        path = join_path(GROUP_CONFIGS_PATH, entity)
        if configs:
            await self._set_or_create(path, encode_config(configs))
        else:
            with suppress(NoNodeError):
                await self.store.delete(path)
        await self._group_configs.refresh(entity)

    # -- store helpers ---------------------------------------------------------

    async def _ensure_node(self, path: str, data: bytes = b"", make_parents: bool = False) -> None:
        with suppress(NodeExistsError):
            await self.store.create(path, data, make_parents=make_parents)

    async def _set_or_create(self, path: str, data: bytes) -> None:
        """Kafka's setOrCreateEntityConfigs: set, else create, retrying if someone races us."""
        while True:
            with suppress(NoNodeError):
                await self.store.set(path, data)
                return
            with suppress(NodeExistsError):
                await self.store.create(path, data)
                return

    async def _create_states(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        """New partitions' states: leader = first live replica, ISR = live replicas;
        partitions with no live replica get no state, as with Kafka's controller.
        A state that exists already was written by the controller meanwhile."""
        live = {int(broker) for broker in self._brokers.items}
        epoch = await self._controller_epoch()
        states = {}
        for partition, replicas in assignment.items():
            isr = tuple(broker for broker in replicas if broker in live)
            if isr:
                states[partition] = encode_state(PartitionState(isr[0], 0, isr, epoch))
        for chunk in _slices(list(states.items())):
            writes = (self._create_state(topic, partition, data) for partition, data in chunk)
            for outcome in await asyncio.gather(*writes, return_exceptions=True):
                if isinstance(outcome, BaseException) and not isinstance(outcome, NodeExistsError):
                    raise outcome

    async def _create_state(self, topic: str, partition: int, data: bytes) -> None:
        """Create a state znode with its missing parents, but never the topic node:
        ``make_parents`` would resurrect a topic deleted meanwhile as an empty node."""
        path = partition_state_path(topic, partition)
        try:
            await self.store.create(path, data)
        except NoNodeError:
            await self._ensure_node(join_path(topic_path(topic), "partitions"))
            await self._ensure_node(partition_path(topic, partition))
            await self.store.create(path, data)

    async def _controller_epoch(self) -> int:
        try:
            data, _ = await self.store.get(CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return 0
        return decode_controller_epoch(data)

    async def _register(
        self, broker_id: int, endpoints: tuple[Endpoint, ...], rack: str | None
    ) -> None:
        path = join_path(BROKER_IDS_PATH, str(broker_id))
        data = encode_broker(endpoints, rack)
        while True:
            with suppress(NodeExistsError):
                await self.store.create(path, data, ephemeral=True)
                break
            stat = await self.store.exists(path)
            if stat is None:
                continue  # the previous registration vanished meanwhile
            if stat.ephemeral_owner != self.store.session_id:
                raise BrokerIdInUseError(broker_id)
            await self.store.set(path, data)
            break
        await self._brokers.refresh(str(broker_id))

    # -- cache -----------------------------------------------------------------

    def _refresh_later(self, refresh: Callable[..., Awaitable[None]], *args: Hashable) -> None:
        """Answer a watch event: refresh in the background, logging failures."""
        if not self._closed:
            self._refresher.request(refresh, *args).add_done_callback(_log_failure)

    def _changed(self, kind: ChangeKind, name: str = "", partition: int = -1) -> None:
        if kind is ChangeKind.PARTITION:
            self._views.patch(name, partition)
        elif kind in (ChangeKind.TOPIC, ChangeKind.TOPIC_CONFIG):
            self._views.drop(name)
        change = MetadataChange(kind, name, partition)
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("metadata change listener %r failed", listener)

    def _group_config_changed(self, entity: str) -> None:
        self._changed(ChangeKind.GROUP_CONFIG, group_of_entity(entity))

    def _topic_changed(self, name: str) -> None:
        self._changed(ChangeKind.TOPIC, name)
        self._refresh_later(self._load_partition_states, name, False)

    async def _load_all(self) -> None:
        """Read everything and (re-)arm every watch."""
        await asyncio.gather(
            self._brokers.reload(True),
            self._topic_nodes.reload(True),
            self._topic_configs.reload(True),
            self._broker_configs.reload(True),
            self._group_configs.reload(True),
            self._refresher.request(self._load_controller),
            self._refresher.request(self._load_log_dir_events),
        )
        await asyncio.gather(
            *(
                self._refresher.request(self._load_partition_states, topic, True)
                for topic in list(self._topic_nodes.items)
            )
        )

    async def _load_partition_states(self, topic: str, everything: bool) -> None:
        """Follow the state znodes of the topic's partitions: the ones not followed
        yet, or all of them after a session loss dropped the watches."""
        node = self._topic_nodes.items.get(topic)
        if node is None:
            self._states.pop(topic, None)
            return
        states = self._states.setdefault(topic, {})
        for gone in states.keys() - node.replicas.keys():
            del states[gone]
        todo = node.replicas.keys() if everything else node.replicas.keys() - states.keys()
        for chunk in _slices(list(todo)):
            await asyncio.gather(
                *(self._refresher.request(self._load_partition, topic, p) for p in chunk)
            )

    async def _load_partition(self, topic: str, partition: int) -> None:
        node = self._topic_nodes.items.get(topic)
        if node is None or partition not in node.replicas:
            return
        path = partition_state_path(topic, partition)
        found = await read_watched(self.store, path, self._partition_watch, floor=topic_path(topic))
        states = self._states.get(topic)
        if states is None:
            return  # the topic went away meanwhile
        entry = None if found is None else decode_or_none(path, decode_state_entry, *found)
        if store_value(states, partition, entry):
            self._changed(ChangeKind.PARTITION, topic, partition)

    async def _load_controller(self) -> None:
        found = await read_watched(
            self.store, CONTROLLER_PATH, self._on_controller_event, floor="/"
        )
        controller = (
            None if found is None else decode_or_none(CONTROLLER_PATH, decode_controller, found[0])
        )
        if controller != self._controller_id:
            self._controller_id = controller
            self._changed(ChangeKind.CONTROLLER)

    async def _load_log_dir_events(self) -> None:
        if await pending_log_dir_events(self.store, self._on_log_dir_event):
            self._changed(ChangeKind.LOG_DIR_EVENT)

    async def _resync(self) -> None:
        """After a session loss the registration and all watches are gone: recreate
        the one, re-read everything to re-arm the others."""
        if self._registration is not None:
            await self._register(*self._registration)
        await self._load_all()
        if self._stale and not self._session_lost:
            self._stale = False
            self._changed(ChangeKind.SESSION)

    # -- watch and session callbacks ---------------------------------------------

    def _on_partition_event(self, event: WatchedEvent) -> None:
        # The path is a state node: /brokers/topics/<topic>/partitions/<p>/state
        parts = event.path.split("/")
        self._refresh_later(self._load_partition, parts[3], int(parts[5]))

    def _on_controller_event(self, event: WatchedEvent) -> None:
        self._refresh_later(self._load_controller)

    def _on_log_dir_event(self, event: WatchedEvent) -> None:
        self._refresh_later(self._load_log_dir_events)

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self._session_lost = True
            if not self._stale:
                self._stale = True
                self._changed(ChangeKind.SESSION)
        elif state is SessionState.CONNECTED and self._stale:
            # Also after a resync that failed on a session that then lived on.
            self._session_lost = False
            self._refresh_later(self._resync)
