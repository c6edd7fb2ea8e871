"""The share-state events of a share group: initialization outcomes and the offset admin APIs.

These are the shard's side of what Kafka's ``GroupCoordinatorShard`` and
``GroupMetadataManager`` do between two persister calls of the service: each
event decides records (the ShareGroupStatePartitionMetadata record, sometimes
the group epoch), replays them at once and answers once they are written; the
service does the I/O with the share coordinator before and after
(``share_group_service``).

- ``initialized`` / ``uninitialized``: the outcome of a heartbeat's
  initialization (``share_group_state``).
- AlterShareGroupOffsets (``alter_offsets``): an empty group (created if need
  be) gets its epoch bumped (KAFKA-20910) and the chosen partitions recorded as
  initializing; the service initializes them at the new epoch with the given
  start offsets, then reports them ``initialized``.
- DeleteShareGroupOffsets (``initiate_delete_offsets``, ``complete_delete_offsets``):
  an empty group's initialized topics move to deleting; once the persister has
  deleted their state they are dropped.
- DeleteGroups (``delete_groups_plan``): before the usual deletion, an empty share
  group's topics all move to deleting and their state is deleted by the service.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from kpybroker.coordinator.interface import Effects, Token, coordinator_error
from kpybroker.coordinator.share_group import InitTopic, ShareGroup, StatePartitions, combine
from kpybroker.coordinator.share_group_protocol import ShareGroups
from kpybroker.coordinator.share_group_records import epoch_record, state_record
from kpybroker.coordinator.share_group_state import (
    ShareInitialization,
    mark_initialized,
    mark_uninitialized,
    state_of,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from kpybroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsResponseTopic,
)

NO_OFFSET_INFORMATION = "There is no offset information to delete."

#: topic ID -> the partitions whose state the persister must delete.
Deletions = dict[bytes, frozenset[int]]


class AlterResult(NamedTuple):
    response: AlterShareGroupOffsetsResponse
    initialize: ShareInitialization | None = None


class DeleteOffsetsPlan(NamedTuple):
    """Kafka's ``DeleteShareGroupOffsetsResultHolder``: a group-level error, or the topics
    answered with an error already and those whose state the persister must delete."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    errors: tuple[DeleteShareGroupOffsetsResponseTopic, ...] = ()
    delete: Mapping[bytes, frozenset[int]] = {}


def alter_error(error: KafkaError) -> AlterShareGroupOffsetsResponse:
    """Kafka's ``AlterShareGroupOffsetsRequest.getErrorResponseData``: the error at the top."""
    return AlterShareGroupOffsetsResponse(
        error_code=error.code, error_message=error.message or default_message(error.code)
    )


