"""What compaction keeps of one batch: Kafka's ``Cleaner.cleanInto`` record filter
(``checkBatchRetention``, ``shouldRetainRecord``) together with
``MemoryRecords.filterTo``.

A record is kept when it is past the mapped part of the log, or it is the
latest record of its key and either has a value or is a tombstone still inside
its delete horizon. Records without a key are dropped. A batch whose records
all stay (and that needs no horizon set) is copied byte for byte; otherwise
the kept records are re-encoded in the batch's own codec with their offsets
and timestamps (``build_retained_batch``).

The delete horizon (KIP-534): the first pass that keeps a tombstone, or a
transaction marker whose transaction has no data left (``cleaned_txns``),
rewrites its batch with attribute bit 6 set and baseTimestamp = the pass's
start time + ``delete.retention.ms`` (the records' timestamp deltas are
rebased, so their timestamps do not change). A later pass at or after that
horizon drops the tombstone, or the whole marker; before it, they stay. The
records of aborted transactions are dropped whenever they are read.

Two kinds of batch stay even when emptied, as a header without records: the
last batch of each active producer (its last data batch carries its last
sequence; when it has none, its last marker of the current epoch carries the
epoch) and the last batch of the cleaning round (it keeps the offset the
cleaned part ends at).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpybroker.log.cleaned_txns import CleanedTransactions
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
    #: the transactions of the cleaned range, fed every batch in offset order (shared by
    #: every group of segments of the pass)
    txns: CleanedTransactions


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

    Only keys are read to decide, and none of a batch dropped whole (aborted
    data); the records are decoded in full only for a batch that must be
    rewritten.
    """
    stats.bytes_read += len(data)
    horizon = header.delete_horizon_ms
    if header.is_control:
        keys = list(iter_record_keys(data))
        no_txn_data = cleaning.txns.on_control_batch_read(header, keys[0].key if keys else None)
        # A marker goes once its transaction has no data left and its horizon has passed.
        discard = no_txn_data and horizon is not None and horizon <= cleaning.now_ms
    else:
        no_txn_data = False
        discard = cleaning.txns.on_batch_read(header)  # data of an aborted transaction
        keys = [] if discard else list(iter_record_keys(data))
    if discard:
        stats.messages_read += header.record_count
        if not _retain_empty(header, cleaning):
            return None
        out = build_empty_batch(header)
        stats.bytes_retained += len(out)
        return out
    if header.is_control:
        keep = [True] * len(keys)
    else:
        keep = [_retain_record(record, header, cleaning, stats) for record in keys]
    kept = keep.count(True)
    stats.messages_read += len(keys)
    stats.messages_retained += kept
    out: bytes | memoryview | None
    if kept:
        tombstones = any(k and not record.has_value for k, record in zip(keep, keys, strict=True))
        set_horizon = horizon is None and (tombstones or no_txn_data)
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
