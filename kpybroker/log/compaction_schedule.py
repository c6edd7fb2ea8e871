"""Which log to compact next, and how far compaction got (Kafka's ``LogCleanerManager``).

Progress is the first dirty offset of each compacted partition, kept in each
log directory's ``cleaner-offset-checkpoint`` (Kafka's offset checkpoint
format). The part of a log below it is clean: every key there appears once.

A log is worth cleaning when its dirty bytes are more than
``min.cleanable.dirty.ratio`` of its cleanable size, or when a record has
waited longer than ``max.compaction.lag.ms``; the filthiest goes first. What
may be cleaned stops at the active segment, the high watermark, and the first
segment with a record younger than ``min.compaction.lag.ms``.

All of this runs on the event loop, as do the appends and retention that
change the logs, so no lock is needed: a partition being cleaned is marked in
progress, and retention leaves such partitions alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kpybroker.log.checkpoint import (
    CorruptCheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kpybroker.log.names import CLEANER_OFFSET_CHECKPOINT
from kpybroker.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: ``(topic-partition, its log, its log directory)`` for every compacted log of the broker
#: (``cleanup.policy`` with ``compact``): the cleaner's checkpoints, rounds and retention
#: concern only these, and at 100,000 partitions listing every log for each of them held
#: the event loop for tens of milliseconds every ``log.cleaner.backoff.ms``.
LogsView = Callable[[], Iterable[tuple[TopicPartition, PartitionLog, Path]]]


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log and the range a round would clean (Kafka's ``LogToClean``)."""

    tp: TopicPartition
    log: PartitionLog
    log_dir: Path
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_offsets(
    partition_log: PartitionLog, checkpointed: int | None, now_ms: int
) -> tuple[int, int, bool]:
    """``(first dirty offset, first uncleanable offset, checkpoint needs resetting)``.

    A checkpoint below the log start (retention or DeleteRecords moved it) or
    past the log end (the log was truncated) is reset to the log start, which
    cleans the whole log once. Cleaning stops at the last stable offset (no
    open or unreplicated transaction is cleaned: whether its data stays is not
    known yet), at the active segment, and at the first dirty segment holding a record younger than
    ``min.compaction.lag.ms``.
    """
    start = partition_log.log_start_offset
    first_dirty = start if checkpointed is None else checkpointed
    reset = False
    if first_dirty < start or first_dirty > partition_log.log_end_offset:
        if first_dirty > partition_log.log_end_offset or not partition_log.config.deletes:
            log.warning(
                "%s: resetting the first dirty offset %d to the log start offset %d",
                partition_log.name,
                first_dirty,
                start,
            )
        first_dirty, reset = start, True
    bounds = [partition_log.last_stable_offset, partition_log.active_segment.base_offset]
    min_lag = max(partition_log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in partition_log.non_active_segments_from(first_dirty):
            if segment.largest_timestamp > now_ms - min_lag:
                bounds.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(bounds)), reset


