"""A share group's records: built from a change, and replayed into the group.

Kafka's ``GroupCoordinatorRecordHelpers`` (the ``newShareGroup*`` helpers: what to
write) and the share group half of ``GroupMetadataManager.replay`` (what a record
does). As for consumer groups (``consumer_group_records``), the coordinator
decides a change as a list of records and replays them at once, the same way a
loading partition replays them, so the group in memory is always what the log holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from kpybroker.coordinator.consumer_group import Assignment
from kpybroker.coordinator.offsets_topic_records import ShareGroupRecord, ShareGroupRecordType
from kpybroker.coordinator.share_group import (
    InitTopic,
    ShareGroup,
    ShareMember,
    StatePartitions,
    topic_names,
)
from kpybroker.protocol.messages.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue,
)
from kpybroker.protocol.messages.share_group_current_member_assignment_value import (
    TopicPartitions as CurrentTopicPartitions,
)
from kpybroker.protocol.messages.share_group_member_metadata_value import (
    ShareGroupMemberMetadataValue,
)
from kpybroker.protocol.messages.share_group_metadata_value import ShareGroupMetadataValue
from kpybroker.protocol.messages.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue,
    TopicInfo,
    TopicPartitionsInfo,
)
from kpybroker.protocol.messages.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue,
    TopicPartition,
)
from kpybroker.protocol.messages.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue,
)

T = ShareGroupRecordType


# -- building records ------------------------------------------------------------------


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> ShareGroupRecord:
    value = ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash)
    return ShareGroupRecord(T.GROUP_METADATA, group_id, "", value)


def member_record(group_id: str, member: ShareMember) -> ShareGroupRecord:
    value = ShareGroupMemberMetadataValue(
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
    )
    return ShareGroupRecord(T.MEMBER_METADATA, group_id, member.member_id, value)


def target_epoch_record(group_id: str, epoch: int, timestamp: int) -> ShareGroupRecord:
    value = ShareGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch, assignment_timestamp=timestamp
    )
    return ShareGroupRecord(T.TARGET_ASSIGNMENT_METADATA, group_id, "", value)


def target_record(group_id: str, member_id: str, assignment: Assignment) -> ShareGroupRecord:
    value = ShareGroupTargetAssignmentMemberValue(
        topic_partitions=[
            TopicPartition(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(assignment.items())
        ]
    )
    return ShareGroupRecord(T.TARGET_ASSIGNMENT_MEMBER, group_id, member_id, value)


def current_assignment_record(group_id: str, member: ShareMember) -> ShareGroupRecord:
    value = ShareGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=member.state,
        assigned_partitions=[
            CurrentTopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(member.assigned.items())
        ],
    )
    return ShareGroupRecord(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id, value)


def state_record(group_id: str, state: StatePartitions) -> ShareGroupRecord:
    """ShareGroupStatePartitionMetadata: the group's initializing, initialized and
    deleting topics, each record holding all three in full."""
    value = ShareGroupStatePartitionMetadataValue(
        initializing_topics=_partitions_info(state.initializing),
        initialized_topics=_partitions_info(state.initialized),
        deleting_topics=[
            TopicInfo(topic_id=topic_id, topic_name=name)
            for topic_id, name in sorted(state.deleting.items())
        ],
    )
    return ShareGroupRecord(T.STATE_PARTITION_METADATA, group_id, "", value)


def _partitions_info(topics: Mapping[bytes, InitTopic]) -> list[TopicPartitionsInfo]:
    return [
        TopicPartitionsInfo(topic_id=topic_id, topic_name=t.name, partitions=sorted(t.partitions))
        for topic_id, t in sorted(topics.items())
    ]


def member_tombstones(group_id: str, member_id: str) -> list[ShareGroupRecord]:
    """Kafka's order: current assignment, target assignment, then the member itself."""
    return [
        ShareGroupRecord(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, None),
        ShareGroupRecord(T.TARGET_ASSIGNMENT_MEMBER, group_id, member_id, None),
        ShareGroupRecord(T.MEMBER_METADATA, group_id, member_id, None),
    ]


def group_tombstones(group: ShareGroup) -> list[ShareGroupRecord]:
    """Kafka's ``ShareGroup.createGroupTombstoneRecords``: members' current and target
    assignments, the target epoch, the members, the share-state metadata, the epoch."""
    group_id = group.group_id
    members = list(group.members)
    return [
        *(ShareGroupRecord(T.CURRENT_MEMBER_ASSIGNMENT, group_id, m, None) for m in members),
        *(ShareGroupRecord(T.TARGET_ASSIGNMENT_MEMBER, group_id, m, None) for m in members),
        ShareGroupRecord(T.TARGET_ASSIGNMENT_METADATA, group_id, "", None),
        *(ShareGroupRecord(T.MEMBER_METADATA, group_id, m, None) for m in members),
        ShareGroupRecord(T.STATE_PARTITION_METADATA, group_id, "", None),
        ShareGroupRecord(T.GROUP_METADATA, group_id, "", None),
    ]


# -- replaying records -----------------------------------------------------------------


def _assignment(topics: list) -> dict[bytes, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics if t.partitions}


def _init_topics(topics: list, timestamp: int) -> dict[bytes, InitTopic]:
    return {t.topic_id: InitTopic(t.topic_name, frozenset(t.partitions), timestamp) for t in topics}


def replay(
    groups: dict[str, ShareGroup],
    record: ShareGroupRecord,
    create: Callable[[str], ShareGroup],
    now: int,
) -> None:
    """Apply one record to ``groups`` (``create`` makes a group its first record names).

    ``now`` stamps the share-state topics, as Kafka stamps them when it replays the
    record: an initialization still pending is retried a while after a reload.
    """
    group = groups.get(record.group)
    value = record.value
    if value is None:
        if group is not None:
            _replay_tombstone(groups, group, record)
        return
    if group is None:
        group = create(record.group)
    member_id = record.member_id
    if isinstance(value, ShareGroupMetadataValue):
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash
    elif isinstance(value, ShareGroupMemberMetadataValue):
        old = group.members.get(member_id) or ShareMember(member_id)
        group.members[member_id] = dataclasses.replace(
            old,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=topic_names(value.subscribed_topic_names),
        )
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        group.assignment_epoch = value.assignment_epoch
        group.assignment_timestamp = value.assignment_timestamp
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        group.target[member_id] = _assignment(value.topic_partitions)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        old = group.members.get(member_id) or ShareMember(member_id)
        group.members[member_id] = dataclasses.replace(
            old,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=value.state,
            assigned=_assignment(value.assigned_partitions),
        )
    elif isinstance(value, ShareGroupStatePartitionMetadataValue):
        group.state_partitions = StatePartitions(
            initializing=_init_topics(value.initializing_topics, now),
            initialized=_init_topics(value.initialized_topics, now),
            deleting={t.topic_id: t.topic_name for t in value.deleting_topics},
        )


def _replay_tombstone(
    groups: dict[str, ShareGroup], group: ShareGroup, record: ShareGroupRecord
) -> None:
    kind = record.record_type
    if kind is T.GROUP_METADATA:
        group.dead = True
        del groups[record.group]
    elif kind is T.MEMBER_METADATA:
        group.members.pop(record.member_id, None)
    elif kind is T.TARGET_ASSIGNMENT_MEMBER:
        group.target.pop(record.member_id, None)
    elif kind is T.TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = -1
    elif kind is T.CURRENT_MEMBER_ASSIGNMENT:
        member = group.members.get(record.member_id)
        if member is not None:
            group.members[record.member_id] = member.left()
    elif kind is T.STATE_PARTITION_METADATA:
        group.state_partitions = None
