"""Committed offsets of one partition's groups: commit, fetch, delete and expire.

Follows Kafka's ``OffsetMetadataManager``. The in-memory offsets change only
once their records are appended (``Effects.append``'s ``on_done``), so a
commit is acknowledged, and visible to OffsetFetch, only when it is in the
log, and a failed append leaves nothing behind. Metadata strings and leader
epochs are stored as committed and returned unchanged; a null metadata is
stored as "" (Kafka's ``NO_METADATA``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group import DEAD, PREPARING_REBALANCE, STABLE, ClassicGroup
from kpybroker.coordinator.interface import Caller, Effects, Token, coordinator_error
from kpybroker.coordinator.membership import Membership
from kpybroker.coordinator.offsets_topic_records import (
    CoordinatorRecord,
    OffsetAndMetadata,
    OffsetRecord,
)
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

# OffsetCommit v9 answers GROUP_ID_NOT_FOUND for a member committing to a group
# that does not exist; older versions get ILLEGAL_GENERATION.
GROUP_ID_NOT_FOUND_FROM = 9
NO_RETENTION = -1

TopicOffsets = dict[int, OffsetAndMetadata]


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
    """

    def __init__(self, topic_class: type, partition_class: type) -> None:
        self.topic_class = topic_class
        self.partition_class = partition_class
        self.topics: dict[str, Any] = {}

    def add(self, topic: str, partition: int, error: int) -> None:
        entry = self.topics.get(topic)
        if entry is None:
            entry = self.topics[topic] = self.topic_class(name=topic)
        entry.partitions.append(self.partition_class(partition_index=partition, error_code=error))

    def add_all(self, topics: Sequence[Any], error: int) -> None:
        """``error`` for every partition of a request's ``topics``."""
        for topic in topics:
            for p in topic.partitions:
                self.add(topic.name, p.partition_index, error)

    def merge(self, topics: Sequence[Any]) -> None:
        """The answers of another response's ``topics``."""
        for topic in topics:
            for p in topic.partitions:
                self.add(topic.name, p.partition_index, p.error_code)

    def result(self) -> list[Any]:
        return list(self.topics.values())


def commit_error_response(request: OffsetCommitRequest, error: ErrorCode) -> OffsetCommitResponse:
    """Every requested partition answered with ``error``."""
    answers = PartitionErrors(OffsetCommitResponseTopic, OffsetCommitResponsePartition)
    answers.add_all(request.topics, error)
    return OffsetCommitResponse(topics=answers.result())


