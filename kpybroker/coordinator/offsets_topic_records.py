"""The records of ``__consumer_offsets``, in Kafka's key and value formats.

Every key and value is an int16 version followed by the struct of that
version (classic encoding; value v4 is flexible). Key versions 0 and 1 are an
``OffsetCommitKey``, version 2 a ``GroupMetadataKey``. From 3 on the int16 is a record type
and the struct is at version 0 (Kafka's ``CoordinatorRecordType``); the
KIP-848 consumer group types (3, 5, 6, 7, 8) are read and written as
``ConsumerGroupRecord``, the KIP-932 share group types (10 to 15) as
``ShareGroupRecord``; the others (the partition metadata that Kafka 4.1
retired, regular expressions, streams groups) are skipped when read. A null value is
a tombstone: the offset or the group is deleted.

What is written follows Kafka 3.x/4.x (``GroupCoordinatorRecordHelpers``):
offset keys v1, ``OffsetCommitValue`` v3 (v1 when the commit carries an
explicit retention, the only version with an expire timestamp), group keys v2
and ``GroupMetadataValue`` v3.

A TxnOffsetCommit's records form a transactional batch carrying the
producer's id and epoch, as Kafka's coordinator writes them: the log then
tracks the open transaction, and the end marker the transaction coordinator
writes to the partition later commits or aborts them (see ``loader``).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from kpybroker.protocol.messages.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from kpybroker.protocol.messages.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from kpybroker.protocol.messages.consumer_group_member_metadata_key import (
    ConsumerGroupMemberMetadataKey,
)
from kpybroker.protocol.messages.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue,
)
from kpybroker.protocol.messages.consumer_group_metadata_key import ConsumerGroupMetadataKey
from kpybroker.protocol.messages.consumer_group_metadata_value import ConsumerGroupMetadataValue
from kpybroker.protocol.messages.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from kpybroker.protocol.messages.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
)
from kpybroker.protocol.messages.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from kpybroker.protocol.messages.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kpybroker.protocol.messages.group_metadata_key import GroupMetadataKey
from kpybroker.protocol.messages.group_metadata_value import GroupMetadataValue
from kpybroker.protocol.messages.offset_commit_key import OffsetCommitKey
from kpybroker.protocol.messages.offset_commit_value import OffsetCommitValue
from kpybroker.protocol.messages.share_group_current_member_assignment_key import (
    ShareGroupCurrentMemberAssignmentKey,
)
from kpybroker.protocol.messages.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue,
)
from kpybroker.protocol.messages.share_group_member_metadata_key import (
    ShareGroupMemberMetadataKey,
)
from kpybroker.protocol.messages.share_group_member_metadata_value import (
    ShareGroupMemberMetadataValue,
)
from kpybroker.protocol.messages.share_group_metadata_key import ShareGroupMetadataKey
from kpybroker.protocol.messages.share_group_metadata_value import ShareGroupMetadataValue
from kpybroker.protocol.messages.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey,
)
from kpybroker.protocol.messages.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue,
)
from kpybroker.protocol.messages.share_group_target_assignment_member_key import (
    ShareGroupTargetAssignmentMemberKey,
)
from kpybroker.protocol.messages.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue,
)
from kpybroker.protocol.messages.share_group_target_assignment_metadata_key import (
    ShareGroupTargetAssignmentMetadataKey,
)
from kpybroker.protocol.messages.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue,
)
from kpybroker.protocol.records import NewRecord, build_batch, iter_records

_VERSION = struct.Struct(">h")

OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2
OFFSET_KEY_WRITTEN = 1
OFFSET_VALUE_WRITTEN = 3
OFFSET_VALUE_WITH_EXPIRY = 1
GROUP_VALUE_WRITTEN = 3
# Kafka's coordinator starts its transactional batches at sequence 0; this
# broker's log checks the sequence of any batch that has one (it does not know
# the batch's origin), so the coordinator's carry none and get only the epoch
# check, which is what Kafka applies to ``AppendOrigin.COORDINATOR``.
NO_SEQUENCE = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as stored; ``leader_epoch`` -1, ``expire_timestamp`` None: absent.

    ``record_offset`` is not part of the record: it is where the log holds it
    (-1 before it is written), which decides between a transactional commit
    and a plain one of the same partition when the transaction commits.
    """

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None
    record_offset: int = -1


