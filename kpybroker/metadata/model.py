"""The values and errors of cluster metadata, apart from where and how they are stored.

Everything that reads or reacts to the cluster (the controller, replication,
the request handlers, the group coordinator) deals in these: brokers and their
endpoints, topics, partitions and their state, the changes the cache reports,
and the errors its writes raise. They live here, free of znode paths, JSON and
watches, so that those users need not import the store machinery, and so that
``znodes`` (the encoding) and ``cluster_metadata`` (the cache and the writes)
share one definition of each.

Ids follow Kafka's ``Uuid``: 16 bytes shown as 22 characters of unpadded
base64url, never 0 ("no id") nor 1 (reserved).
"""

from __future__ import annotations

import base64
import enum
import functools
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kpybroker.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "NO_LEADER",
    "RECOVERED",
    "Assignment",
    "BrokerIdInUseError",
    "BrokerRegistration",
    "ChangeKind",
    "ChangeListener",
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
]

NO_LEADER = -1
RECOVERED = 0
"""``leader_recovery_state`` of a normal partition; Kafka writes the field only otherwise."""

_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")
_RESERVED_UUIDS = (uuid.UUID(int=0), uuid.UUID(int=1))


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


@functools.lru_cache(maxsize=4096)
def topic_id_bytes(topic_id: uuid.UUID) -> bytes:
    """``topic_id.bytes``, one object per topic: ``.bytes`` makes new bytes at each call,
    and a broker keeps the topic id with every partition and log it hosts (49 bytes each)."""
    return topic_id.bytes


class ChangeKind(enum.Enum):
    """What a ``MetadataChange`` is about; see its fields for which name it carries."""

    BROKER = "broker"
    CONTROLLER = "controller"
    TOPIC = "topic"
    PARTITION = "partition"
    TOPIC_CONFIG = "topic_config"
    BROKER_CONFIG = "broker_config"
    GROUP_CONFIG = "group_config"
    SESSION = "session"
    """The store session was lost, or is back with everything read again (``session_lost``)."""
    LOG_DIR_EVENT = "log_dir_event"
    """A broker's log directory failed (``log_dir_events``): the controller takes the events."""


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """Something in the cache changed; read the cache for the new value (or its absence).

    ``name`` is the broker id (BROKER), the topic (TOPIC, PARTITION,
    TOPIC_CONFIG), the config entity (BROKER_CONFIG: a broker id or
    ``<default>``), the group id (GROUP_CONFIG), or empty (CONTROLLER,
    SESSION, LOG_DIR_EVENT). ``partition`` is set for PARTITION.
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
