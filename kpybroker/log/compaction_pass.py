"""The work of compacting one log (Kafka's ``Cleaner``), done in the cleaner's worker thread.

A round has two phases. ``build_offset_map`` reads the dirty section (from the
first dirty offset to the first uncleanable one) and maps each key to its
latest offset, until the map is full. ``clean_group`` then rewrites a group of
segments from the start of the log up to the mapped end into one replacement
segment ``<base>.log.cleaned`` (plus indexes), keeping what
``batch_filter.filter_batch`` keeps, fsyncs it and closes it. Swapping it into
the log is the caller's job, on the event loop (``PartitionLog.replace_segments``).

Everything here only reads sealed segments, which the caller guarantees stay
open until the round ends, and writes files nobody else looks at yet; so it is
safe off the event loop while produce and fetch go on. ``check_done`` is called
between batches and raises ``CleaningAborted`` when the round must stop.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from kpybroker.log.batch_filter import CleaningRound, FilterStats, filter_batch
from kpybroker.log.cleaned_txns import CleanedTransactions
from kpybroker.log.log_config import INT_MAX, CleanerConfig, LogConfig
from kpybroker.log.names import CLEANED_SUFFIX
from kpybroker.log.offset_map import OffsetMap
from kpybroker.log.segment import Segment, remove_segment_files
from kpybroker.protocol.records import BatchHeader, parse_header, scan_record_keys

CheckDone = Callable[[], None]
MB = 1024 * 1024


class CleaningAborted(Exception):
    """The round was stopped (partition deleted, broker shutting down)."""


@dataclass(slots=True)
class CleanerStats:
    """One round's numbers, as Kafka's cleaner reports them: the log processed (read and
    rewritten) and, apart, the dirty part indexed into the offset map."""

    map_bytes_read: int = 0
    map_seconds: float = 0.0
    clean_seconds: float = 0.0
    filtered: FilterStats = field(default_factory=FilterStats)

    @property
    def elapsed_seconds(self) -> float:
        return self.map_seconds + self.clean_seconds

    @property
    def processed_mb_per_second(self) -> float:
        """Kafka's "MB of log processed" per second of the whole round."""
        elapsed = self.elapsed_seconds
        return self.filtered.bytes_read / MB / elapsed if elapsed > 0 else 0.0


class Throttler:
    """Keeps the cleaner's I/O under ``log.cleaner.io.max.bytes.per.second`` by sleeping."""

    CHECK_INTERVAL_S = 0.3  # Kafka's LogCleaner throttler checks every 300 ms

    def __init__(self, max_bytes_per_second: float, stop: threading.Event) -> None:
        self._rate = max_bytes_per_second
        self._stop = stop
        self._period_start = time.monotonic()
        self._bytes = 0

    def maybe_throttle(self, nbytes: int) -> None:
        """After each check interval, sleep long enough to bring the interval's rate down to
        the limit (Kafka's ``Throttler``); a shutdown cuts the sleep short."""
        if self._rate >= sys.float_info.max:
            return
        self._bytes += nbytes
        elapsed = time.monotonic() - self._period_start
        if elapsed > self.CHECK_INTERVAL_S:
            ahead = self._bytes / self._rate - elapsed
            if ahead > 0:
                self._stop.wait(ahead)
            self._period_start = time.monotonic()
            self._bytes = 0