def max_compaction_delay(partition_log: PartitionLog, first_dirty: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is (0: not overdue)."""
    timestamps = [
        s.first_batch_timestamp
        for s in partition_log.non_active_segments_from(first_dirty)
        if s.first_batch_timestamp > 0
    ]
    earliest = min(timestamps, default=None)
    clean_until = now_ms - max(partition_log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


def log_to_clean(
    tp: TopicPartition,
    partition_log: PartitionLog,
    log_dir: Path,
    first_dirty: int,
    uncleanable: int,
    need_compaction_now: bool,
) -> LogToClean:
    """Measure the clean and cleanable parts, as Kafka does (segments overlapping each range).

    The first uncleanable offset moves down to a segment boundary: cleaning
    covers whole segments.
    """
    following = partition_log.non_active_segments_from(uncleanable)
    first_uncleanable = (following[0] if following else partition_log.active_segment).base_offset
    clean = partition_log.segments_between(-1, first_dirty)
    cleanable = partition_log.segments_between(
        min(first_dirty, first_uncleanable), first_uncleanable
    )
    return LogToClean(
        tp,
        partition_log,
        log_dir,
        first_dirty,
        first_uncleanable,
        sum(s.size for s in clean),
        sum(s.size for s in cleanable),
        need_compaction_now,
    )


class CleanerManager:
    """The cleaner's bookkeeping: checkpoints, the partition in progress, uncleanable ones."""

    def __init__(self, log_dirs: Iterable[Path], logs: LogsView) -> None:
        self._logs = logs
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        for log_dir in log_dirs:
            try:
                self._checkpoints[log_dir] = read_offset_checkpoint(
                    log_dir / CLEANER_OFFSET_CHECKPOINT
                )
            except CorruptCheckpointError as exc:
                log.warning("ignoring %s", exc)
                self._checkpoints[log_dir] = {}
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()

    def checkpointed(self, log_dir: Path, tp: TopicPartition) -> int | None:
        return self._checkpoints[log_dir].get(tp)

    def grab_filthiest(self, now_ms: int) -> LogToClean | None:
        """The compacted log with the largest dirty ratio that is due, now marked in progress.

        Due means: dirty ratio above ``min.cleanable.dirty.ratio``, or a record
        past ``max.compaction.lag.ms`` with something cleanable.
        """
        candidates = []
        for tp, partition_log, log_dir in self._logs():
            if not partition_log.config.compact or tp in self.in_progress or tp in self.uncleanable:
                continue
            first_dirty, uncleanable, reset = cleanable_offsets(
                partition_log, self.checkpointed(log_dir, tp), now_ms
            )
            if reset:
                self.update_checkpoint(log_dir, tp, first_dirty)
            overdue = max_compaction_delay(partition_log, first_dirty, now_ms) > 0
            ltc = log_to_clean(tp, partition_log, log_dir, first_dirty, uncleanable, overdue)
            if ltc.total_bytes > 0 and (
                (ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                or ltc.cleanable_ratio > partition_log.config.min_cleanable_dirty_ratio
            ):
                candidates.append(ltc)
        if not candidates:
            return None
        filthiest = max(candidates, key=lambda ltc: ltc.cleanable_ratio)
        self.in_progress.add(filthiest.tp)
        return filthiest

    def compacted_logs_idle(self) -> list[PartitionLog]:
        """Compacted logs not being cleaned: the cleaner applies their retention (Kafka's
        ``deletableLogs``), since the retention task leaves compacted logs to it."""
        return [
            partition_log
            for tp, partition_log, _ in self._logs()
            if partition_log.config.compact
            and tp not in self.in_progress
            and tp not in self.uncleanable
        ]

    def done_cleaning(self, ltc: LogToClean, end_offset: int | None) -> None:
        """The round is over: record ``end_offset`` as the new first dirty offset (None: the
        round was aborted, its partition may be gone)."""
        self.in_progress.discard(ltc.tp)
        if end_offset is not None:
            self.update_checkpoint(ltc.log_dir, ltc.tp, end_offset)

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (or with None, remove) a partition's entry and rewrite the directory's file,
        keeping only partitions that still exist."""
        entries = self._checkpoints[log_dir]
        if offset is None:
            entries.pop(tp, None)
        else:
            entries[tp] = offset
        self.prune_checkpoint(log_dir)

    def prune_checkpoint(self, log_dir: Path) -> None:
        """Rewrite the directory's file keeping only the compacted partitions that still
        exist: once for all the partitions that went away together (a deleted topic). A
        log whose policy no longer compacts loses its entry, and is cleaned from its start
        if it compacts again."""
        entries = self._checkpoints[log_dir]
        live = {tp for tp, _, d in self._logs() if d == log_dir}
        for gone in set(entries) - live:
            del entries[gone]
        write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)

    def forget_uncleanable(self) -> None:
        """Drop deleted (or no longer compacted) partitions from the uncleanable set
        (Kafka's ``maintainUncleanablePartitions``)."""
        self.uncleanable &= {tp for tp, _, _ in self._logs()}
