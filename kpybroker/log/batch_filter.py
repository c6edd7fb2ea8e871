"""What compaction keeps of one batch: Kafka's ``Cleaner.cleanInto`` record filter together
with ``MemoryRecords.filterTo``.

A record is kept when it is past the mapped part of the log, or it is the
latest record of its key and either has a value or is a tombstone still inside
its delete horizon. Records without a key are dropped. A batch whose records
all stay (and that needs no horizon set) is copied byte for byte; otherwise
the kept records are re-encoded in the batch's own codec with their offsets
and timestamps (``build_retained_batch``). The first time a tombstone is kept,
the batch gets a delete horizon of now + ``delete.retention.ms`` (KIP-534);
a later round past that horizon drops it.

Two kinds of batch stay even when emptied, as a header without records: the
last batch of each active idempotent producer (it carries the producer's last
sequence) and the last batch of the cleaning round (it keeps the offset the
cleaned part ends at). The records of aborted transactions are dropped
(``cleaned_txns``); control batches (transaction markers) are kept whole, which
is always safe: Kafka also removes markers once their transaction's data is
gone and ``delete.retention.ms`` has passed, which kpybroker does not do yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpybroker.log.cleaned_txns import AbortedBatches
from kpybroker.log.offset_map import OffsetMap
from kpybroker.protocol.records import (
    BatchHeader,
    RecordKey,
    build_empty_batch,
    build_retained_batch,
    iter_record_keys,
    iter_records,
)


@dataclass(frozen=True, slots=True)
class CleaningRound:
    """What every batch of one cleaning round is judged against."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    #: producer id -> (its last data offset or -1, its epoch), as of the round's start
    last_records: Mapping[int, tuple[int, int]]
    #: the first offset not cleaned; the batch ending just below it is kept
    upper_bound_offset: int
    #: the aborted transactions of the cleaned range, fed every batch in offset order
    aborted: AbortedBatches


@dataclass(slots=True)
class FilterStats:
    """Counts for the cleaner's log line and the benchmark."""

    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    keyless_dropped: int = 0


def filter_batch(
    data: memoryview, header: BatchHeader, cleaning: CleaningRound, stats: FilterStats
) -> bytes | memoryview | None:
    """The bytes to write for the batch ``data`` (``header`` parsed from it), or None to drop it.

    Only keys are read to decide; the records are decoded in full only for a
    batch that must be rewritten.
    """
    keys = list(iter_record_keys(data))
    aborted = cleaning.aborted.is_aborted(header)
    if header.is_control:
        keep = [True] * len(keys)
    elif aborted:
        keep = [False] * len(keys)
    else:
        keep = [_retain_record(record, header, cleaning, stats) for record in keys]
    kept = keep.count(True)
    stats.messages_read += len(keys)
    stats.bytes_read += len(data)
    stats.messages_retained += kept
    out: bytes | memoryview | None
    if kept:
        horizon = header.delete_horizon_ms
        tombstones = any(k and not record.has_value for k, record in zip(keep, keys, strict=True))
        set_horizon = horizon is None and tombstones
        if kept == len(keys) and not set_horizon:
            out = data
        else:
            if set_horizon:
                horizon = cleaning.now_ms + cleaning.delete_retention_ms
            records = [r for r, k in zip(iter_records(data), keep, strict=True) if k]
            out = build_retained_batch(header, records, horizon)
    elif _retain_empty(header, cleaning):
        out = build_empty_batch(header)
    else:
        return None
    stats.bytes_retained += len(out)
    return out


def _retain_record(
    record: RecordKey, header: BatchHeader, cleaning: CleaningRound, stats: FilterStats
) -> bool:
    """Kafka's ``Cleaner.shouldRetainRecord``."""
    offset_map = cleaning.offset_map
    if record.offset > offset_map.latest_offset:
        return True
    if record.key is None:
        stats.keyless_dropped += 1
        return False
    if record.offset < offset_map.get(record.key):
        return False
    if record.has_value:
        return True
    horizon = header.delete_horizon_ms
    return horizon is None or cleaning.now_ms < horizon


def _retain_empty(header: BatchHeader, cleaning: CleaningRound) -> bool:
    """Whether an emptied batch stays as a bare header (Kafka's ``BatchRetention.RETAIN_EMPTY``)."""
    if header.producer_id >= 0:
        last = cleaning.last_records.get(header.producer_id)
        if last is not None:
            last_data_offset, epoch = last
            if last_data_offset >= 0:
                if header.last_offset == last_data_offset:
                    return True
            elif header.is_control and header.producer_epoch == epoch:
                return True
    return header.last_offset + 1 == cleaning.upper_bound_offset
