"""The records of ``__share_group_state``, in Kafka's format, and reading a partition back.

Key: an int16 record type (0 ShareSnapshot, 1 ShareUpdate; Kafka's
``CoordinatorRecordType``), then ``ShareSnapshotKey`` or ``ShareUpdateKey``
at version 0 (group id, topic ID, partition). Value: an int16 version (0),
then ``ShareSnapshotValue`` (the whole state) or ``ShareUpdateValue`` (what
one write changed; no state epoch nor timestamps). A null value is a
tombstone: the key's state is deleted (Kafka writes them as ShareSnapshot
keys). Records of other types, or of value versions this broker does not
know, are skipped when read, as Kafka's shard ignores them.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from kpybroker.protocol._codec import UnsupportedVersionError
from kpybroker.protocol.messages import share_snapshot_value, share_update_value
from kpybroker.protocol.messages.share_snapshot_key import ShareSnapshotKey
from kpybroker.protocol.messages.share_snapshot_value import ShareSnapshotValue
from kpybroker.protocol.messages.share_update_key import ShareUpdateKey
from kpybroker.protocol.messages.share_update_value import ShareUpdateValue
from kpybroker.protocol.records import BatchHeader, NewRecord, build_batch, iter_records
from kpybroker.share_coordinator.persister import ShareKey, StateBatch
from kpybroker.share_coordinator.share_state import DEFAULT_EPOCH, ShareGroupOffset

_SHORT = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0


class RecordType(enum.IntEnum):
    SNAPSHOT = 0
    UPDATE = 1


class ShareRecord(NamedTuple):
    """A snapshot or an update of ``key``; ``value`` None is the key's tombstone.

    An update's ``value`` holds what the update carries: the snapshot epoch it
    follows, the leader epoch and start offset (-1: unchanged), the delivery
    complete count and the changed batches.
    """

    type: RecordType
    key: ShareKey
    value: ShareGroupOffset | None


def snapshot(key: ShareKey, value: ShareGroupOffset) -> ShareRecord:
    return ShareRecord(RecordType.SNAPSHOT, key, value)


def update(key: ShareKey, value: ShareGroupOffset) -> ShareRecord:
    return ShareRecord(RecordType.UPDATE, key, value)


def tombstone(key: ShareKey) -> ShareRecord:
    return ShareRecord(RecordType.SNAPSHOT, key, None)


# -- encoding ---------------------------------------------------------------------------


def encode_record(record: ShareRecord) -> NewRecord:
    group_id, topic_id, partition = record.key
    key_class = ShareSnapshotKey if record.type == RecordType.SNAPSHOT else ShareUpdateKey
    key = _SHORT.pack(record.type) + key_class(
        group_id=group_id, topic_id=topic_id, partition=partition
    ).encode_bytes(KEY_VERSION)
    if record.value is None:
        return NewRecord(key, None)
    return NewRecord(key, _SHORT.pack(VALUE_VERSION) + _value(record).encode_bytes(VALUE_VERSION))


def _value(record: ShareRecord) -> ShareSnapshotValue | ShareUpdateValue:
    v = record.value
    assert v is not None
    if record.type == RecordType.SNAPSHOT:
        return ShareSnapshotValue(
            snapshot_epoch=v.snapshot_epoch,
            state_epoch=v.state_epoch,
            leader_epoch=v.leader_epoch,
            start_offset=v.start_offset,
            delivery_complete_count=v.delivery_complete_count,
            create_timestamp=v.create_timestamp,
            write_timestamp=v.write_timestamp,
            state_batches=[_wire_batch(share_snapshot_value.StateBatch, b) for b in v.batches],
        )
    return ShareUpdateValue(
        snapshot_epoch=v.snapshot_epoch,
        leader_epoch=v.leader_epoch,
        start_offset=v.start_offset,
        delivery_complete_count=v.delivery_complete_count,
        state_batches=[_wire_batch(share_update_value.StateBatch, b) for b in v.batches],
    )


def _wire_batch(cls: type, batch: StateBatch) -> object:
    return cls(
        first_offset=batch.first_offset,
        last_offset=batch.last_offset,
        delivery_state=batch.delivery_state,
        delivery_count=batch.delivery_count,
    )


def encode_batch(records: Iterable[ShareRecord], compression: int = 0) -> bytearray:
    """One batch of ``records`` (offsets are stamped by the log)."""
    return bytearray(build_batch([encode_record(r) for r in records], compression=compression))


# -- decoding ---------------------------------------------------------------------------


def decode_record(key: bytes | None, value: bytes | None) -> ShareRecord | None:
    """The record; None for one of another type or an unknown version."""
    if key is None or len(key) < _SHORT.size:
        return None
    (type_id,) = _SHORT.unpack_from(key)
    if type_id not in (RecordType.SNAPSHOT, RecordType.UPDATE):
        return None
    record_type = RecordType(type_id)
    key_class = ShareSnapshotKey if record_type == RecordType.SNAPSHOT else ShareUpdateKey
    try:
        k, _ = key_class.decode(key, _SHORT.size, KEY_VERSION)
        share_key = ShareKey(k.group_id, bytes(k.topic_id), k.partition)
        if value is None:
            return ShareRecord(record_type, share_key, None)
        (version,) = _SHORT.unpack_from(value)
        if record_type == RecordType.SNAPSHOT:
            s, _ = ShareSnapshotValue.decode(value, _SHORT.size, version)
            state = ShareGroupOffset(
                snapshot_epoch=s.snapshot_epoch,
                state_epoch=s.state_epoch,
                leader_epoch=s.leader_epoch,
                start_offset=s.start_offset,
                batches=_batches(s.state_batches),
                delivery_complete_count=s.delivery_complete_count,
                create_timestamp=s.create_timestamp,
                write_timestamp=s.write_timestamp,
            )
        else:
            u, _ = ShareUpdateValue.decode(value, _SHORT.size, version)
            state = ShareGroupOffset(
                snapshot_epoch=u.snapshot_epoch,
                state_epoch=DEFAULT_EPOCH,
                leader_epoch=u.leader_epoch,
                start_offset=u.start_offset,
                batches=_batches(u.state_batches),
                delivery_complete_count=u.delivery_complete_count,
            )
    except UnsupportedVersionError:
        return None
    return ShareRecord(record_type, share_key, state)


def _batches(wire: list) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in wire
    )


def decode_logged(header: BatchHeader, batch: memoryview) -> list[tuple[int, ShareRecord]]:
    """The records of one batch of ``__share_group_state`` with their offsets (a control
    batch has none)."""
    if header.is_control:
        return []
    return list(_decoded(batch))


def _decoded(batch: memoryview) -> Iterator[tuple[int, ShareRecord]]:
    for r in iter_records(batch):
        record = decode_record(r.key, r.value)
        if record is not None:
            yield r.offset, record
