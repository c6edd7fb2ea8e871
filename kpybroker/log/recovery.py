"""Opening a partition directory, and crash recovery (Kafka's ``LogLoader``), in one place.

First, what an interrupted operation left is resolved, in Kafka's order:
``.deleted`` and ``.cleaned`` files go (a deletion already decided; a compacted
copy not yet complete), and a ``.swap`` segment (a compacted copy that was
complete and fsynced) replaces every segment file it covers, then takes its
final name. So a compaction interrupted at any point loses nothing.

After a clean shutdown the segments are trusted: only the last one is scanned
(from its last index entry) to find the log end offset. Otherwise every segment
from the one holding the recovery point onwards is read in full, each batch is
CRC-checked, the indexes are rebuilt, and the log is cut after the last valid
batch, dropping any later segments. Producer state comes from the newest
snapshot plus a replay of the batch headers written after it (and the record
of each transaction marker).

Transaction indexes cannot be rebuilt from their segment alone: an aborted
transaction's entry needs its first offset, which may lie in an earlier
segment. So, as Kafka's ``LogLoader.recoverSegment`` does, every segment that
was recovered, swapped in or had its indexes rebuilt gets its ``.txnindex``
rebuilt by the producer-state replay, which then starts at a snapshot at or
below the first such segment.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpybroker.log.checkpoint import fsync_dir
from kpybroker.log.control_batches import read_marker
from kpybroker.log.leader_epoch import LeaderEpochCache
from kpybroker.log.log_config import LogConfig
from kpybroker.log.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TEMP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    names_ending,
    offset_from_filename,
)
from kpybroker.log.producer_state import ProducerStateManager
from kpybroker.log.segment import Segment, read_next_offset
from kpybroker.protocol.records import BatchHeader

log = logging.getLogger(__name__)

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Left behind by an interrupted write or delete: never part of the log.
_LEFTOVER_SUFFIXES = (TEMP_SUFFIX, DELETED_SUFFIX)


@dataclass
class LoadedLog:
    segments: list[Segment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    #: The base of the first segment whose transaction index must be rebuilt, None if none.
    reindex_from: int | None = None


def new_log(
    directory: Path, config: LogConfig, *, log_start_offset: int, recovery_point: int, now_ms: int
) -> LoadedLog:
    """``load_log`` of a partition directory made just now: its one empty segment, and
    nothing to look for, recover or rebuild (each look is a directory listing, and a
    broker making thousands of partitions makes each directory once)."""
    segment = Segment(directory, log_start_offset, config, now_ms, create=True, in_new_dir=True)
    return LoadedLog(
        [segment], log_start_offset, log_start_offset, min(recovery_point, log_start_offset)
    )


def load_log(
    directory: Path,
    config: LogConfig,
    epoch_cache: LeaderEpochCache,
    *,
    log_start_offset: int,
    recovery_point: int,
    clean_shutdown: bool,
    now_ms: int,
) -> LoadedLog:
    """Open (and if needed recover) the segments of one partition directory."""
    started = time.monotonic()
    swapped = _complete_swaps(directory, _remove_temp_files_and_collect_swaps(directory))
    _remove_orphan_indexes(directory)
    names = names_ending(directory, LOG_SUFFIX)
    bases = sorted(o for o in map(offset_from_filename, names) if o is not None)
    segments = [Segment(directory, base, config, now_ms) for base in bases]
    if not segments:
        segments.append(Segment(directory, log_start_offset, config, now_ms, create=True))
    first_unflushed = len(segments)
    truncated = 0
    if not clean_shutdown:
        bases = [s.base_offset for s in segments]
        first_unflushed = max(0, bisect_right(bases, recovery_point) - 1)
        truncated = _recover(segments, first_unflushed, epoch_cache)
    reindexed = [s.base_offset for s in segments[first_unflushed:]] + swapped
    for segment in segments[:first_unflushed]:
        if segment.indexes_missing or not segment.indexes_look_valid():
            segment.rebuild_indexes()
            reindexed.append(segment.base_offset)

    log_end_offset = segments[-1].next_offset()
    # As Kafka's LogLoader: what recovery checked is not flushed, so the recovery point
    # stays where it was (a second crash checks the same segments again); it only moves
    # when the log is flushed.
    recovery_point = min(recovery_point, log_end_offset)
    log_start_offset = max(log_start_offset, segments[0].base_offset)
    if log_start_offset > log_end_offset:
        log.warning(
            "%s: log start offset %d is past the log end %d",
            directory,
            log_start_offset,
            log_end_offset,
        )
        log_start_offset = log_end_offset
    epoch_cache.fit_to_log(log_start_offset, log_end_offset)
    for segment in segments[:-1]:
        segment.offset_index.unload()
        segment.time_index.unload()

    elapsed_ms = (time.monotonic() - started) * 1000
    if clean_shutdown:
        log.debug(
            "loaded %s (end offset %d) in %.1f ms", directory.name, log_end_offset, elapsed_ms
        )
    else:
        # A cut tail is worth an INFO line each; the progress of the load is the log manager's.
        log.log(
            logging.INFO if truncated else logging.DEBUG,
            "recovered %s from offset %d in %.1f ms: %d segment(s) checked, %d byte(s) truncated, "
            "end offset %d",
            directory.name,
            segments[first_unflushed].base_offset
            if first_unflushed < len(segments)
            else log_end_offset,
            elapsed_ms,
            len(segments) - first_unflushed,
            truncated,
            log_end_offset,
        )
    return LoadedLog(
        segments, log_start_offset, log_end_offset, recovery_point, min(reindexed, default=None)
    )


def _remove_temp_files_and_collect_swaps(directory: Path) -> list[Path]:
    """Delete temp, ``.deleted`` and ``.cleaned`` files; return the ``.swap`` files to complete.

    As Kafka's ``removeTempFilesAndCollectSwapFiles``, a ``.swap`` file at or
    above the lowest ``.cleaned`` offset belongs to an unfinished operation and
    goes too.
    """
    cleaned, swaps = [], []
    for path in directory.iterdir():
        name = path.name
        if name.endswith(_LEFTOVER_SUFFIXES):
            log.info("removing leftover file %s", path)
            path.unlink(missing_ok=True)
        elif name.endswith(CLEANED_SUFFIX):
            cleaned.append(path)
        elif name.endswith(SWAP_SUFFIX) and offset_from_filename(name) is not None:
            swaps.append(path)
    min_cleaned = min(
        (o for p in cleaned if (o := offset_from_filename(p.name)) is not None), default=None
    )
    valid_swaps = []
    for path in swaps:
        if min_cleaned is not None and _file_offset(path) >= min_cleaned:
            log.info("removing %s, part of an unfinished compaction", path)
            path.unlink(missing_ok=True)
        else:
            valid_swaps.append(path)
    for path in cleaned:
        log.info("removing %s, an unfinished compaction's output", path)
        path.unlink(missing_ok=True)
    return valid_swaps


def _complete_swaps(directory: Path, swaps: list[Path]) -> list[int]:
    """Finish swaps a crash interrupted (Kafka's ``LogLoader.load`` passes 2 and 3).

    A ``.log.swap`` covers offsets from its base to its next offset: every other
    file in that range belongs to a segment it replaced and is deleted, then the
    swap takes its final name. Its index files are dropped instead of renamed:
    they may be missing or half renamed, and are rebuilt from the ``.log``.
    Returns the base offsets of the segments swapped in.
    """
    ranges = []
    for path in swaps:
        if path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base = _file_offset(path)
            log.info(
                "found log file %s from an interrupted swap operation, which is recoverable "
                "from .swap files by renaming",
                path,
            )
            # An empty swap covers at least its base: the replaced segment's files there go.
            ranges.append((base, max(read_next_offset(path, base), base + 1)))
    if not ranges:
        return []
    low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
    for path in directory.iterdir():
        offset = offset_from_filename(path.name)
        if not path.name.endswith(SWAP_SUFFIX) and offset is not None and low <= offset < high:
            log.info("deleting %s, compacted but not yet deleted", path)
            path.unlink()
    for path in swaps:
        if path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            log.info("recovering %s by renaming it from its .swap name", path)
            path.rename(path.with_name(path.name.removesuffix(SWAP_SUFFIX)))
        else:
            path.unlink()
    fsync_dir(directory)
    return [base for base, _ in ranges]


def _file_offset(path: Path) -> int:
    """The base offset a segment file is named after (checked to parse when collected)."""
    offset = offset_from_filename(path.name)
    assert offset is not None
    return offset


def _remove_orphan_indexes(directory: Path) -> None:
    """Delete index files whose ``.log`` is gone (Kafka's ``loadSegmentFiles`` does too)."""
    logs = {name.split(".", 1)[0] for name in names_ending(directory, LOG_SUFFIX)}
    for path in directory.iterdir():
        name = path.name
        if name.endswith(_INDEX_SUFFIXES) and name.split(".", 1)[0] not in logs:
            log.info("removing orphan index file %s", path)
            path.unlink(missing_ok=True)


def _recover(segments: list[Segment], first: int, epoch_cache: LeaderEpochCache) -> int:
    """Recover ``segments[first:]`` in place; a damaged segment drops every segment after it."""

    def on_batch(header: BatchHeader) -> None:
        # As LogSegment.recover: only epochs newer than the cache's latest are learnt.
        if header.partition_leader_epoch > epoch_cache.latest_epoch:
            epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

    for i in range(first, len(segments)):
        truncated = segments[i].recover(on_batch)
        if truncated:
            for dropped in segments[i + 1 :]:
                log.warning("deleting %s, which follows a damaged segment", dropped.log_path)
                dropped.delete_files()
                dropped.release()
            del segments[i + 1 :]
            return truncated
    return 0


def batches_from(
    segments: Sequence[Segment], offset: int, end_offset: int
) -> Iterator[tuple[Segment, int, BatchHeader]]:
    """``(segment, position, header)`` of each batch holding offsets in ``[offset, end_offset)``."""
    bases = [s.base_offset for s in segments]
    for i in range(max(0, bisect_right(bases, offset) - 1), len(segments)):
        segment = segments[i]
        found = segment.find_batch(offset)
        if found is None:
            continue
        for position, header in segment.headers(found[0]):
            if header.base_offset >= end_offset:
                return
            yield segment, position, header


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    segments: Sequence[Segment],
    log_start_offset: int,
    log_end_offset: int,
    now_ms: int,
    reindex_from: int | None = None,
) -> None:
    """Producer state as of ``log_end_offset``: newest snapshot, then a replay of later batches.

    With ``reindex_from``, the transaction indexes of the segments from there on
    are rebuilt by the replay, which then starts at a snapshot at or below it.
    Also removes stray snapshots (not at a segment base), keeping the newest,
    which a clean shutdown writes at the log end (``removeStraySnapshots``).
    """
    bases = {s.base_offset for s in segments}
    offsets = producer_state.snapshot_offsets()
    producer_state.delete_snapshots(bases | set(offsets[-1:]))
    reindex = log_end_offset + 1 if reindex_from is None else reindex_from
    loaded = producer_state.load_latest_snapshot(
        min(reindex, log_end_offset), now_ms, end_offset=log_end_offset
    )
    start = log_start_offset if loaded is None else max(loaded, log_start_offset)
    for segment in segments:
        if segment.base_offset >= reindex:
            segment.txn_index.reset()
    for segment, position, header in batches_from(segments, start, log_end_offset):
        if header.producer_id < 0:
            continue
        marker = None
        if header.is_control:
            marker = read_marker(segment.read(position, header.size))
        index = segment.txn_index if header.base_offset >= reindex else None
        producer_state.update(header, marker, index)
    log.debug(
        "producer state of %s: snapshot %s, replayed from %d, %d producer(s), %d open txn(s)",
        producer_state.directory.name,
        loaded,
        start,
        len(producer_state.producers),
        len(producer_state.txns.ongoing),
    )
