"""What passes between the coordinator's state machine and its runner.

In: a ``Caller`` with each request (who sent it, with which API version), a
reply ``Token`` naming the waiting request, and the events themselves (the
shard's methods). The shard reads two views of the cluster without waiting:
its topics (``TopicsImage``) and the groups' dynamic configs
(``GroupConfigs``). Out: ``Effects``, plain data the runner carries out:

- ``Reply(token, result)``: complete the waiting request with this response;
  a token is replied to at most once, now or on a later event (a JoinGroup
  waits for the rest of the group).
- ``Append(records, on_done, producer)``: append these records to the shard's
  partition as one batch (a transactional one for a ``producer``). As soon as
  the leader has written it, call ``shard.append_written(append,
  base_offset)``: state that must follow the log in its order (pending
  transactional offsets, as Kafka replays records when it writes them) is
  kept from there. Once it is replicated, or failed, call
  ``shard.append_done(append, error)``. Whatever must wait for durability (a
  commit's answer and visibility, a group becoming Stable) is in ``on_done``,
  so nothing is acknowledged before its record is in the log.
- ``SetTimer(key, delay_ms, args)`` / ``CancelTimer(key)``: arming a key again
  replaces its timer, as in Kafka's coordinator timer; when it fires, the
  runner feeds ``shard.timer_fired(key, args)``. Nothing runs while idle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, Producer
from kpybroker.protocol.errors import ErrorCode

Token = int

JOIN_TIMER = "join"
SYNC_TIMER = "sync"
HEARTBEAT_TIMER = "heartbeat"
CONSUMER_SESSION_TIMER = "consumer-session"
CONSUMER_REBALANCE_TIMER = "consumer-rebalance"


class TopicImage(NamedTuple):
    """A topic as a consumer group's assignor sees it."""

    topic_id: bytes
    name: str
    partitions: int
    #: The racks of each partition's replicas, by partition number.
    racks: tuple[frozenset[str], ...]


class TopicsImage(Protocol):
    """The cluster's topics, read by consumer groups (Kafka's ``MetadataImage``)."""

    def by_name(self, name: str) -> TopicImage | None: ...

    def by_id(self, topic_id: bytes) -> TopicImage | None: ...

    def names(self) -> Iterable[str]: ...

    def is_internal(self, name: str) -> bool: ...


class GroupOverrides(NamedTuple):
    """What a group's dynamic configs (KIP-848 group configs) change for the coordinator;
    None where the group sets nothing and the broker's setting applies."""

    consumer_session_timeout_ms: int | None = None
    consumer_heartbeat_interval_ms: int | None = None
    share_session_timeout_ms: int | None = None
    share_heartbeat_interval_ms: int | None = None
    share_assignment_interval_ms: int | None = None


NO_OVERRIDES = GroupOverrides()


class GroupConfigs(Protocol):
    """A group's overrides, read from the cluster's metadata (Kafka's ``GroupConfigManager``);
    called on every heartbeat, so it must answer from a cache."""

    def __call__(self, group_id: str) -> GroupOverrides: ...


def no_group_configs(group_id: str) -> GroupOverrides:
    """``GroupConfigs`` of a cluster where no group sets anything."""
    return NO_OVERRIDES


@dataclass(frozen=True, slots=True)
class Caller:
    """The request's origin, as Kafka's RequestContext gives it to the coordinator."""

    client_id: str
    client_host: str
    api_version: int


class TimerKey(NamedTuple):
    """One timer per key: the join or sync phase of a group, or a member's session."""

    kind: str
    group_id: str
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    token: Token
    result: Any


@dataclass(slots=True, eq=False)
class Append:
    records: Sequence[CoordinatorRecord]
    on_done: Callable[[Effects, ErrorCode], None] | None = None
    producer: Producer | None = None
    #: The log offset of the first record, once the leader has written the batch.
    base_offset: int = field(default=-1, init=False)

    def offset_of(self, index: int) -> int:
        """The log offset of ``records[index]`` (the batch's offsets are consecutive)."""
        return self.base_offset + index


@dataclass(frozen=True, slots=True)
class SetTimer:
    key: TimerKey
    delay_ms: int
    args: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


@dataclass(slots=True)
class Effects:
    """The outcome of one event, in the order the runner must carry it out."""

    replies: list[Reply] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)
    timers: list[SetTimer | CancelTimer] = field(default_factory=list)

    def reply(self, token: Token | None, result: Any) -> None:
        if token is not None:
            self.replies.append(Reply(token, result))

    def append(
        self,
        records: Sequence[CoordinatorRecord],
        on_done: Callable[[Effects, ErrorCode], None] | None = None,
        producer: Producer | None = None,
    ) -> Append:
        """Append ``records``; the ``Append`` tells ``on_done`` where they were written."""
        append = Append(records, on_done, producer)
        self.appends.append(append)
        return append

    def set_timer(self, key: TimerKey, delay_ms: int, *args: int) -> None:
        self.timers.append(SetTimer(key, delay_ms, args))

    def cancel_timer(self, key: TimerKey) -> None:
        self.timers.append(CancelTimer(key))


def coordinator_error(append_error: ErrorCode) -> ErrorCode:
    """The error a client gets when writing to ``__consumer_offsets`` failed.

    Kafka's ``CoordinatorOperationExceptionHelper``: clients know how to retry
    these, unlike the log's own errors.
    """
    if append_error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if append_error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return append_error
