"""Reading a ``__consumer_offsets`` partition back, to rebuild its coordinator state.

The log is read from its start to its end (as Kafka's loader does: on one
broker everything appended is committed) in chunks of
``offsets.load.buffer.size``, yielding to the event loop between chunks so
that loading a large partition does not stall the broker.

Each record comes with its offset and, from a transactional batch (a
TxnOffsetCommit's), its producer id: those offsets are pending until the
producer's end marker, a control batch whose record key is ``int16 version,
int16 type`` (0 ABORT, 1 COMMIT), which is yielded in its place in the log.
So a transaction that ended before the load is committed or aborted, and one
still open stays pending. A record or batch that cannot be decoded is logged
and skipped, as one bad record must not make a whole partition unusable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import NamedTuple

from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, decode_logged
from kpybroker.log.control_batches import read_marker
from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.records import NO_PRODUCER_ID, iter_batches

log = logging.getLogger(__name__)

LOADING_ERRORS = (KafkaError, ValueError, IndexError, UnicodeDecodeError)


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


async def read_partition(plog: object, chunk_bytes: int) -> AsyncIterator[list[Logged]]:
    """Yield the coordinator records and end markers of ``plog`` (a PartitionLog), by chunk."""
    offset = plog.log_start_offset  # type: ignore[attr-defined]
    end = plog.log_end_offset  # type: ignore[attr-defined]
    while offset < end:
        data = plog.read(offset, chunk_bytes, end).read_bytes()  # type: ignore[attr-defined]
        if not data:
            break
        entries: list[Logged] = []
        view = memoryview(data)
        for pos, header in iter_batches(data):
            offset = header.last_offset + 1
            batch = view[pos : pos + header.size]
            try:
                if header.is_control:
                    marker = read_marker(batch)
                    if marker is not None:
                        entries.append(LoggedMarker(header.producer_id, marker.committed))
                    continue
                producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
                entries.extend(
                    LoggedRecord(at, producer_id, record) for at, record in decode_logged(batch)
                )
            except LOADING_ERRORS as exc:
                log.error("%s: skipping the batch at offset %d: %s", plog, header.base_offset, exc)
        yield entries
        await asyncio.sleep(0)