def java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units, what ``offset.metadata.max.bytes`` counts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class OffsetManager:
    def __init__(
        self, membership: Membership, settings: CoordinatorSettings, clock: Callable[[], int]
    ) -> None:
        self.membership = membership
        self.settings = settings
        self.clock = clock
        self.offsets: dict[str, dict[str, TopicOffsets]] = {}

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    def put(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = value

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        topics = self.offsets.get(group_id)
        if topics is None or topic not in topics:
            return
        topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self.offsets[group_id]

    def remove_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)

    def tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        """Records deleting every offset of the group (DeleteGroups)."""
        return [
            OffsetRecord(group_id, topic, partition, None)
            for topic, partitions in self.offsets.get(group_id, {}).items()
            for partition in partitions
        ]

    # -- OffsetCommit -------------------------------------------------------------

    def commit(
        self, out: Effects, token: Token, caller: Caller, request: OffsetCommitRequest
    ) -> None:
        try:
            group = self.group_for_commit(caller, request)
        except KafkaError as exc:
            out.reply(token, commit_error_response(request, exc.code))
            return
        if group.state in (STABLE, PREPARING_REBALANCE):
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
                answers.add(topic.name, p.partition_index, error)
        response = OffsetCommitResponse(topics=answers.result())
        if not records:
            out.reply(token, response)
            return

        def appended(done: Effects, error: ErrorCode) -> None:
            if error:
                failed = coordinator_error(error)
                for topic in response.topics:
                    for part in topic.partitions:
                        part.error_code = part.error_code or failed
            else:
                for record in records:
                    self.put(record.group, record.topic, record.partition, record.value)
            done.reply(token, response)

        out.append(records, appended)

    def group_for_commit(self, caller: Caller, request: OffsetCommitRequest) -> ClassicGroup:
        """The group, created when someone outside group management commits to a new one."""
        group = self.membership.group(request.group_id)
        generation = request.generation_id_or_member_epoch
        if group is None:
            if generation >= 0:
                if caller.api_version >= GROUP_ID_NOT_FOUND_FROM:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
            group = self.membership.create_group(request.group_id)
        group.validate_offset_commit(request.member_id, request.group_instance_id, generation)
        return group

    # -- OffsetFetch ------------------------------------------------------------

    def fetch(self, request: OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
        """A group's offsets: the partitions asked for (-1 where none), or all (topics null)."""
        group = self.membership.group(request.group_id)
        known = group is not None and not group.is_in(DEAD)
        stored = self.offsets.get(request.group_id, {}) if known else {}
        if request.topics is None:
            topics = [
                OffsetFetchResponseTopics(
                    name=topic,
                    partitions=[fetched(index, value) for index, value in partitions.items()],
                )
                for topic, partitions in stored.items()
            ]
        else:
            topics = [
                OffsetFetchResponseTopics(
                    name=t.name,
                    partitions=[
                        fetched(index, stored.get(t.name, {}).get(index))
                        for index in t.partition_indexes
                    ],
                )
                for t in request.topics
            ]
        return OffsetFetchResponseGroup(group_id=request.group_id, topics=topics)

    # -- OffsetDelete -----------------------------------------------------------

    def delete(self, out: Effects, token: Token, request: OffsetDeleteRequest) -> None:
        """Delete offsets of topics the group does not consume (all of them while Empty)."""
        group = self.membership.group(request.group_id)
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
                if not subscribed and self.get(group.group_id, topic.name, p.partition_index):
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
                self.remove(record.group, record.topic, record.partition)
            done.reply(token, response)

        out.append(records, appended)

    # -- expiry and replay -----------------------------------------------------------

    def expired(self, group: ClassicGroup, now: int) -> tuple[list[Expired], bool]:
        """The group's expired offsets, and whether none will be left once they go.

        Kafka's ``cleanupExpiredOffsets``: offsets of topics the group still
        consumes never expire; the others once ``offsets.retention.minutes``
        have passed since the group's base time (see ``offset_expiry_base``),
        or at their own expire timestamp when the commit gave a retention.
        """
        stored = self.offsets.get(group.group_id)
        if not stored:
            return [], True
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
                if expired:
                    found.append(Expired(topic, partition, value))
                else:
                    kept = True
        return found, not kept

    def remove_expired(self, group_id: str, expired: list[Expired]) -> None:
        """Forget expired offsets, unless recommitted since they were found."""
        for item in expired:
            if self.get(group_id, item.topic, item.partition) is item.value:
                self.remove(group_id, item.topic, item.partition)

    def topic_deleted(self, out: Effects, topic: str) -> None:
        """A deleted topic's offsets go too, in every group (Kafka's ``onPartitionsDeleted``)."""
        records = [
            OffsetRecord(group_id, topic, partition, None)
            for group_id, topics in self.offsets.items()
            for partition in topics.get(topic, ())
        ]

        def appended(_done: Effects, error: ErrorCode) -> None:
            if not error:
                for record in records:
                    self.remove(record.group, topic, record.partition)

        if records:
            out.append(records, appended)

    def replay(self, record: OffsetRecord) -> None:
        """Apply an offset record from the log; an offset's group exists from then on."""
        if record.value is None:
            self.remove(record.group, record.topic, record.partition)
            return
        if self.membership.group(record.group) is None:
            self.membership.create_group(record.group)
        self.put(record.group, record.topic, record.partition, record.value)


def fetched(partition: int, value: OffsetAndMetadata | None) -> OffsetFetchResponsePartitions:
    if value is None:
        return OffsetFetchResponsePartitions(
            partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata=""
        )
    return OffsetFetchResponsePartitions(
        partition_index=partition,
        committed_offset=value.offset,
        committed_leader_epoch=value.leader_epoch,
        metadata=value.metadata,
    )