class Producer(NamedTuple):
    """The transactional producer whose batch this is (TxnOffsetCommit's)."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    """A group's committed offset for one partition; ``value`` None is a tombstone."""

    group: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A classic group's generation and members; ``value`` None is a tombstone."""

    group: str
    value: GroupMetadataValue | None


class ConsumerGroupRecordType(enum.IntEnum):
    """Kafka's record types of a consumer group (KIP-848) in ``__consumer_offsets``."""

    GROUP_METADATA = 3
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_MEMBER_ASSIGNMENT = 8


ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)

# record type -> (key class, value class, whether the key names a member)
_CONSUMER_GROUP_CODECS: dict[int, tuple[Any, Any, bool]] = {
    ConsumerGroupRecordType.GROUP_METADATA: (
        ConsumerGroupMetadataKey,
        ConsumerGroupMetadataValue,
        False,
    ),
    ConsumerGroupRecordType.MEMBER_METADATA: (
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMemberMetadataValue,
        True,
    ),
    ConsumerGroupRecordType.TARGET_ASSIGNMENT_METADATA: (
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupTargetAssignmentMetadataValue,
        False,
    ),
    ConsumerGroupRecordType.TARGET_ASSIGNMENT_MEMBER: (
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMemberValue,
        True,
    ),
    ConsumerGroupRecordType.CURRENT_MEMBER_ASSIGNMENT: (
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupCurrentMemberAssignmentValue,
        True,
    ),
}
# Keys and values of these record types are at version 0.
MODERN_RECORD_VERSION = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """One KIP-848 consumer group record; ``member_id`` is "" for group-wide types and
    ``value`` None is a tombstone."""

    record_type: ConsumerGroupRecordType
    group: str
    member_id: str
    value: ConsumerGroupValue | None


class ShareGroupRecordType(enum.IntEnum):
    """Kafka's record types of a share group (KIP-932) in ``__consumer_offsets``."""

    MEMBER_METADATA = 10
    GROUP_METADATA = 11
    TARGET_ASSIGNMENT_METADATA = 12
    TARGET_ASSIGNMENT_MEMBER = 13
    CURRENT_MEMBER_ASSIGNMENT = 14
    STATE_PARTITION_METADATA = 15


ShareGroupValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)

_SHARE_GROUP_CODECS: dict[int, tuple[Any, Any, bool]] = {
    ShareGroupRecordType.MEMBER_METADATA: (
        ShareGroupMemberMetadataKey,
        ShareGroupMemberMetadataValue,
        True,
    ),
    ShareGroupRecordType.GROUP_METADATA: (ShareGroupMetadataKey, ShareGroupMetadataValue, False),
    ShareGroupRecordType.TARGET_ASSIGNMENT_METADATA: (
        ShareGroupTargetAssignmentMetadataKey,
        ShareGroupTargetAssignmentMetadataValue,
        False,
    ),
    ShareGroupRecordType.TARGET_ASSIGNMENT_MEMBER: (
        ShareGroupTargetAssignmentMemberKey,
        ShareGroupTargetAssignmentMemberValue,
        True,
    ),
    ShareGroupRecordType.CURRENT_MEMBER_ASSIGNMENT: (
        ShareGroupCurrentMemberAssignmentKey,
        ShareGroupCurrentMemberAssignmentValue,
        True,
    ),
    ShareGroupRecordType.STATE_PARTITION_METADATA: (
        ShareGroupStatePartitionMetadataKey,
        ShareGroupStatePartitionMetadataValue,
        False,
    ),
}


@dataclass(frozen=True, slots=True)
class ShareGroupRecord:
    """One KIP-932 share group record; ``member_id`` is "" for group-wide types and
    ``value`` None is a tombstone."""

    record_type: ShareGroupRecordType
    group: str
    member_id: str
    value: ShareGroupValue | None


ModernGroupRecord = ConsumerGroupRecord | ShareGroupRecord
CoordinatorRecord = OffsetRecord | GroupRecord | ConsumerGroupRecord | ShareGroupRecord


def _versioned(version: int, message: object) -> bytes:
    return _VERSION.pack(version) + message.encode_bytes(version)  # type: ignore[attr-defined]


