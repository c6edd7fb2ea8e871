"""Committed offsets of one partition's groups: commit, fetch, delete and expire.

Follows Kafka's ``OffsetMetadataManager``. The in-memory offsets change only
once their records are appended (``Effects.append``'s ``on_done``), so a
commit is acknowledged, and visible to OffsetFetch, only when it is in the
log, and a failed append leaves nothing behind. Metadata strings and leader
epochs are stored as committed and returned unchanged; a null metadata is
stored as "" (Kafka's ``NO_METADATA``).

The pending offsets of open transactions (``offset_store.PendingOffsets``,
written by ``transactional_offsets``) follow the log as it is written
(``written``), so they are in place before any end marker that follows them.
They count here as Kafka counts them: a fetch requiring stable offsets is
told such a partition is unstable; a tombstone (OffsetDelete, DeleteGroups,
a deleted topic) deletes them too; an offset with a pending one does not
expire, and a group with an open transaction is not expired away.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kpybroker.coordinator.consumer_group import ConsumerGroup
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group import DEAD, PREPARING_REBALANCE, STABLE, ClassicGroup
from kpybroker.coordinator.interface import Append, Caller, Effects, Token, coordinator_error
from kpybroker.coordinator.membership import Membership
from kpybroker.coordinator.offset_store import GroupOffsets, PendingOffsets
from kpybroker.coordinator.offsets_topic_records import (
    CoordinatorRecord,
    OffsetAndMetadata,
    OffsetRecord,
)
from kpybroker.protocol._codec import ZERO_UUID
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kpybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from kpybroker.protocol.records import NO_PRODUCER_ID

if TYPE_CHECKING:
    from kpybroker.coordinator.consumer_group_protocol import ConsumerGroups

# OffsetCommit v9 answers GROUP_ID_NOT_FOUND for a member committing to a group
# that does not exist; older versions get ILLEGAL_GENERATION.
GROUP_ID_NOT_FOUND_FROM = 9
NO_RETENTION = -1


class Expired(NamedTuple):
    """An offset found expired: it is deleted only if still this value when its tombstone lands."""

    topic: str
    partition: int
    value: OffsetAndMetadata


class PartitionErrors:
    """Per-partition errors by topic, one entry per topic in the order topics first appear.

    Builds OffsetCommit and OffsetDelete answers (the classes are given), as
    Kafka's response builders do: answers from the request handler (unknown
    partitions) and from the coordinator merge under one entry per topic.
    Where the topic class has a topic ID (OffsetCommit, TxnOffsetCommit), an
    entry carries the ID of the topic it answers; ``by_id`` keys the entries
    by that ID instead of the name (OffsetCommit v10, whose topics are named
    by ID only, so that unknown IDs, all nameless, stay apart).
    """

    def __init__(self, topic_class: type, partition_class: type, *, by_id: bool = False) -> None:
        self.topic_class = topic_class
        self.partition_class = partition_class
        self.with_ids = "topic_id" in topic_class.__slots__
        self.by_id = by_id
        self.topics: dict[str | bytes, Any] = {}

    def add(self, topic: str, partition: int, error: int, topic_id: bytes = ZERO_UUID) -> None:
        key = topic_id if self.by_id else topic
        entry = self.topics.get(key)
        if entry is None:
            if self.with_ids:
                entry = self.topic_class(name=topic, topic_id=topic_id)
            else:
                entry = self.topic_class(name=topic)
            self.topics[key] = entry
        entry.partitions.append(self.partition_class(partition_index=partition, error_code=error))

    def add_all(self, topics: Sequence[Any], error: int) -> None:
        """``error`` for every partition of a request's ``topics``."""
        for topic in topics:
            topic_id = topic_id_of(topic)
            for p in topic.partitions:
                self.add(topic.name, p.partition_index, error, topic_id)

    def merge(self, topics: Sequence[Any]) -> None:
        """The answers of another response's ``topics``."""
        for topic in topics:
            topic_id = topic_id_of(topic)
            for p in topic.partitions:
                self.add(topic.name, p.partition_index, p.error_code, topic_id)

    def result(self) -> list[Any]:
        return list(self.topics.values())


