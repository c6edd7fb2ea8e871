"""A consumer group's records: built from a change, and replayed into the group.

Kafka's ``GroupCoordinatorRecordHelpers`` (what to write) and the consumer
group half of ``GroupMetadataManager.replay`` (what a record does). The
coordinator decides a change as a list of records and replays them at once,
the same way a loading partition replays them, so the state in memory is
always what the log holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kpybroker.coordinator.consumer_group import (
    LEAVE_EPOCH,
    Assignment,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from kpybroker.coordinator.offsets_topic_records import (
    ConsumerGroupRecord,
    ConsumerGroupRecordType,
)
from kpybroker.protocol.messages.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from kpybroker.protocol.messages.consumer_group_current_member_assignment_value import (
    TopicPartitions as CurrentTopicPartitions,
)
from kpybroker.protocol.messages.consumer_group_member_metadata_value import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupMemberMetadataValue,
)
from kpybroker.protocol.messages.consumer_group_metadata_value import ConsumerGroupMetadataValue
from kpybroker.protocol.messages.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
    TopicPartition,
)
from kpybroker.protocol.messages.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)

T = ConsumerGroupRecordType


# -- building records ------------------------------------------------------------------


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> ConsumerGroupRecord:
    value = ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash)
    return ConsumerGroupRecord(T.GROUP_METADATA, group_id, "", value)


def member_record(group_id: str, member: ConsumerMember) -> ConsumerGroupRecord:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor,
        classic_member_metadata=None
        if member.classic is None
        else ClassicMemberMetadata(
            session_timeout_ms=member.classic.session_timeout_ms,
            supported_protocols=[
                ClassicProtocol(name=name, metadata=metadata)
                for name, metadata in member.classic.protocols
            ],
        ),
    )
    return ConsumerGroupRecord(T.MEMBER_METADATA, group_id, member.member_id, value)


def target_epoch_record(group_id: str, epoch: int, timestamp: int) -> ConsumerGroupRecord:
    value = ConsumerGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch, assignment_timestamp=timestamp
    )
    return ConsumerGroupRecord(T.TARGET_ASSIGNMENT_METADATA, group_id, "", value)


def target_record(group_id: str, member_id: str, assignment: Assignment) -> ConsumerGroupRecord:
    value = ConsumerGroupTargetAssignmentMemberValue(
        topic_partitions=[
            TopicPartition(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in assignment.items()
        ]
    )
    return ConsumerGroupRecord(T.TARGET_ASSIGNMENT_MEMBER, group_id, member_id, value)


def current_assignment_record(group_id: str, member: ConsumerMember) -> ConsumerGroupRecord:
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned_partitions=_current_partitions(member.assigned),
        partitions_pending_revocation=_current_partitions(member.pending_revocation),
    )
    return ConsumerGroupRecord(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id, value)


def _current_partitions(assignment: Assignment) -> list[CurrentTopicPartitions]:
    return [
        CurrentTopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in assignment.items()
    ]


def member_tombstones(group_id: str, member_id: str) -> list[ConsumerGroupRecord]:
    """Kafka's order: current assignment, target assignment, then the member itself."""
    return [
        ConsumerGroupRecord(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id, None),
        ConsumerGroupRecord(T.TARGET_ASSIGNMENT_MEMBER, group_id, member_id, None),
        ConsumerGroupRecord(T.MEMBER_METADATA, group_id, member_id, None),
    ]


def group_tombstones(group_id: str) -> list[ConsumerGroupRecord]:
    """What deletes an empty group: its target epoch, then its epoch."""
    return [
        ConsumerGroupRecord(T.TARGET_ASSIGNMENT_METADATA, group_id, "", None),
        ConsumerGroupRecord(T.GROUP_METADATA, group_id, "", None),
    ]


# -- replaying records -----------------------------------------------------------------


def _assignment(topics: list) -> dict[bytes, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in topics if t.partitions}


def replay(
    groups: dict[str, ConsumerGroup],
    record: ConsumerGroupRecord,
    create: Callable[[str], ConsumerGroup],
) -> None:
    """Apply one record to ``groups`` (``create`` makes a group its first record names)."""
    group = groups.get(record.group)
    value = record.value
    if value is None:
        if group is not None:
            _replay_tombstone(groups, group, record)
        return
    if group is None:
        group = create(record.group)
    member_id = record.member_id
    if isinstance(value, ConsumerGroupMetadataValue):
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        old = group.members.get(member_id) or ConsumerMember(member_id)
        group.put_member(
            dataclasses.replace(
                old,
                instance_id=value.instance_id,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                subscribed_topic_names=tuple(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor,
                classic=_classic(value.classic_member_metadata),
            )
        )
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        group.assignment_epoch = value.assignment_epoch
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        group.target[member_id] = _assignment(value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        old = group.members.get(member_id) or ConsumerMember(member_id)
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.put_member(
            dataclasses.replace(
                old,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                state=state,
                assigned=_assignment(value.assigned_partitions),
                pending_revocation=_assignment(value.partitions_pending_revocation),
            )
        )


def _classic(metadata: ClassicMemberMetadata | None) -> ClassicMetadata | None:
    if metadata is None:
        return None
    protocols = tuple((p.name, bytes(p.metadata)) for p in metadata.supported_protocols)
    return ClassicMetadata(metadata.session_timeout_ms, protocols)


def _replay_tombstone(
    groups: dict[str, ConsumerGroup], group: ConsumerGroup, record: ConsumerGroupRecord
) -> None:
    kind = record.record_type
    if kind is T.GROUP_METADATA:
        group.dead = True
        del groups[record.group]
    elif kind is T.MEMBER_METADATA:
        group.remove_member(record.member_id)
    elif kind is T.TARGET_ASSIGNMENT_MEMBER:
        group.target.pop(record.member_id, None)
    elif kind is T.CURRENT_MEMBER_ASSIGNMENT:
        member = group.members.get(record.member_id)
        if member is not None:
            group.put_member(
                dataclasses.replace(
                    member,
                    member_epoch=LEAVE_EPOCH,
                    previous_member_epoch=LEAVE_EPOCH,
                    state=MemberState.STABLE,
                    assigned={},
                    pending_revocation={},
                )
            )
