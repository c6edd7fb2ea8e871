"""What compaction keeps of one batch: Kafka's ``Cleaner.cleanInto`` record filter
(``checkBatchRetention``, ``shouldRetainRecord``) together with
``MemoryRecords.filterTo``.

A record is kept when it is past the mapped part of the log, or it is the
latest record of its key and either has a value or is a tombstone still inside
its delete horizon. Records without a key are dropped. A batch whose records
all stay (and that needs no horizon set) is copied byte for byte; otherwise
the kept records are re-encoded in the batch's own codec with their offsets
and timestamps (``build_retained_batch``). A non-transactional batch of the
mapped section whose offset range holds no key's latest offset has nothing to
keep, which the offset map tells without its records being read
(``OffsetMap.maps_none_between``): most batches of a log of superseded keys.

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
    BatchKeys,
    build_empty_batch,
    build_retained_batch,
    iter_records,
    scan_record_keys,
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


def filter_batch(
    data: memoryview, header: BatchHeader, cleaning: CleaningRound, stats: FilterStats
) -> bytes | memoryview | None:
    """The bytes to write for the batch ``data`` (``header`` parsed from it), or None to drop it.

    Only keys are read to decide, and none of a batch dropped whole: aborted
    data, or a plain (non-transactional) batch of the mapped section in which
    no key has its latest record, since every record it had went into the map
    (``OffsetMap.maps_none_between``). The records are decoded in full only
    for a batch that must be rewritten.
    """
    stats.bytes_read += len(data)
    horizon = header.delete_horizon_ms
    if header.is_control:
        batch = scan_record_keys(data)
        first_key = batch.keys[0] if batch.keys else None
        no_txn_data = cleaning.txns.on_control_batch_read(header, first_key)
        # A marker goes once its transaction has no data left and its horizon has passed.
        discard = no_txn_data and horizon is not None and horizon <= cleaning.now_ms
    else:
        no_txn_data = False
        discard = cleaning.txns.on_batch_read(header) or (  # data of an aborted transaction
            not header.is_transactional
            and cleaning.offset_map.maps_none_between(header.base_offset, header.last_offset)
        )
    if discard:
        stats.messages_read += header.record_count
        if not _retain_empty(header, cleaning):
            return None
        out = build_empty_batch(header)
        stats.bytes_retained += len(out)
        return out
    if header.is_control:
        keep = [True] * len(batch.keys)
    else:
        batch = scan_record_keys(data)
        keep = _retained(batch, header, cleaning)
    kept = keep.count(True)
    stats.messages_read += len(keep)
    stats.messages_retained += kept
    out: bytes | memoryview | None
    if kept:
        tombstones = any(keep[i] for i in batch.null_values)
        set_horizon = horizon is None and (tombstones or no_txn_data)
        if kept == len(keep) and not set_horizon:
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


def _retained(batch: BatchKeys, header: BatchHeader, cleaning: CleaningRound) -> list[bool]:
    """Kafka's ``Cleaner.shouldRetainRecord`` for each record of a data batch: kept when past
    the mapped section, else when keyed and the latest of its key and, for a tombstone,
    while its delete horizon (if set) is still ahead."""
    offset_map = cleaning.offset_map
    latest = offset_map.latest_offset
    get = offset_map.get
    keep = [
        offset > latest or (key is not None and offset >= get(key))
        for offset, key in zip(batch.offsets, batch.keys, strict=True)
    ]
    horizon = header.delete_horizon_ms
    if horizon is not None and horizon <= cleaning.now_ms:
        for i in batch.null_values:
            if batch.offsets[i] <= latest:
                keep[i] = False
    return keep


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