def topic_id_of(topic: Any) -> bytes:
    """A request or response topic's ID; the zero UUID where its message has none."""
    return getattr(topic, "topic_id", ZERO_UUID)


def commit_error_response(
    request: OffsetCommitRequest, error: ErrorCode, *, by_id: bool = False
) -> OffsetCommitResponse:
    """Every requested partition answered with ``error``."""
    answers = PartitionErrors(OffsetCommitResponseTopic, OffsetCommitResponsePartition, by_id=by_id)
    answers.add_all(request.topics, error)
    return OffsetCommitResponse(topics=answers.result())


def java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units, what ``offset.metadata.max.bytes`` counts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class OffsetManager:
    def __init__(
        self,
        membership: Membership,
        consumer_groups: ConsumerGroups,
        settings: CoordinatorSettings,
        clock: Callable[[], int],
    ) -> None:
        self.membership = membership
        self.consumer_groups = consumer_groups
        self.settings = settings
        self.clock = clock
        self.offsets = GroupOffsets()
        self.pending = PendingOffsets()

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.find(group_id, topic, partition)

    def remove_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)

    def tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        """Records deleting every offset of the group, pending ones too (DeleteGroups)."""
        partitions = dict.fromkeys(self.offsets.partitions(group_id))
        partitions.update(dict.fromkeys(sorted(self.pending.partitions(group_id))))
        return [OffsetRecord(group_id, topic, partition, None) for topic, partition in partitions]

    # -- OffsetCommit -------------------------------------------------------------

    def commit(
        self, out: Effects, token: Token, caller: Caller, request: OffsetCommitRequest
    ) -> None:
        try:
            group = self.group_for_commit(caller, request)
        except KafkaError as exc:
            out.reply(token, commit_error_response(request, exc.code))
            return
        if isinstance(group, ClassicGroup) and group.state in (STABLE, PREPARING_REBALANCE):
            # A commit keeps a classic member's session alive.
            member = group.member(request.member_id)
            self.membership.schedule_heartbeat(out, group, member)
        now = self.clock()
        retention = request.retention_time_ms
        expire = None if retention == NO_RETENTION else now + retention
        answers = PartitionErrors(OffsetCommitResponseTopic, OffsetCommitResponsePartition)
        records: list[OffsetRecord] = []
        for topic in request.topics:
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if java_length(metadata) > self.settings.offset_metadata_max_bytes:
                    error = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    error = ErrorCode.NONE
                    value = OffsetAndMetadata(
                        p.committed_offset, p.committed_leader_epoch, metadata, now, expire
                    )
                    records.append(
                        OffsetRecord(request.group_id, topic.name, p.partition_index, value)
                    )
                answers.add(topic.name, p.partition_index, error, topic.topic_id)
        response = OffsetCommitResponse(topics=answers.result())
        if not records:
            out.reply(token, response)
            return

        def appended(done: Effects, error: ErrorCode) -> None:
            if error:
                fail_partitions(response.topics, error)
            else:
                for index, record in enumerate(records):
                    value = dataclasses.replace(record.value, record_offset=append.offset_of(index))
                    self.offsets.put(record.group, record.topic, record.partition, value)
            done.reply(token, response)

        append = out.append(records, appended)

    def group_for_commit(
        self, caller: Caller, request: OffsetCommitRequest
    ) -> ClassicGroup | ConsumerGroup:
        """The group, created when someone outside group management commits to a new one."""
        generation = request.generation_id_or_member_epoch
        consumer_group = self.consumer_groups.group(request.group_id)
        if consumer_group is not None:
            consumer_group.validate_offset_commit(
                request.member_id,
                request.group_instance_id,
                generation,
                api_version=caller.api_version,
            )
            return consumer_group
        group = self.membership.group(request.group_id)
        if group is None:
            if generation >= 0:
                if caller.api_version >= GROUP_ID_NOT_FOUND_FROM:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
            group = self.membership.create_group(request.group_id)
        group.validate_offset_commit(request.member_id, request.group_instance_id, generation)
        return group

    # -- OffsetFetch ------------------------------------------------------------

    def fetch(
        self, request: OffsetFetchRequestGroup, require_stable: bool = False
    ) -> OffsetFetchResponseGroup:
        """A group's offsets: the partitions asked for (-1 where none), or all (topics null).

        Pending transactional offsets are never returned; with ``require_stable``
        a partition that has one answers UNSTABLE_OFFSET_COMMIT instead, so the
        consumer waits for the transaction to end. As in Kafka, "all" means the
        partitions with a committed offset.
        """
        group_id = request.group_id
        consumer_group = self.consumer_groups.group(group_id)
        if consumer_group is not None:
            try:
                consumer_group.validate_offset_fetch(request.member_id, request.member_epoch)
            except KafkaError as exc:
                return OffsetFetchResponseGroup(group_id=group_id, error_code=exc.code)
            known = True
        else:
            group = self.membership.group(group_id)
            known = group is not None and not group.is_in(DEAD)
        stored = self.offsets.get(group_id, {}) if known else {}

        def answer(
            topic: str, index: int, value: OffsetAndMetadata | None
        ) -> OffsetFetchResponsePartitions:
            if require_stable and self.pending.has_pending(group_id, topic, index):
                return fetched(index, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
            return fetched(index, value)

        if request.topics is None:
            topics = [
                OffsetFetchResponseTopics(
                    name=topic,
                    partitions=[answer(topic, index, value) for index, value in partitions.items()],
                )
                for topic, partitions in stored.items()
            ]
        else:
            topics = [
                OffsetFetchResponseTopics(
                    name=t.name,
                    partitions=[
                        answer(t.name, index, stored.get(t.name, {}).get(index))
                        for index in t.partition_indexes
                    ],
                )
                for t in request.topics
            ]
        return OffsetFetchResponseGroup(group_id=group_id, topics=topics)

    # -- OffsetDelete -----------------------------------------------------------

    def delete(self, out: Effects, token: Token, request: OffsetDeleteRequest) -> None:
        """Delete offsets of topics the group does not consume (all of them while Empty)."""
        group = self.membership.group(request.group_id) or self.consumer_groups.group(
            request.group_id
        )
        try:
            if group is None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
            group.validate_offset_delete()
        except KafkaError as exc:
            out.reply(token, OffsetDeleteResponse(error_code=exc.code))
            return
        answers = PartitionErrors(OffsetDeleteResponseTopic, OffsetDeleteResponsePartition)
        records: list[OffsetRecord] = []
        for topic in request.topics:
            subscribed = group.is_subscribed_to_topic(topic.name)
            error = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if subscribed else ErrorCode.NONE
            for p in topic.partitions:
                answers.add(topic.name, p.partition_index, error)
                if not subscribed and self.has_any(group.group_id, topic.name, p.partition_index):
                    records.append(
                        OffsetRecord(group.group_id, topic.name, p.partition_index, None)
                    )
        response = OffsetDeleteResponse(topics=answers.result())
        if not records:
            out.reply(token, response)
            return

        def appended(done: Effects, error: ErrorCode) -> None:
            if error:
                done.reply(token, OffsetDeleteResponse(error_code=coordinator_error(error)))
                return
            for record in records:
                self.offsets.discard(record.group, record.topic, record.partition)
            done.reply(token, response)

        out.append(records, appended)

    def has_any(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether the partition has an offset to delete: committed, or pending (Kafka's test)."""
        return self.get(group_id, topic, partition) is not None or self.pending.has_pending(
            group_id, topic, partition
        )

    # -- expiry and replay -----------------------------------------------------------

    def expired(self, group: ClassicGroup | ConsumerGroup, now: int) -> tuple[list[Expired], bool]:
        """The group's expired offsets, and whether none will be left once they go.

        Kafka's ``cleanupExpiredOffsets``: offsets of topics the group still
        consumes never expire; the others once ``offsets.retention.minutes``
        have passed since the group's base time (see ``offset_expiry_base``),
        or at their own expire timestamp when the commit gave a retention.
        An offset with a pending transactional one waits for its transaction,
        and a group with an open transaction keeps at least that: Kafka does
        not delete it either, except when it has no committed offset at all,
        which would leave the transaction's offsets without their group.
        """
        group_id = group.group_id
        open_transactions = self.pending.has_open_transactions(group_id)
        stored = self.offsets.get(group_id)
        if not stored:
            return [], not open_transactions
        base = group.offset_expiry_base()
        if base is None:
            return [], False
        retention = self.settings.offsets_retention_ms
        found = []
        kept = False
        for topic, partitions in stored.items():
            if group.is_subscribed_to_topic(topic):
                kept = True
                continue
            for partition, value in partitions.items():
                if value.expire_timestamp is not None:
                    expired = now >= value.expire_timestamp
                else:
                    expired = now - base(value) >= retention
                if expired and not self.pending.has_pending(group_id, topic, partition):
                    found.append(Expired(topic, partition, value))
                else:
                    kept = True
        return found, not kept and not open_transactions

    def remove_expired(self, group_id: str, expired: list[Expired]) -> None:
        """Forget expired offsets, unless recommitted since they were found."""
        for item in expired:
            if self.get(group_id, item.topic, item.partition) is item.value:
                self.offsets.discard(group_id, item.topic, item.partition)

    def topic_deleted(self, out: Effects, topic: str) -> None:
        """A deleted topic's offsets go too, in every group, pending ones too (Kafka's
        ``onPartitionsDeleted``)."""
        deleted = {
            (group_id, partition)
            for group_id, topics in self.offsets.items()
            for partition in topics.get(topic, ())
        }
        records = [
            OffsetRecord(group_id, topic, partition, None)
            for group_id, partition in sorted(deleted | self.pending.of_topic(topic))
        ]

        def appended(_done: Effects, error: ErrorCode) -> None:
            if not error:
                for record in records:
                    self.offsets.discard(record.group, topic, record.partition)

        if records:
            out.append(records, appended)

    def written(self, append: Append) -> None:
        """The pending offsets follow a batch the leader has just written, in log order.

        A transactional batch's offsets become pending under its producer; a
        tombstone deletes the partition's pending offsets. The committed
        offsets wait for ``on_done`` instead (they must be durable to be seen).
        """
        for index, record in enumerate(append.records):
            if not isinstance(record, OffsetRecord):
                continue
            if record.value is None:
                self.pending.discard(record.group, record.topic, record.partition)
            elif append.producer is not None:
                value = dataclasses.replace(record.value, record_offset=append.offset_of(index))
                self.pending.put(
                    append.producer.producer_id, record.group, record.topic, record.partition, value
                )

    def replay(
        self, record: OffsetRecord, offset: int = -1, producer_id: int = NO_PRODUCER_ID
    ) -> None:
        """Apply an offset record read from the log at ``offset``, in a batch of ``producer_id``.

        A transactional batch's offset is pending until its marker is replayed
        (``transactional_offsets``); a tombstone deletes the committed offset
        and the pending ones. An offset's group exists from then on.
        """
        if record.value is None:
            self.offsets.discard(record.group, record.topic, record.partition)
            self.pending.discard(record.group, record.topic, record.partition)
            return
        if (
            self.membership.group(record.group) is None
            and self.consumer_groups.group(record.group) is None
        ):
            self.membership.create_group(record.group)
        value = dataclasses.replace(record.value, record_offset=offset)
        if producer_id == NO_PRODUCER_ID:
            self.offsets.put(record.group, record.topic, record.partition, value)
        else:
            self.pending.put(producer_id, record.group, record.topic, record.partition, value)


def fail_partitions(topics: Sequence[Any], append_error: ErrorCode) -> None:
    """A failed append's error for every partition of a commit answer not already failed."""
    failed = coordinator_error(append_error)
    for topic in topics:
        for part in topic.partitions:
            part.error_code = part.error_code or failed


def fetched(
    partition: int, value: OffsetAndMetadata | None, error: ErrorCode = ErrorCode.NONE
) -> OffsetFetchResponsePartitions:
    if value is None:
        return OffsetFetchResponsePartitions(
            partition_index=partition,
            committed_offset=-1,
            committed_leader_epoch=-1,
            metadata="",
            error_code=error,
        )
    return OffsetFetchResponsePartitions(
        partition_index=partition,
        committed_offset=value.offset,
        committed_leader_epoch=value.leader_epoch,
        metadata=value.metadata,
    )