class ShareGroupAdmin:
    """Share-state events on the share groups of one partition."""

    def __init__(self, share_groups: ShareGroups) -> None:
        self.groups = share_groups
        self.topics = share_groups.topics
        self.clock = share_groups.clock

    def _write_state(
        self, out: Effects, token: Token, group: ShareGroup, state: StatePartitions | None
    ) -> None:
        """Write the group's new share-state metadata (if any); reply the write's error."""
        records = [] if state is None else [state_record(group.group_id, state)]
        self.groups.commit(
            out, group.group_id, records, lambda done, error: done.reply(token, error)
        )

    # -- initialization outcomes ---------------------------------------------------------

    def initialized(
        self, out: Effects, token: Token, group_id: str, partitions: Mapping[bytes, frozenset[int]]
    ) -> None:
        group = self.groups.group(group_id)
        if group is None or not partitions:
            out.reply(token, ErrorCode.NONE)
            return
        self._write_state(
            out, token, group, mark_initialized(group, partitions, self.topics, self.clock())
        )

    def uninitialized(
        self, out: Effects, token: Token, group_id: str, partitions: Mapping[bytes, frozenset[int]]
    ) -> None:
        group = self.groups.group(group_id)
        if group is None:
            out.reply(token, ErrorCode.NONE)
            return
        self._write_state(out, token, group, mark_uninitialized(group, partitions))

    def initialized_partitions(self, group_id: str) -> dict[bytes, frozenset[int]]:
        """DescribeShareGroupOffsets of all topics: the partitions with share state."""
        group = self.groups.group(group_id)
        return {} if group is None else group.initialized_partitions()

    # -- AlterShareGroupOffsets ----------------------------------------------------------

    def alter_offsets(
        self,
        out: Effects,
        token: Token,
        group_id: str,
        topics: Iterable[AlterShareGroupOffsetsRequestTopic],
    ) -> None:
        """Kafka's ``alterShareGroupOffsets``; the reply is an ``AlterResult``."""
        group = self.groups.group(group_id) or ShareGroup(group_id)
        try:
            group.validate_empty()
        except KafkaError as exc:
            out.reply(token, AlterResult(alter_error(exc)))
            return
        now = self.clock()
        answered: list[AlterShareGroupOffsetsResponseTopic] = []
        initializing: dict[bytes, InitTopic] = {}
        offsets: dict[bytes, dict[int, int]] = {}
        for topic in topics:
            image = self.topics.by_name(topic.topic_name)
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            partitions = []
            for p in topic.partitions:
                valid = image is not None and p.partition_index < image.partitions
                if valid and image is not None:
                    offsets.setdefault(image.topic_id, {})[p.partition_index] = p.start_offset
                partitions.append(
                    AlterShareGroupOffsetsResponsePartition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.NONE if valid else unknown,
                        error_message=None if valid else default_message(unknown),
                    )
                )
            answer = AlterShareGroupOffsetsResponseTopic(
                topic_name=topic.topic_name, partitions=partitions
            )
            if image is not None:
                answer.topic_id = image.topic_id
                chosen = frozenset(offsets.get(image.topic_id, ()))
                if chosen:
                    initializing[image.topic_id] = InitTopic(image.name, chosen, now)
            answered.append(answer)
        state = state_of(group)
        epoch = group.group_epoch + 1
        records = [epoch_record(group_id, epoch, group.metadata_hash)]
        if initializing:
            new_state = StatePartitions(
                initializing=combine(state.initializing, initializing),
                initialized=state.initialized,
                deleting={t: n for t, n in state.deleting.items() if t not in initializing},
            )
            records.append(state_record(group_id, new_state))
        response = AlterShareGroupOffsetsResponse(responses=answered)
        plan = ShareInitialization(group_id, epoch, offsets)

        def written(done: Effects, error: ErrorCode) -> None:
            if error:
                done.reply(token, AlterResult(alter_error(KafkaError(coordinator_error(error)))))
            else:
                done.reply(token, AlterResult(response, plan))

        self.groups.commit(out, group_id, list(records), written)

    # -- DeleteShareGroupOffsets -------------------------------------------------------------

    def initiate_delete_offsets(
        self, out: Effects, token: Token, group_id: str, topic_names: Iterable[str]
    ) -> None:
        """Kafka's ``initiateDeleteShareGroupOffsets``; the reply is a ``DeleteOffsetsPlan``."""
        try:
            group = self.groups.existing(group_id)
            group.validate_empty()
        except KafkaError as exc:
            out.reply(token, DeleteOffsetsPlan(exc.code, exc.message))
            return
        state = group.state_partitions
        if state is None:
            # Kafka answers nothing for the topics of a group that never had share state.
            out.reply(token, DeleteOffsetsPlan())
            return
        initialized = dict(state.initialized)
        deleting = dict(state.deleting)
        errors: list[DeleteShareGroupOffsetsResponseTopic] = []
        delete: Deletions = {}
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for name in topic_names:
            image = self.topics.by_name(name)
            if image is None:
                errors.append(_delete_error(name, unknown, default_message(unknown)))
            elif image.topic_id in initialized:
                delete[image.topic_id] = initialized.pop(image.topic_id).partitions
                deleting[image.topic_id] = image.name
            elif image.topic_id in deleting:
                delete[image.topic_id] = frozenset(range(image.partitions))
            else:
                errors.append(_delete_error(name, unknown, NO_OFFSET_INFORMATION))
        new_state = StatePartitions(state.initializing, initialized, deleting)
        plan = DeleteOffsetsPlan(errors=tuple(errors), delete=delete)

        def written(done: Effects, error: ErrorCode) -> None:
            if error:
                done.reply(token, DeleteOffsetsPlan(coordinator_error(error)))
            else:
                done.reply(token, plan)

        self.groups.commit(out, group_id, [state_record(group_id, new_state)], written)

    def complete_delete_offsets(
        self, out: Effects, token: Token, group_id: str, deleted: Iterable[bytes]
    ) -> None:
        """Kafka's ``completeDeleteShareGroupOffsets``: the deleted topics leave *deleting*."""
        group = self.groups.group(group_id)
        if group is None or group.state_partitions is None:
            out.reply(token, ErrorCode.NONE)
            return
        state = group.state_partitions
        gone = set(deleted)
        kept = {t: n for t, n in state.deleting.items() if t not in gone}
        self._write_state(
            out, token, group, StatePartitions(state.initializing, state.initialized, kept)
        )

    # -- topic deletion ------------------------------------------------------------------------

    def topic_deleted(self, out: Effects, topic_name: str) -> None:
        """Kafka's ``maybeCleanupShareGroupState``: a deleted topic leaves every group's
        share-state metadata (the share coordinator drops the state itself)."""
        for group in list(self.groups.groups.values()):
            state = group.state_partitions
            if state is None:
                continue
            names = {t: v.name for t, v in {**state.initializing, **state.initialized}.items()}
            names.update(state.deleting)
            gone = {t for t, name in names.items() if name == topic_name and not self._exists(t)}
            if gone:
                kept = StatePartitions(
                    initializing={t: v for t, v in state.initializing.items() if t not in gone},
                    initialized={t: v for t, v in state.initialized.items() if t not in gone},
                    deleting={t: n for t, n in state.deleting.items() if t not in gone},
                )
                self.groups.commit(out, group.group_id, [state_record(group.group_id, kept)], None)

    def _exists(self, topic_id: bytes) -> bool:
        return self.topics.by_id(topic_id) is not None

    # -- DeleteGroups -------------------------------------------------------------------------

    def delete_groups_plan(self, out: Effects, token: Token, group_ids: Iterable[str]) -> None:
        """Kafka's ``sharePartitionDeleteRequests``: each empty share group with share state
        has all its topics moved to deleting; the reply maps the groups whose state the
        service must delete to (NONE, partitions), and non-empty share groups to
        (NON_EMPTY_GROUP, {}). Other groups are left to the usual deletion."""
        plans: dict[str, tuple[ErrorCode, Deletions]] = {}
        records = []
        saved: dict[str, ShareGroup] = {}
        for group_id in dict.fromkeys(group_ids):
            group = self.groups.group(group_id)
            if group is None:
                continue
            try:
                group.validate_empty()
            except KafkaError as exc:
                plans[group_id] = (exc.code, {})
                continue
            if group.state_partitions is None:
                continue
            deleting = self._deletion_candidates(group.state_partitions)
            saved[group_id] = group.copy()
            record = state_record(group_id, StatePartitions(deleting=deleting[1]))
            self.groups.replay(record)
            records.append(record)
            if deleting[0]:
                plans[group_id] = (ErrorCode.NONE, deleting[0])
        if not records:
            out.reply(token, plans)
            return

        def written(done: Effects, error: ErrorCode) -> None:
            if error:
                self.groups.groups.update(saved)
                failed = coordinator_error(error)
                done.reply(token, {g: (failed, {}) for g in plans})
            else:
                done.reply(token, plans)

        out.append(records, written)

    def _deletion_candidates(self, state: StatePartitions) -> tuple[Deletions, dict[bytes, str]]:
        """Every initialized and initializing partition, and, for a delete that did not
        finish, every partition of its topic (if the topic still exists)."""
        candidates: Deletions = {}
        names: dict[bytes, str] = {}
        for topic_id, topic in combine(state.initialized, state.initializing).items():
            candidates[topic_id] = topic.partitions
            names[topic_id] = topic.name
        for topic_id in state.deleting:
            image = self.topics.by_id(topic_id)
            if image is not None:
                everything = frozenset(range(image.partitions))
                candidates[topic_id] = candidates.get(topic_id, frozenset()) | everything
                names[topic_id] = image.name
        return candidates, names


def _delete_error(name: str, code: ErrorCode, message: str) -> DeleteShareGroupOffsetsResponseTopic:
    return DeleteShareGroupOffsetsResponseTopic(
        topic_name=name, error_code=code, error_message=message
    )
