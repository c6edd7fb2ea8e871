"""The records of ``__transaction_state``, in Kafka's format, and reading a partition back.

Key: int16 version 0, then ``TransactionLogKey`` (the transactional id).
Value: int16 version, then ``TransactionLogValue``; a null value is the
tombstone of an expired id. Kafka writes value version 0 under transaction
version 1 (and 1, flexible with tagged fields, under version 2), with null
partitions in the Empty state, and so does this module, so a log directory
reads the same in either broker. ``decode_batch`` reads one batch back
(the runtime reads the partition with ``partition_runtime.read_partition``).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kpybroker.protocol.messages.transaction_log_key import TransactionLogKey
from kpybroker.protocol.messages.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)
from kpybroker.protocol.records import BatchHeader, NewRecord, build_batch, iter_records
from kpybroker.transaction_coordinator.transaction_state import TxnFields, TxnState

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
#: Value versions: 0 for transactions of clients of version 0 or 1, 1 (flexible, with the
#: producer-id history and the client's version as tagged fields) for version 2.
VALUE_VERSION_V1_CLIENTS = 0
VALUE_VERSION_V2_CLIENTS = 1


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A transactional id's fields; None is the tombstone of an expired id."""

    transactional_id: str
    fields: TxnFields | None


def encode_record(record: TxnRecord) -> NewRecord:
    key = _VERSION.pack(KEY_VERSION) + TransactionLogKey(
        transactional_id=record.transactional_id
    ).encode_bytes(KEY_VERSION)
    fields = record.fields
    if fields is None:
        return NewRecord(key, None)
    partitions: dict[str, list[int]] = defaultdict(list)
    for topic, index in sorted(fields.partitions):
        partitions[topic].append(index)
    value = TransactionLogValue(
        producer_id=fields.producer_id,
        producer_epoch=fields.producer_epoch,
        transaction_timeout_ms=fields.timeout_ms,
        transaction_status=int(fields.state),
        transaction_partitions=None
        if fields.state == TxnState.EMPTY
        else [PartitionsSchema(topic=t, partition_ids=ids) for t, ids in partitions.items()],
        transaction_last_update_timestamp_ms=fields.last_update_timestamp_ms,
        transaction_start_timestamp_ms=fields.start_timestamp_ms,
        previous_producer_id=fields.previous_producer_id,
        next_producer_id=fields.next_producer_id,
        client_transaction_version=fields.client_transaction_version,
    )
    version = VALUE_VERSION_V2_CLIENTS if fields.bumps_on_end else VALUE_VERSION_V1_CLIENTS
    return NewRecord(key, _VERSION.pack(version) + value.encode_bytes(version))


def decode_record(key: bytes | None, value: bytes | None) -> TxnRecord | None:
    """The record's transactional id and fields; None for a key of another kind."""
    if key is None or len(key) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(key)
    if version != KEY_VERSION:
        return None
    decoded_key, _ = TransactionLogKey.decode(key, _VERSION.size, version)
    if value is None:
        return TxnRecord(decoded_key.transactional_id, None)
    (value_version,) = _VERSION.unpack_from(value)
    v, _ = TransactionLogValue.decode(value, _VERSION.size, value_version)
    partitions = frozenset(
        (p.topic, index) for p in v.transaction_partitions or () for index in p.partition_ids
    )
    return TxnRecord(
        decoded_key.transactional_id,
        TxnFields(
            producer_id=v.producer_id,
            producer_epoch=v.producer_epoch,
            timeout_ms=v.transaction_timeout_ms,
            state=TxnState(v.transaction_status),
            partitions=partitions,
            start_timestamp_ms=v.transaction_start_timestamp_ms,
            last_update_timestamp_ms=v.transaction_last_update_timestamp_ms,
            previous_producer_id=v.previous_producer_id,
            next_producer_id=v.next_producer_id,
            client_transaction_version=v.client_transaction_version,
        ),
    )


def encode_batch(records: Iterable[TxnRecord]) -> bytearray:
    """One uncompressed batch of ``records`` (offsets are stamped by the log)."""
    return bytearray(build_batch([encode_record(r) for r in records]))


def decode_batch(header: BatchHeader, batch: memoryview) -> list[TxnRecord]:
    """The records of one batch of ``__transaction_state`` (a control batch has none)."""
    if header.is_control:
        return []
    decoded = (decode_record(r.key, r.value) for r in iter_records(batch))
    return [record for record in decoded if record is not None]
