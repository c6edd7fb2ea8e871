"""The background log cleaner (Kafka's ``LogCleaner`` and its cleaner thread).

Compaction must not stall produce and fetch, which run on the event loop, nor
race with them. So a round is split: the heavy reading and writing
(``Cleaner.build_offset_map``, ``Cleaner.clean_group``) runs in one worker
thread, while everything that looks at or changes a log's segment list (the
choice of log, the grouping, swapping cleaned segments in, checkpoints,
retention of compacted logs) runs on the event loop between those jobs. The
worker only reads sealed segments of the partition in progress, which nothing
else deletes meanwhile: retention skips it, and deleting the partition first
calls ``abort``, which waits for the worker to let go.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kpybroker.log.batch_filter import CleaningRound
from kpybroker.log.cleaned_txns import CleanedTransactions
from kpybroker.log.compaction_pass import (
    MB,
    Cleaner,
    CleanerStats,
    CleaningAborted,
    group_segments_by_size,
)
from kpybroker.log.compaction_schedule import CleanerManager, LogsView, LogToClean, TopicPartition
from kpybroker.log.log_config import CleanerConfig
from kpybroker.log.names import CLEANED_SUFFIX
from kpybroker.log.partition_log import PartitionLog
from kpybroker.log.segment import Segment, remove_segment_files

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ``(log, what, exc)``: a disk error in ``log``'s directory (``LogManager.fail_log``).
DiskErrorReport = Callable[[PartitionLog, str, OSError], None]


def raise_disk_error(_log: PartitionLog, _what: str, exc: OSError) -> None:
    """The default report for a cleaner used on its own (benchmarks, tests): re-raise."""
    raise exc


@dataclass(frozen=True, slots=True)
class _Round:
    tp: TopicPartition
    abort: threading.Event


class LogCleaner:
    """Runs cleaning rounds until shut down; see the module docstring for who runs what where."""

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: Iterable[Path],
        logs: LogsView,
        time_ms: Callable[[], int],
        on_disk_error: DiskErrorReport = raise_disk_error,
    ) -> None:
        """``on_disk_error(log, what, exc)`` takes the directory of a log that a cleaning
        round or retention hit a disk error in offline."""
        self.config = config
        self._on_disk_error = on_disk_error
        self.manager = CleanerManager(log_dirs, logs)
        self._stop = threading.Event()
        self._cleaner = Cleaner(config, self._stop)
        self._time_ms = time_ms
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        self._round: _Round | None = None
        self._job: concurrent.futures.Future[Any] | None = None
        self.last_stats: CleanerStats | None = None

    async def run(self) -> None:
        """Clean the filthiest log, apply retention to compacted logs, back off when idle."""
        while not self._stop.is_set():
            try:
                cleaned = await self.clean_filthiest()
                self.delete_old_segments()
            except Exception:
                log.exception("the log cleaner failed; retrying after log.cleaner.backoff.ms")
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)

    async def clean_filthiest(self) -> bool:
        """One round on the filthiest log that is due; False when none is."""
        ltc = self.manager.grab_filthiest(self._time_ms())
        if ltc is None:
            return False
        current = self._round = _Round(ltc.tp, threading.Event())
        end_offset: int | None = None
        disk_error: OSError | None = None
        try:
            end_offset = await self.clean(ltc, current.abort)
        except CleaningAborted:
            log.info("cleaning of %s was aborted", ltc.log.name)
        except OSError as exc:
            disk_error = exc
        except Exception:
            log.warning("cleaning %s failed; marking it uncleanable", ltc.log.name, exc_info=True)
            self.manager.uncleanable.add(ltc.tp)
            end_offset = ltc.first_dirty_offset
        finally:
            self._round = None
            self.manager.done_cleaning(ltc, None if current.abort.is_set() else end_offset)
        if disk_error is not None:
            self._on_disk_error(ltc.log, f"cleaning {ltc.log.name}", disk_error)
        return True

    async def clean(self, ltc: LogToClean, abort: threading.Event | None = None) -> int:
        """Map the dirty section, then clean and swap in each group; returns the new first
        dirty offset (Kafka's ``Cleaner.doClean``). ``clean_filthiest`` chooses ``ltc`` and
        records the result; tests call this directly to repeat a pass over the same range.

        Every pass rewrites the log from its first segment, and a transaction's data
        always comes before its marker: so a marker whose transaction left no batch
        in the pass has none left in the log (``cleaned_txns``).
        """
        if abort is None:
            abort = threading.Event()
        partition_log = ltc.log
        config = partition_log.config
        now = self._time_ms()
        stats = CleanerStats()

        def check_done() -> None:
            if abort.is_set() or self._stop.is_set():
                raise CleaningAborted

        dirty = partition_log.segments_between(ltc.first_dirty_offset, ltc.first_uncleanable_offset)
        start_position = dirty[0].offset_index.lookup(ltc.first_dirty_offset)[1] if dirty else 0
        offset_map = await self._in_thread(
            self._cleaner.build_offset_map,
            dirty,
            ltc.first_dirty_offset,
            ltc.first_uncleanable_offset,
            start_position,
            CleanedTransactions(
                partition_log.collect_aborted_transactions(
                    ltc.first_dirty_offset, ltc.first_uncleanable_offset
                )
            ),
            stats,
            check_done,
        )
        check_done()
        end_offset = offset_map.latest_offset + 1
        groups = group_segments_by_size(
            partition_log.segments_between(0, end_offset),
            config.segment_bytes,
            config.segment_index_bytes,
            ltc.first_uncleanable_offset,
        )
        size_before = partition_log.size
        # Collected here, on the loop: the worker threads only read what they are given. Kafka
        # collects them segment by segment, from each one's base to the next one's: the same
        # transactions as one search over all the segments cleaned.
        txns = CleanedTransactions(
            partition_log.collect_aborted_transactions(
                groups[0][0].base_offset, self._end_of(partition_log, groups[-1][-1])
            )
            if groups
            else ()
        )
        for group in groups:
            cleaning = CleaningRound(
                offset_map,
                now,
                config.delete_retention_ms,
                partition_log.producer_state.last_records(),
                ltc.first_uncleanable_offset,
                txns,
            )
            base_offset = group[0].base_offset
            try:
                await self._in_thread(
                    self._cleaner.clean_group,
                    partition_log.directory,
                    group,
                    config,
                    cleaning,
                    group[-1].last_modified_ms,
                    stats,
                    check_done,
                )
                check_done()
            except BaseException:
                remove_segment_files(partition_log.directory, base_offset, CLEANED_SUFFIX)
                raise
            cleaned = Segment(
                partition_log.directory, base_offset, config, now, file_suffix=CLEANED_SUFFIX
            )
            partition_log.replace_segments(cleaned, group)
        self.last_stats = stats
        self._log_round(ltc, end_offset, stats, size_before)
        return end_offset

    @staticmethod
    def _end_of(partition_log: PartitionLog, segment: Segment) -> int:
        """The offset ``segment``'s data ends before: the next segment's base (the active
        segment is never cleaned, so there is one), else its next offset."""
        segments = partition_log.segments
        i = segments.index(segment)
        return segments[i + 1].base_offset if i + 1 < len(segments) else segment.next_offset()

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` in the worker thread. If the awaiting task is cancelled (shutdown), stop
        the worker and wait for it, so nothing touches the logs once the broker closes them."""
        job = self._executor.submit(fn, *args)
        self._job = job
        try:
            return await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            self._stop.set()
            concurrent.futures.wait([job])
            raise
        finally:
            self._job = None

    def delete_old_segments(self) -> None:
        """Retention for compacted logs (compact,delete; or DeleteRecords-style start moves)."""
        for partition_log in self.manager.compacted_logs_idle():
            try:
                partition_log.delete_old_segments()
            except OSError as exc:
                self._on_disk_error(
                    partition_log, f"deleting old segments of {partition_log.name}", exc
                )
        self.manager.forget_uncleanable()

    def is_cleaning(self, tp: TopicPartition) -> bool:
        return tp in self.manager.in_progress

    def abort(self, tp: TopicPartition) -> None:
        """Stop any round on ``tp``; returns once the worker no longer uses its segments."""
        current = self._round
        if current is None or current.tp != tp:
            return
        current.abort.set()
        job = self._job
        if job is not None:
            concurrent.futures.wait([job])

    def shutdown(self) -> None:
        """Stop the worker (a round in progress aborts at its next batch) and wait for it."""
        self._stop.set()
        self._executor.shutdown(wait=True)

    @staticmethod
    def _log_round(ltc: LogToClean, end_offset: int, stats: CleanerStats, size_before: int) -> None:
        log.info(
            "cleaned %s, dirty section [%d, %d): %.1f MB of log processed in %.2f s "
            "(%.1f MB/s), %.1f MB indexed in %.2f s; %d of %d records kept, %.1f MB -> %.1f MB",
            ltc.log.name,
            ltc.first_dirty_offset,
            end_offset,
            stats.filtered.bytes_read / MB,
            stats.elapsed_seconds,
            stats.processed_mb_per_second,
            stats.map_bytes_read / MB,
            stats.map_seconds,
            stats.filtered.messages_retained,
            stats.filtered.messages_read,
            size_before / MB,
            ltc.log.size / MB,
        )
