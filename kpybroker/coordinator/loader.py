"""Reading a ``__consumer_offsets`` partition back, to rebuild its coordinator state.

The log is read from its start to its end (as Kafka's loader does: on one
broker everything appended is committed) in chunks of
``offsets.load.buffer.size``, yielding to the event loop between chunks so
that loading a large partition does not stall the broker. Control batches and
transactional batches (TxnOffsetCommit, which this broker does not
implement) are skipped; a record that cannot be decoded is logged and
skipped, as one bad record must not make a whole partition unusable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, decode_batch
from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.records import iter_batches

log = logging.getLogger(__name__)

LOADING_ERRORS = (KafkaError, ValueError, IndexError, UnicodeDecodeError)


async def read_partition(plog: object, chunk_bytes: int) -> AsyncIterator[list[CoordinatorRecord]]:
    """Yield the coordinator records of ``plog`` (a PartitionLog), chunk by chunk."""
    offset = plog.log_start_offset  # type: ignore[attr-defined]
    end = plog.log_end_offset  # type: ignore[attr-defined]
    while offset < end:
        data = plog.read(offset, chunk_bytes, end).read_bytes()  # type: ignore[attr-defined]
        if not data:
            break
        records: list[CoordinatorRecord] = []
        view = memoryview(data)
        for pos, header in iter_batches(data):
            offset = header.last_offset + 1
            if header.is_control or header.is_transactional:
                continue
            try:
                records.extend(decode_batch(view[pos : pos + header.size]))
            except LOADING_ERRORS as exc:
                log.error("%s: skipping the batch at offset %d: %s", plog, header.base_offset, exc)
        yield records
        await asyncio.sleep(0)