class Cleaner:
    """Reads segments and writes cleaned ones; holds no state between rounds."""

    def __init__(self, config: CleanerConfig, stop: threading.Event) -> None:
        self._config = config
        # Kafka gives each cleaner thread half of log.cleaner.io.buffer.size to read with.
        self._chunk = max(config.io_buffer_size // 2, 64 * 1024)
        self._throttler = Throttler(config.max_io_bytes_per_second, stop)

    def build_offset_map(
        self,
        dirty: Sequence[Segment],
        start: int,
        end: int,
        start_position: int,
        txns: CleanedTransactions,
        stats: CleanerStats,
        check_done: CheckDone,
    ) -> OffsetMap:
        """Map the keys of ``dirty`` (the segments holding ``[start, end)``) to their latest offset.

        Reading starts at ``start_position`` of the first segment (an index
        lookup for ``start``). ``txns`` holds the aborted transactions of
        ``[start, end)``, whose data is not mapped.
        Raises ``ValueError`` when the map cannot hold even the first batch's
        keys: no progress could ever be made.
        """
        started = time.monotonic()
        offset_map = OffsetMap(
            self._config.dedupe_buffer_size, self._config.dedupe_buffer_load_factor, start
        )
        next_starts = [segment.base_offset for segment in dirty[1:]] + [end] if dirty else []
        for i, (segment, next_start) in enumerate(zip(dirty, next_starts, strict=True)):
            position = start_position if i == 0 else 0
            if self._map_segment(segment, position, start, offset_map, txns, stats, check_done):
                break
            offset_map.update_latest_offset(next_start - 1)  # offsets lost to gaps count as mapped
        if dirty and offset_map.latest_offset < start:
            raise ValueError(
                "log.cleaner.dedupe.buffer.size is too small to map the keys of a single batch"
            )
        stats.map_seconds += time.monotonic() - started
        return offset_map

    def _map_segment(
        self,
        segment: Segment,
        position: int,
        start: int,
        offset_map: OffsetMap,
        txns: CleanedTransactions,
        stats: CleanerStats,
        check_done: CheckDone,
    ) -> bool:
        """Add one segment's keys from ``start`` on; True when the map filled up on the way."""
        for _, header, data in segment.batches(position, self._chunk):
            check_done()
            if header.is_control:
                keys = scan_record_keys(data).keys
                txns.on_control_batch_read(header, keys[0] if keys else None)
            elif not txns.on_batch_read(header) and not _map_batch(header, data, offset_map):
                return True
            if header.last_offset >= start:
                offset_map.update_latest_offset(header.last_offset)
            stats.map_bytes_read += len(data)
            self._throttler.maybe_throttle(len(data))
        return False

    def clean_group(
        self,
        directory: Path,
        group: Sequence[Segment],
        config: LogConfig,
        cleaning: CleaningRound,
        last_modified_ms: int,
        stats: CleanerStats,
        check_done: CheckDone,
    ) -> None:
        """Write the compacted copy of ``group`` as segment files with the ``.cleaned`` suffix.

        On return the files are complete, fsynced and closed; on any error they
        are removed. The copy keeps the last source segment's mtime, which
        time-based retention falls back on.
        """
        started = time.monotonic()
        base_offset = group[0].base_offset
        remove_segment_files(directory, base_offset, CLEANED_SUFFIX)
        cleaned = Segment(
            directory, base_offset, config, cleaning.now_ms, create=True, file_suffix=CLEANED_SUFFIX
        )
        try:
            for segment in group:
                for _, header, data in segment.batches(0, self._chunk):
                    check_done()
                    out = filter_batch(data, header, cleaning, stats.filtered)
                    self._throttler.maybe_throttle(len(data))
                    if out is not None:
                        cleaned.append(out, header.last_offset, parse_header(out).max_timestamp)
            # The aborted transactions that still have data here (Kafka's cleanedIndex).
            for txn in cleaning.txns.take_retained():
                cleaned.txn_index.append(txn)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(last_modified_ms)
        except BaseException:
            cleaned.delete_files()
            raise
        finally:
            cleaned.release()
        stats.clean_seconds += time.monotonic() - started


def _map_batch(header: BatchHeader, data: memoryview, offset_map: OffsetMap) -> bool:
    """Put the keyed records of a data batch from ``offset_map.start`` on; False when the
    map filled up on the way."""
    offsets, keys, null_keys, _ = scan_record_keys(data)
    if not offsets:
        return True
    first, last = min(offsets), max(offsets)
    if first < header.base_offset or last > header.last_offset:
        offset_map.records_within_batches = False
    if null_keys or first < offset_map.start:  # rare: key-less records, or the first batch
        pairs = [
            (k, o)
            for k, o in zip(keys, offsets, strict=True)
            if k is not None and o >= offset_map.start
        ]
        return offset_map.put_all([k for k, _ in pairs], [o for _, o in pairs])
    return offset_map.put_all(cast("list[bytes]", keys), offsets)  # no key is None


def group_segments_by_size(
    segments: Sequence[Segment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[Segment]]:
    """Consecutive segments cleaned into one (Kafka's ``groupSegmentsBySize``).

    A group's total log size stays within ``segment.bytes``, each of its index
    sizes within ``segment.index.bytes``, and its offsets within an int32 of
    its base, so the replacement is a valid segment; compaction so merges
    segments that have shrunk.
    """
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_index_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            last_offset = (
                segments[i + 1].base_offset - 1
                if i + 1 < len(segments)
                else first_uncleanable_offset - 1
            )
            if (
                log_size + candidate.size > max_size
                or index_size + candidate.offset_index.size_in_bytes > max_index_size
                or time_index_size + candidate.time_index.size_in_bytes > max_index_size
                or (candidate.size and last_offset - group[0].base_offset > INT_MAX)
            ):
                break
            group.append(candidate)
            log_size += candidate.size
            index_size += candidate.offset_index.size_in_bytes
            time_index_size += candidate.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups
