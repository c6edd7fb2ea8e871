"""A synchronous runner for the coordinator's state machine: fake clock, fake timers, a list as log.

``Driver`` does what kpybroker/coordinator/runtime.py does, without an event
loop: it applies a shard's Effects, keeps the replies by token, keeps timers
as deadlines that ``advance()`` fires in order, and "appends" records to a
list (or fails the appends with ``fail_appends``). Given a ``PartitionLog``
it also writes them there as the runtime would, so that a test can load the
partition back; ``end_transaction`` writes a transaction's end marker and
replays it, as the WriteTxnMarkers path does. The groups' dynamic configs are
what a test puts in ``group_overrides`` (group id -> ``GroupOverrides``).
"""

from __future__ import annotations

import itertools
import struct
import uuid
from collections import deque
from typing import Any

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import (
    NO_OVERRIDES,
    Append,
    Caller,
    Effects,
    GroupOverrides,
    SetTimer,
    TimerKey,
    TopicImage,
)
from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, encode_batch
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.log.partition_log import PartitionLog
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
)
from kpybroker.protocol.messages.consumer_group_heartbeat import (
    TopicPartitions as HeartbeatTopicPartitions,
)
from kpybroker.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest
from kpybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kpybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

SETTINGS = CoordinatorSettings(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000)
SESSION_MS = 10_000
REBALANCE_MS = 30_000
START_MS = 1_700_000_000_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes (int16 version, then the struct)."""
    return struct.pack(">h", 0) + ConsumerProtocolSubscription(topics=list(topics)).encode_bytes(0)


RANGE = [("range", subscription("t"))]


def join_request(
    member_id: str = "",
    *,
    group: str = "g",
    instance_id: str | None = None,
    protocols: list[tuple[str, bytes]] = RANGE,
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
    )


def commit_request(
    offsets: dict[tuple[str, int], int],
    *,
    group: str = "g",
    member_id: str = "",
    generation: int = -1,
    leader_epoch: int = -1,
    metadata: str | None = "",
    retention_ms: int = -1,
) -> OffsetCommitRequest:
    """A commit of ``offsets`` ((topic, partition) -> offset); generation -1: from outside."""
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=leader_epoch,
                committed_metadata=metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        retention_time_ms=retention_ms,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )


def txn_commit_request(
    offsets: dict[tuple[str, int], int],
    *,
    producer_id: int = 1000,
    producer_epoch: int = 0,
    group: str = "g",
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    metadata: str | None = "",
) -> TxnOffsetCommitRequest:
    """A TxnOffsetCommit of ``offsets``; generation -1 and no member: not checked (v0-2)."""
    topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    return TxnOffsetCommitRequest(
        transactional_id="txn",
        group_id=group,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )


class StaticTopics:
    """A ``TopicsImage`` of topics a test creates, deletes and grows."""

    def __init__(self, **partitions: int) -> None:
        self.topics: dict[str, TopicImage] = {}
        for name, count in partitions.items():
            self.create(name, count)

    def create(self, name: str, partitions: int, racks: tuple[str, ...] = ()) -> bytes:
        """Add (or grow) topic ``name``; its ID. ``racks``: each partition's replica rack."""
        existing = self.topics.get(name)
        topic_id = existing.topic_id if existing else uuid.uuid5(uuid.NAMESPACE_OID, name).bytes
        by_partition = tuple(
            frozenset({racks[p % len(racks)]}) if racks else frozenset() for p in range(partitions)
        )
        self.topics[name] = TopicImage(topic_id, name, partitions, by_partition)
        return topic_id

    def delete(self, name: str) -> None:
        del self.topics[name]

    def id_of(self, name: str) -> bytes:
        return self.topics[name].topic_id

    def by_name(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def by_id(self, topic_id: bytes) -> TopicImage | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def names(self) -> list[str]:
        return list(self.topics)

    def is_internal(self, name: str) -> bool:
        return name.startswith("__")


class Driver:
    def __init__(
        self,
        settings: CoordinatorSettings = SETTINGS,
        plog: PartitionLog | None = None,
        topics: StaticTopics | None = None,
    ) -> None:
        self.now = START_MS
        self.settings = settings
        self.topics = topics if topics is not None else StaticTopics()
        self.group_overrides: dict[str, GroupOverrides] = {}
        self.shard = CoordinatorShard(
            0,
            settings,
            self.topics,
            clock=lambda: self.now,
            group_configs=lambda group_id: self.group_overrides.get(group_id, NO_OVERRIDES),
        )
        self.replies: dict[int, Any] = {}
        self.timers: dict[TimerKey, tuple[int, tuple[int, ...]]] = {}
        self.log: list[CoordinatorRecord] = []
        self.plog = plog
        self.end_offset = 0  # of the list log, markers included, when there is no plog
        self.fail_appends: ErrorCode | None = None
        self.tokens = itertools.count(1)

    # -- the runner ---------------------------------------------------------------

    def apply(self, effects: Effects) -> None:
        pending = deque([effects])
        while pending:
            effects = pending.popleft()
            for append in effects.appends:
                error = self.fail_appends or ErrorCode.NONE
                if not error:
                    try:
                        self.shard.append_written(append, self.write(append))
                    except KafkaError as exc:
                        error = exc.code
                pending.append(self.shard.append_done(append, error))
            for op in effects.timers:
                self.timers.pop(op.key, None)
                if isinstance(op, SetTimer):
                    self.timers[op.key] = (self.now + op.delay_ms, op.args)
            for reply in effects.replies:
                assert reply.token not in self.replies, f"token {reply.token} replied twice"
                self.replies[reply.token] = reply.result

    def write(self, append: Append) -> int:
        """Write an append's records; the offset of the first (the real log's if there is one)."""
        if self.plog is not None:
            batch = encode_batch(append.records, 0, append.producer)
            base = self.plog.append(batch, 0).base_offset
        else:
            base = self.end_offset
            self.end_offset += len(append.records)
        self.log.extend(append.records)
        return base

    def end_transaction(self, producer_id: int, committed: bool, producer_epoch: int = 0) -> None:
        """Write the end marker of the producer's transaction, then replay it in the shard."""
        if self.plog is not None:
            self.plog.append_txn_marker(producer_id, producer_epoch, 0, committed, 0)
        else:
            self.end_offset += 1
        self.shard.replay_marker(producer_id, committed)

    def send(self, method: str, *args: Any) -> int:
        """Feed ``shard.<method>(token, *args)``; return the token."""
        token = next(self.tokens)
        self.apply(getattr(self.shard, method)(token, *args))
        return token

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order."""
        target = self.now + ms
        while True:
            due = [
                (deadline, key) for key, (deadline, _) in self.timers.items() if deadline <= target
            ]
            if not due:
                break
            deadline, key = min(due)
            self.now = max(self.now, deadline)
            _, args = self.timers.pop(key)
            self.apply(self.shard.timer_fired(key, args))
        self.now = target

    # -- requests ---------------------------------------------------------------------

    def join(
        self, member_id: str = "", *, version: int = 9, client_id: str = "client", **kw: Any
    ) -> int:
        """JoinGroup (``kw``: see ``join_request``); returns the token."""
        request = join_request(member_id, **kw)
        return self.send("join", Caller(client_id, "/127.0.0.1", version), request)

    def new_member(self, **kwargs: Any) -> str:
        """A member ID from the MEMBER_ID_REQUIRED step (its rejoin is left to the test)."""
        response = self.replies[self.join(**kwargs)]
        assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED, response
        return response.member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance_id: str | None = None,
    ) -> int:
        request = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            assignments=[
                SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ],
        )
        return self.send("sync", request)

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance_id: str | None = None
    ) -> int:
        request = HeartbeatRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        return self.send("heartbeat", request)

    def commit(self, offsets: dict[tuple[str, int], int], *, version: int = 8, **kw: Any) -> int:
        """OffsetCommit (``kw``: see ``commit_request``); returns the token."""
        return self.send(
            "commit", Caller("admin", "/127.0.0.1", version), commit_request(offsets, **kw)
        )

    def txn_commit(self, offsets: dict[tuple[str, int], int], **kw: Any) -> int:
        """TxnOffsetCommit (``kw``: see ``txn_commit_request``); returns the token."""
        return self.send("commit_transactional", txn_commit_request(offsets, **kw))

    def stable_group(self, members: int = 1, group: str = "g") -> tuple[int, list[str]]:
        """Join and sync ``members`` members: (generation, member IDs, the leader first)."""
        ids = [self.new_member(group=group) for _ in range(members)]
        tokens = [self.join(m, group=group) for m in ids]
        self.advance(0)
        responses = [self.replies[t] for t in tokens]
        assert all(r.error_code == 0 for r in responses), responses
        generation = responses[0].generation_id
        leader = responses[0].leader
        ids.sort(key=lambda m: m != leader)
        assignments = {m: f"assignment-{m}".encode() for m in ids}
        syncs = [
            self.sync(m, generation, assignments if m == leader else None, group=group) for m in ids
        ]
        assert all(self.replies[s].error_code == 0 for s in syncs), [self.replies[s] for s in syncs]
        return generation, ids

    def consumer_heartbeat(
        self,
        member_id: str,
        epoch: int = 0,
        *,
        group: str = "g",
        topics: list[str] | None = None,
        regex: str | None = None,
        owned: dict[str, list[int]] | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        assignor: str | None = None,
        rebalance_ms: int | None = None,
        version: int = 1,
    ) -> Any:
        """A ConsumerGroupHeartbeat; its answer. Joining (epoch 0) fills in what must be
        set unless given: the rebalance timeout and an empty owned list."""
        if rebalance_ms is None:
            rebalance_ms = REBALANCE_MS if epoch == 0 else -1
        if epoch == 0:
            owned = {} if owned is None else owned
        request = ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=topics,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=None
            if owned is None
            else [
                HeartbeatTopicPartitions(topic_id=self.topics.id_of(t), partitions=ps)
                for t, ps in owned.items()
            ],
        )
        token = self.send(
            "consumer_group_heartbeat", Caller("client", "/127.0.0.1", version), request
        )
        return self.replies[token]

    def assignment_of(self, response: Any) -> dict[str, list[int]] | None:
        """A heartbeat answer's assignment by topic name (None when it carries none)."""
        if response.assignment is None:
            return None
        names = {t.topic_id: t.name for t in self.topics.topics.values()}
        return {
            names[tp.topic_id]: sorted(tp.partitions) for tp in response.assignment.topic_partitions
        }

    def state(self, group: str = "g") -> str:
        return self.shard.describe(group).group_state


def error_of(response: Any) -> ErrorCode:
    return ErrorCode(response.error_code)