def encode_record(record: CoordinatorRecord) -> NewRecord:
    """The log record (key, value) for ``record``."""
    if isinstance(record, ConsumerGroupRecord):
        return _encode_modern(record, _CONSUMER_GROUP_CODECS)
    if isinstance(record, ShareGroupRecord):
        return _encode_modern(record, _SHARE_GROUP_CODECS)
    if isinstance(record, OffsetRecord):
        key = _versioned(
            OFFSET_KEY_WRITTEN, OffsetCommitKey(record.group, record.topic, record.partition)
        )
        return NewRecord(key, None if record.value is None else _encode_offset(record.value))
    key = _versioned(GROUP_KEY_VERSION, GroupMetadataKey(record.group))
    value = None if record.value is None else _versioned(GROUP_VALUE_WRITTEN, record.value)
    return NewRecord(key, value)


def _encode_modern(
    record: ModernGroupRecord, codecs: dict[int, tuple[Any, Any, bool]]
) -> NewRecord:
    key_class, _, with_member = codecs[record.record_type]
    fields = (record.group, record.member_id) if with_member else (record.group,)
    key = _VERSION.pack(record.record_type) + key_class(*fields).encode_bytes(MODERN_RECORD_VERSION)
    if record.value is None:
        return NewRecord(key, None)
    return NewRecord(key, _versioned(MODERN_RECORD_VERSION, record.value))


def _encode_offset(value: OffsetAndMetadata) -> bytes:
    with_expiry = value.expire_timestamp is not None
    message = OffsetCommitValue(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp=value.commit_timestamp,
        expire_timestamp=value.expire_timestamp if with_expiry else -1,
    )
    return _versioned(OFFSET_VALUE_WITH_EXPIRY if with_expiry else OFFSET_VALUE_WRITTEN, message)


def decode_record(key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
    """The coordinator record of a log record; None for a key this coordinator does not use.

    Raises ``DecodeError`` (a ValueError) for malformed bytes.
    """
    if key is None or len(key) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(key)
    if version in OFFSET_KEY_VERSIONS:
        k, _ = OffsetCommitKey.decode(key, _VERSION.size, version)
        return OffsetRecord(k.group, k.topic, k.partition, _decode_offset(value))
    if version == GROUP_KEY_VERSION:
        g, _ = GroupMetadataKey.decode(key, _VERSION.size, version)
        return GroupRecord(
            g.group, None if value is None else _decode_versioned(GroupMetadataValue, value)
        )
    codecs = _CONSUMER_GROUP_CODECS.get(version)
    record_class: Any = ConsumerGroupRecord
    record_type: Any = ConsumerGroupRecordType
    if codecs is None:
        codecs = _SHARE_GROUP_CODECS.get(version)
        record_class, record_type = ShareGroupRecord, ShareGroupRecordType
    if codecs is None:
        return None
    key_class, value_class, with_member = codecs
    k, _ = key_class.decode(key, _VERSION.size, MODERN_RECORD_VERSION)
    return record_class(
        record_type(version),
        k.group_id,
        k.member_id if with_member else "",
        None if value is None else _decode_versioned(value_class, value),
    )


def _decode_versioned(message_class: Any, value: bytes) -> Any:
    (version,) = _VERSION.unpack_from(value)
    message, _ = message_class.decode(value, _VERSION.size, version)
    return message


def _decode_offset(value: bytes | None) -> OffsetAndMetadata | None:
    if value is None:
        return None
    (version,) = _VERSION.unpack_from(value)
    v, _ = OffsetCommitValue.decode(value, _VERSION.size, version)
    return OffsetAndMetadata(
        offset=v.offset,
        leader_epoch=v.leader_epoch,
        metadata=v.metadata,
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=None if v.expire_timestamp == -1 else v.expire_timestamp,
    )


def encode_batch(
    records: Iterable[CoordinatorRecord], compression: int = 0, producer: Producer | None = None
) -> bytearray:
    """One record batch holding ``records``, ready to append (offsets are stamped by the log).

    With a ``producer`` the batch is transactional and carries its id and epoch.
    """
    encoded = [encode_record(r) for r in records]
    if producer is None:
        return bytearray(build_batch(encoded, compression=compression))
    return bytearray(
        build_batch(
            encoded,
            compression=compression,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=NO_SEQUENCE,
            transactional=True,
        )
    )


def decode_logged(batch: bytes | memoryview) -> Iterator[tuple[int, CoordinatorRecord]]:
    """The coordinator records of one (non-control) batch with their offsets, in log order."""
    for record in iter_records(batch):
        decoded = decode_record(record.key, record.value)
        if decoded is not None:
            yield record.offset, decoded


def decode_batch(batch: bytes | memoryview) -> Iterator[CoordinatorRecord]:
    """The coordinator records of one (non-control) batch, in log order."""
    for _, record in decode_logged(batch):
        yield record
