"""What a batch of ``__consumer_offsets`` says, to rebuild the group coordinator's state.

The runtime reads the partition with ``partition_runtime.read_partition``
(from start to end, in chunks of ``offsets.load.buffer.size``, skipping a
batch that cannot be decoded) and this module decodes each batch.

Each record comes with its offset and, from a transactional batch (a
TxnOffsetCommit's), its producer id: those offsets are pending until the
producer's end marker, a control batch whose record key is ``int16 version,
int16 type`` (0 ABORT, 1 COMMIT), which is yielded in its place in the log.
So a transaction that ended before the load is committed or aborted, and one
still open stays pending.
"""

from __future__ import annotations

from typing import NamedTuple

from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, decode_logged
from kpybroker.log.control_batches import read_marker
from kpybroker.protocol.records import NO_PRODUCER_ID, BatchHeader


class LoggedRecord(NamedTuple):
    """A record at its log offset; ``producer_id`` is NO_PRODUCER_ID unless transactional."""

    offset: int
    producer_id: int
    record: CoordinatorRecord


class LoggedMarker(NamedTuple):
    """The end of ``producer_id``'s transaction."""

    producer_id: int
    committed: bool


Logged = LoggedRecord | LoggedMarker


def decode_logged_batch(header: BatchHeader, batch: memoryview) -> list[Logged]:
    """The records of one batch with their offsets, or the end marker it is."""
    if header.is_control:
        marker = read_marker(batch)
        return [] if marker is None else [LoggedMarker(header.producer_id, marker.committed)]
    producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
    return [LoggedRecord(at, producer_id, record) for at, record in decode_logged(batch)]
