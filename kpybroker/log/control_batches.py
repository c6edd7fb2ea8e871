"""Transaction markers: the control batches that end a transaction in a partition
(Kafka's ``EndTransactionMarker``, ``ControlRecordType``,
``MemoryRecords.withEndTransactionMarker``).

A marker is a batch with the control (bit 5) and transactional (bit 4)
attributes, the producer's id and epoch, no sequence, and one record: its key
is ``version int16 (0), type int16`` (0 ABORT, 1 COMMIT), its value
``version int16 (0), coordinator_epoch int32``. Consumers never see its record;
they use it to learn where a transaction ended.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kpybroker.protocol.records import Buffer, NewRecord, build_batch, iter_records

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class EndTxnMarker(NamedTuple):
    committed: bool
    coordinator_epoch: int


def build_marker_batch(
    producer_id: int, producer_epoch: int, marker: EndTxnMarker, timestamp: int
) -> bytearray:
    """One marker batch at base offset 0, for the log to stamp with its offset and epoch."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if marker.committed else ABORT)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, marker.coordinator_epoch)
    return bytearray(
        build_batch(
            [NewRecord(key, value, (), timestamp)],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            timestamp=timestamp,
            transactional=True,
            control=True,
        )
    )


def read_marker(batch: Buffer) -> EndTxnMarker | None:
    """The end-transaction marker of a control batch; None for an empty one (compaction
    emptied it) or a control record of another type (Kafka ignores those too)."""
    record = next(iter_records(batch), None)
    if record is None or record.key is None or len(record.key) < _KEY.size:
        return None
    _, kind = _KEY.unpack_from(record.key)
    if kind not in (ABORT, COMMIT) or record.value is None or len(record.value) < _VALUE.size:
        return None
    _, coordinator_epoch = _VALUE.unpack_from(record.value)
    return EndTxnMarker(kind == COMMIT, coordinator_epoch)
