"""The broker's view of cluster metadata, kept in a ``MetadataStore``.

The znodes and their payloads are those of Kafka 3.x in ZooKeeper mode
(``kafka.zk.ZkData``), compact JSON as Jackson wrote it, so that Kafka's
tooling and habits for reading ZooKeeper apply unchanged:

==============================================  ====================================
``/cluster/id``                                 ``{"version":"1","id":"<22 chars>"}``
``/controller`` (ephemeral)                     ``{"version":2,"brokerid":0,
                                                "timestamp":"<ms>","kraftControllerEpoch":-1}``
``/controller_epoch``                           the epoch as decimal text
``/brokers/ids/<id>`` (ephemeral)               broker registration, JSON version 5
``/brokers/topics/<topic>``                     ``{"version":3,"topic_id":..,"partitions":
                                                {"0":[0]},"adding_replicas":{},
                                                "removing_replicas":{}}``
``/brokers/topics/<t>/partitions/<p>/state``    ``{"controller_epoch":1,"leader":0,
                                                "version":1,"leader_epoch":0,"isr":[0]}``
``/config/topics/<topic>``                      ``{"version":1,"config":{..}}``
``/config/brokers/<id>``, ``<default>``         the same, dynamic broker configs
==============================================  ====================================

The cache is level-triggered: a watch event only says "look again"; the
handler re-reads the node (which re-arms the watch), stores the result, and
tells listeners *what* changed (``MetadataChange``) only when the decoded value
differs. Listeners then read the new value from the cache. Refreshes run one at
a time per node and apply what they read before awaiting anything else; since a
session's replies come back in request order, the cache applies each node's
changes in the order the store made them.

Every write method refreshes what it wrote before returning, so the caller sees
its own write in the cache.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import enum
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from kpybroker.metadata.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NodeStat,
    NoNodeError,
    SessionState,
    WatchCallback,
    WatchedEvent,
    join_path,
    node_name,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "DEFAULT_BROKER_ENTITY",
    "NO_LEADER",
    "BrokerIdInUseError",
    "BrokerRegistration",
    "ChangeKind",
    "ClusterMetadata",
    "Endpoint",
    "MetadataChange",
    "PartitionMetadata",
    "PartitionState",
    "PartitionStateConflictError",
    "TopicExistsError",
    "TopicMetadata",
    "UnknownTopicError",
    "random_uuid",
    "uuid_from_str",
    "uuid_to_str",
    "validate_topic_name",
]

log = logging.getLogger(__name__)

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIGS_PATH = "/config/topics"
BROKER_CONFIGS_PATH = "/config/brokers"
_CONTAINER_PATHS = (BROKER_IDS_PATH, TOPICS_PATH, TOPIC_CONFIGS_PATH, BROKER_CONFIGS_PATH)
"""Parents that must exist so that child watches on them can be set (Kafka's PersistentZkPaths)."""

DEFAULT_BROKER_ENTITY = "<default>"
"""Config entity of the cluster-wide dynamic broker configs (Kafka's ConfigEntityName.Default)."""
NO_LEADER = -1
RECOVERED = 0
"""``leader_recovery_state`` of a normal partition; Kafka writes the field only otherwise."""

_DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")
_RESERVED_UUIDS = (uuid.UUID(int=0), uuid.UUID(int=1))

_T = TypeVar("_T")


# -- ids -------------------------------------------------------------------------


def uuid_to_str(value: uuid.UUID) -> str:
    """Kafka's text form of a UUID: 22 characters of unpadded base64url."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> uuid.UUID:
    """Parse Kafka's text form of an id; raise ``ValueError`` unless it is canonical.

    The all-zero UUID is rejected: Kafka uses it to mean "no id", so a znode
    naming it as a topic id is corrupt.
    """
    if not _UUID_TEXT.fullmatch(text):
        raise ValueError(f"not a base64url UUID: {text!r}")
    value = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    if uuid_to_str(value) != text:
        raise ValueError(f"non-canonical UUID text: {text!r}")
    if value.int == 0:
        raise ValueError("the all-zero UUID is not a valid id")
    return value


def random_uuid() -> uuid.UUID:
    """A random id under the rules of Kafka's ``Uuid.randomUuid``.

    Never 0 ("no id") nor 1 (reserved for the KRaft metadata topic), and never
    one whose text starts with "-", which command-line tools would take for an
    option.
    """
    while True:
        value = uuid.uuid4()
        if value not in _RESERVED_UUIDS and not uuid_to_str(value).startswith("-"):
            return value


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rule; enforced here because the name becomes a path component."""
    if name in (".", "..") or not _TOPIC_NAME.fullmatch(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"invalid topic name {name!r}")


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


# -- errors ----------------------------------------------------------------------


class TopicExistsError(KafkaError):
    def __init__(self, topic: str) -> None:
        super().__init__(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")


class UnknownTopicError(KafkaError):
    def __init__(self, topic: str) -> None:
        super().__init__(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic or partition {topic}"
        )


class PartitionStateConflictError(KafkaError):
    """The partition state was not at the expected version: someone else changed it."""

    def __init__(self, topic: str, partition: int, expected_version: int | None) -> None:
        super().__init__(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"state of {topic}-{partition} is not at version {expected_version}",
        )


class BrokerIdInUseError(KafkaError):
    """Another live session (another broker) is registered under this broker id."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(
            ErrorCode.DUPLICATE_BROKER_REGISTRATION, f"broker id {broker_id} is already registered"
        )


# -- values ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An advertised listener."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        """``LISTENER://host:port`` as Kafka's ``EndPoint.connectionString`` (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    epoch: int
    """The registration node's czxid; Kafka's broker epoch, new for each registration."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The content of a partition's ``state`` znode (Kafka's LeaderIsrAndControllerEpoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as cached: its replicas and, once written, its state znode."""

    partition: int
    replicas: tuple[int, ...]
    state: PartitionState | None = None
    state_version: int | None = None
    """The state znode's version, to pass to ``set_partition_state``; None while it is absent."""
    adding: tuple[int, ...] = ()
    """Replicas a reassignment in progress adds (they are in ``replicas`` already)."""
    removing: tuple[int, ...] = ()
    """Replicas a reassignment in progress removes (still in ``replicas`` until it ends)."""

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def leader(self) -> int:
        return NO_LEADER if self.state is None else self.state.leader

    @property
    def leader_epoch(self) -> int:
        return -1 if self.state is None else self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic as cached. ``configs`` holds the topic's overrides only, not defaults."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionMetadata]
    configs: Mapping[str, str]


class ChangeKind(enum.Enum):
    """What a ``MetadataChange`` is about; see its fields for which name it carries."""

    BROKER = "broker"
    CONTROLLER = "controller"
    TOPIC = "topic"
    PARTITION = "partition"
    TOPIC_CONFIG = "topic_config"
    BROKER_CONFIG = "broker_config"
    SESSION = "session"
    """The store session was lost, or is back with everything read again (``session_lost``)."""


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """Something in the cache changed; read the cache for the new value (or its absence).

    ``name`` is the broker id (BROKER), the topic (TOPIC, PARTITION,
    TOPIC_CONFIG), the config entity (BROKER_CONFIG: a broker id or
    ``<default>``), or empty (CONTROLLER, SESSION). ``partition`` is set for PARTITION.
    A TOPIC change covers creation, deletion and a new assignment or topic id.
    """

    kind: ChangeKind
    name: str = ""
    partition: int = -1


ChangeListener = Callable[[MetadataChange], None]


@dataclass(frozen=True, slots=True)
class Assignment:
    """One partition's replicas as the topic znode holds them, with a reassignment's
    adding and removing replicas (Kafka's ``ReplicaAssignment``)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _TopicNode:
    topic_id: uuid.UUID
    replicas: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]]
    removing: Mapping[int, tuple[int, ...]]
    version: int


# -- znode payloads --------------------------------------------------------------


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(time.time_ns() // 1_000_000)


def _encode_broker(endpoints: Sequence[Endpoint], rack: str | None) -> bytes:
    """Version 5 of BrokerIdZNode; like Kafka, host/port name the first PLAINTEXT endpoint
    (for very old clients) and ``rack`` is omitted when there is none."""
    plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
    payload: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
        "endpoints": [e.connection_string for e in endpoints],
    }
    if rack is not None:
        payload["rack"] = rack
    payload |= {
        "jmx_port": -1,
        "host": None if plaintext is None else plaintext.host,
        "port": -1 if plaintext is None else plaintext.port,
        "timestamp": _now_ms(),
        "version": 5,
    }
    return _json(payload)


def _parse_endpoint(text: str, protocols: Mapping[str, str]) -> Endpoint:
    listener, _, address = text.partition("://")
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return Endpoint(listener, host, int(port), protocols.get(listener, listener))


def _decode_broker(name: str, data: bytes, stat: NodeStat) -> BrokerRegistration:
    info = json.loads(data)
    protocols = info.get("listener_security_protocol_map") or {}
    endpoints = tuple(_parse_endpoint(text, protocols) for text in info["endpoints"])
    return BrokerRegistration(int(name), endpoints, info.get("rack"), stat.czxid)


def _encode_topic(
    topic_id: uuid.UUID,
    assignment: Mapping[int, Sequence[int]],
    adding: Mapping[int, Sequence[int]] | None = None,
    removing: Mapping[int, Sequence[int]] | None = None,
) -> bytes:
    """Version 3 of Kafka's TopicZNode; a reassignment's adding and removing replicas are
    listed for the partitions that have them."""

    def listing(replicas: Mapping[int, Sequence[int]] | None) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted((replicas or {}).items()) if r}

    return _json(
        {
            "version": 3,
            "topic_id": uuid_to_str(topic_id),
            "partitions": listing(assignment),
            "adding_replicas": listing(adding),
            "removing_replicas": listing(removing),
        }
    )


def _decode_topic(name: str, data: bytes, stat: NodeStat) -> _TopicNode:
    info = json.loads(data)

    def listing(key: str) -> dict[int, tuple[int, ...]]:
        return {int(p): tuple(map(int, b)) for p, b in (info.get(key) or {}).items()}

    return _TopicNode(
        uuid_from_str(info["topic_id"]),
        listing("partitions"),
        listing("adding_replicas"),
        listing("removing_replicas"),
        stat.version,
    )


def _encode_state(state: PartitionState) -> bytes:
    payload: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != RECOVERED:
        payload["leader_recovery_state"] = state.leader_recovery_state
    return _json(payload)


def _decode_state_entry(data: bytes, stat: NodeStat) -> tuple[PartitionState, int]:
    """A state znode as cached: the state and the znode version to compare-and-set on."""
    info = json.loads(data)
    state = PartitionState(
        leader=int(info["leader"]),
        leader_epoch=int(info["leader_epoch"]),
        isr=tuple(map(int, info["isr"])),
        controller_epoch=int(info["controller_epoch"]),
        leader_recovery_state=int(info.get("leader_recovery_state", RECOVERED)),
    )
    return state, stat.version


def _encode_config(configs: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": dict(configs)})


def _decode_config(name: str, data: bytes, stat: NodeStat) -> dict[str, str]:
    return {key: str(value) for key, value in (json.loads(data).get("config") or {}).items()}


def _decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def _decode(path: str, decoder: Callable[..., _T], *args: Any) -> _T | None:
    """Decode a znode, or log and return None: one malformed node (written by
    someone else) must not stop the cache from following the rest."""
    try:
        return decoder(*args)
    except _DECODE_ERRORS:
        log.exception("ignoring malformed znode %s", path)
        return None


def _store(cache: dict[Any, _T], key: Any, value: _T | None) -> bool:
    """Put ``value`` (None: absence) into ``cache``; return whether that changed anything."""
    if value is None:
        return cache.pop(key, None) is not None
    if cache.get(key) == value:
        return False
    cache[key] = value
    return True


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


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and (exc := done.exception()) is not None:
        log.warning("refreshing cluster metadata failed", exc_info=exc)


# -- machinery -------------------------------------------------------------------


class _Refresher:
    """Runs refreshes one at a time per key, coalescing requests for the same key.

    The key is the refresh function and its arguments. A request made while
    that refresh runs gets one more run after it (the running one may have
    read before the change that prompted the request); all requests made
    meanwhile share that run. The future a request returns completes when a
    run that started after the request has finished.
    """

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}
        self._waiting: dict[Hashable, list[asyncio.Future[None]]] = {}

    def request(
        self, refresh: Callable[..., Awaitable[None]], *args: Hashable
    ) -> asyncio.Future[None]:
        key = (refresh, args)
        done = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(done)
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._drain(key, refresh, args))
        return done

    async def _drain(
        self, key: Hashable, refresh: Callable[..., Awaitable[None]], args: tuple[Hashable, ...]
    ) -> None:
        try:
            while waiters := self._waiting.pop(key, None):
                try:
                    await refresh(*args)
                except Exception as exc:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(exc)
                else:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(None)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            del self._tasks[key]

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for waiters in self._waiting.values():
            for waiter in waiters:
                waiter.cancel()
        self._waiting.clear()


class _ChildMirror(Generic[_T]):
    """The children of one znode, decoded, kept current by watches.

    A child watch on the parent reports additions and removals, a data watch on
    each child its changes and deletion; ``on_change(name)`` is called whenever
    an item's decoded value appears, changes or disappears.
    """

    def __init__(
        self,
        cluster: ClusterMetadata,
        path: str,
        decode: Callable[[str, bytes, NodeStat], _T],
        on_change: Callable[[str], None],
    ) -> None:
        self.items: dict[str, _T] = {}
        self._cluster = cluster
        self._path = path
        self._decode = decode
        self._on_change = on_change

    def reload(self, everything: bool) -> asyncio.Future[None]:
        """Re-read the children list and the new children, or all of them after a session loss."""
        return self._cluster._refresher.request(self._load_list, everything)

    def refresh(self, name: str) -> asyncio.Future[None]:
        return self._cluster._refresher.request(self._load_item, name)

    async def _load_list(self, everything: bool) -> None:
        names = await self._cluster.store.get_children(self._path, self._on_list_event)
        for gone in self.items.keys() - set(names):
            del self.items[gone]
            self._on_change(gone)
        todo = names if everything else [name for name in names if name not in self.items]
        await asyncio.gather(*(self.refresh(name) for name in todo))

    async def _load_item(self, name: str) -> None:
        path = join_path(self._path, name)
        found = await self._cluster._read_watched(path, self._on_item_event, floor=path)
        value = None if found is None else _decode(path, self._decode, name, *found)
        if _store(self.items, name, value):
            self._on_change(name)

    def _on_list_event(self, event: WatchedEvent) -> None:
        self._cluster._refresh_later(self._load_list, False)

    def _on_item_event(self, event: WatchedEvent) -> None:
        self._cluster._refresh_later(self._load_item, node_name(event.path))


class _TopicViews(Mapping[str, TopicMetadata]):
    """``ClusterMetadata.topics()``: topic views built on first access after a change."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self._cluster = cluster

    def __getitem__(self, name: str) -> TopicMetadata:
        return self._cluster._topic_view(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._cluster._topic_nodes.items)

    def __len__(self) -> int:
        return len(self._cluster._topic_nodes.items)


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
        self._refresher = _Refresher()
        self._listeners: list[ChangeListener] = []
        self._brokers = _ChildMirror(
            self, BROKER_IDS_PATH, _decode_broker, partial(self._changed, ChangeKind.BROKER)
        )
        self._topic_nodes = _ChildMirror(self, TOPICS_PATH, _decode_topic, self._topic_changed)
        self._topic_configs = _ChildMirror(
            self,
            TOPIC_CONFIGS_PATH,
            _decode_config,
            partial(self._changed, ChangeKind.TOPIC_CONFIG),
        )
        self._broker_configs = _ChildMirror(
            self,
            BROKER_CONFIGS_PATH,
            _decode_config,
            partial(self._changed, ChangeKind.BROKER_CONFIG),
        )
        self._states: dict[str, dict[int, tuple[PartitionState, int]]] = {}
        self._views: dict[str, TopicMetadata] = {}
        self._controller_id: int | None = None
        self._registration: tuple[int, tuple[Endpoint, ...], str | None] | None = None
        self._session_lost = False
        self._stale = False
        """From a session loss until everything is read again on the new session."""
        self._closed = False

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        for path in _CONTAINER_PATHS:
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
        return _TopicViews(self)

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

    # -- writes ----------------------------------------------------------------

    async def ensure_cluster_id(self) -> str:
        """Return the cluster id, creating it first if this is a new cluster."""
        new = _json({"version": "1", "id": uuid_to_str(random_uuid())})
        with suppress(NodeExistsError):
            await self.store.create(CLUSTER_ID_PATH, new, make_parents=True)
        data, _ = await self.store.get(CLUSTER_ID_PATH)
        return str(json.loads(data)["id"])

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
        controller = _json(
            {
                "version": 2,
                "brokerid": broker_id,
                "timestamp": _now_ms(),
                "kraftControllerEpoch": -1,
            }
        )
        try:
            await self.store.create(CONTROLLER_PATH, controller, ephemeral=True)
        except NodeExistsError:
            await self._refresher.request(self._load_controller)
            return None
        await self._ensure_node(CONTROLLER_EPOCH_PATH, b"0")
        while True:
            data, stat = await self.store.get(CONTROLLER_EPOCH_PATH)
            epoch = int(data) + 1
            with suppress(BadVersionError):
                await self.store.set(CONTROLLER_EPOCH_PATH, str(epoch).encode(), stat.version)
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
        await self._set_or_create(
            join_path(TOPIC_CONFIGS_PATH, name), _encode_config(configs or {})
        )
        topic_id = random_uuid()
        try:
            await self.store.create(path, _encode_topic(topic_id, replica_assignment))
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
        node = _decode_topic(name, data, stat)
        if node.replicas.keys() & new_partitions.keys():
            raise PartitionStateConflictError(name, min(new_partitions), stat.version)
        assignment = {**node.replicas, **new_partitions}
        _validate_assignment(assignment)
        try:
            data = _encode_topic(node.topic_id, assignment, node.adding, node.removing)
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
        data = _encode_topic(node.topic_id, replicas, adding, removing)
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
        data = _encode_state(state)
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
        await self._set_or_create(join_path(TOPIC_CONFIGS_PATH, topic), _encode_config(configs))
        await self._topic_configs.refresh(topic)

    async def set_broker_config(self, broker_id: int | None, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``broker_id``, or the cluster-wide ones for None."""
        entity = DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        await self._set_or_create(join_path(BROKER_CONFIGS_PATH, entity), _encode_config(configs))
        await self._broker_configs.refresh(entity)

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
        writes = []
        for partition, replicas in assignment.items():
            isr = tuple(broker for broker in replicas if broker in live)
            if isr:
                state = PartitionState(isr[0], 0, isr, epoch)
                writes.append(self._create_state(topic, partition, _encode_state(state)))
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
        return int(data)

    async def _register(
        self, broker_id: int, endpoints: tuple[Endpoint, ...], rack: str | None
    ) -> None:
        path = join_path(BROKER_IDS_PATH, str(broker_id))
        data = _encode_broker(endpoints, rack)
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

    async def _read_watched(
        self, path: str, watch: WatchCallback, floor: str
    ) -> tuple[bytes, NodeStat] | None:
        """Read ``path`` and leave ``watch`` so that its next change, including its
        creation, is reported.

        A missing node gets an exists-watch, unless ``floor`` (an ancestor, or
        ``path`` itself) is missing too: then nothing is watched, so that
        reading the partitions of a deleted topic leaves no watches behind.
        (Watching the parent's children instead would cost a listing of every
        sibling per node: quadratic for a topic of thousands of partitions.)
        """
        while True:
            with suppress(NoNodeError):
                return await self.store.get(path, watch)
            if floor == path or await self.store.exists(floor) is None:
                return None
            if await self.store.exists(path, watch) is None:
                return None
            # created meanwhile: read again

    # -- cache -----------------------------------------------------------------

    def _refresh_later(self, refresh: Callable[..., Awaitable[None]], *args: Hashable) -> None:
        """Answer a watch event: refresh in the background, logging failures."""
        if not self._closed:
            self._refresher.request(refresh, *args).add_done_callback(_log_failure)

    def _changed(self, kind: ChangeKind, name: str = "", partition: int = -1) -> None:
        if kind is ChangeKind.PARTITION:
            self._patch_view(name, partition)
        elif kind in (ChangeKind.TOPIC, ChangeKind.TOPIC_CONFIG):
            self._views.pop(name, None)
        change = MetadataChange(kind, name, partition)
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("metadata change listener %r failed", listener)

    def _topic_changed(self, name: str) -> None:
        self._changed(ChangeKind.TOPIC, name)
        self._refresh_later(self._load_partition_states, name, False)

    def _patch_view(self, name: str, partition: int) -> None:
        """Give a built view of topic ``name`` the new state of one partition: a copy
        with that partition replaced, not a rebuild (each of a new topic's thousands of
        partitions reports its state apart)."""
        view = self._views.get(name)
        if view is None:
            return
        old = view.partitions.get(partition)
        if old is None:
            del self._views[name]
            return
        state, version = self._states.get(name, {}).get(partition, (None, None))
        partitions = dict(view.partitions)
        partitions[partition] = dataclasses.replace(old, state=state, state_version=version)
        self._views[name] = dataclasses.replace(view, partitions=MappingProxyType(partitions))

    def _topic_view(self, name: str) -> TopicMetadata:
        view = self._views.get(name)
        if view is None:
            node = self._topic_nodes.items[name]
            states = self._states.get(name, {})
            partitions = {}
            for partition, replicas in node.replicas.items():
                state, version = states.get(partition, (None, None))
                partitions[partition] = PartitionMetadata(
                    partition,
                    replicas,
                    state,
                    version,
                    node.adding.get(partition, ()),
                    node.removing.get(partition, ()),
                )
            view = TopicMetadata(
                name,
                node.topic_id,
                MappingProxyType(partitions),
                MappingProxyType(self._topic_configs.items.get(name, {})),
            )
            self._views[name] = view
        return view

    async def _load_all(self) -> None:
        """Read everything and (re-)arm every watch."""
        await asyncio.gather(
            self._brokers.reload(True),
            self._topic_nodes.reload(True),
            self._topic_configs.reload(True),
            self._broker_configs.reload(True),
            self._refresher.request(self._load_controller),
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
        await asyncio.gather(
            *(self._refresher.request(self._load_partition, topic, p) for p in todo)
        )

    async def _load_partition(self, topic: str, partition: int) -> None:
        node = self._topic_nodes.items.get(topic)
        if node is None or partition not in node.replicas:
            return
        path = partition_state_path(topic, partition)
        found = await self._read_watched(path, self._on_partition_event, floor=topic_path(topic))
        states = self._states.get(topic)
        if states is None:
            return  # the topic went away meanwhile
        entry = None if found is None else _decode(path, _decode_state_entry, *found)
        if _store(states, partition, entry):
            self._changed(ChangeKind.PARTITION, topic, partition)

    async def _load_controller(self) -> None:
        found = await self._read_watched(CONTROLLER_PATH, self._on_controller_event, floor="/")
        controller = (
            None if found is None else _decode(CONTROLLER_PATH, _decode_controller, found[0])
        )
        if controller != self._controller_id:
            self._controller_id = controller
            self._changed(ChangeKind.CONTROLLER)

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
