"""One partition's log: a ``<topic>-<partition>`` directory of segments (Kafka's ``UnifiedLog``
and ``LocalLog``, without tiered storage).

Appends run the log's share of ``produce_validator``'s checks, check
idempotent and transactional producer state, stamp the offset and leader epoch into the batch header
(neither is under the CRC) and write the bytes with one ``os.write``; no record is
decoded but the keys of a compacted topic's batches. Reads return file ranges of whole batches
for ``sendfile``. Nothing here fsyncs on the append path unless ``flush.messages``
or ``flush.ms`` asks for it: durability otherwise comes from the periodic flush
of rolled segments (``maintain``) and from replication, as in Kafka.

Transactions: the producer state tracks open ones, every append path (leader,
follower, replay on load) indexes aborted ones in their marker's segment
(``.txnindex``), and ``last_stable_offset`` bounds read_committed consumers,
who get the aborted transactions of what they read (``aborted_reads``).

Everything is synchronous and runs on the broker's event loop, and writes to the
page cache are fast. The one exception is the log cleaner's worker thread,
which reads sealed segments of a partition being compacted and writes new
files; every change to the segment list, the swap of compacted segments
included, still happens here on the loop (see ``log_cleaner``).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kpybroker.log.aborted_reads import aborted_in_read, collect_aborted
from kpybroker.log.checkpoint import fsync_dir
from kpybroker.log.control_batches import EndTxnMarker, build_marker_batch, read_marker
from kpybroker.log.leader_epoch import LeaderEpochCache
from kpybroker.log.log_config import LONG_MAX, LogConfig
from kpybroker.log.metadata_files import read_partition_metadata, write_partition_metadata
from kpybroker.log.names import CLEANED_SUFFIX, SWAP_SUFFIX, delete_dir_name, stray_dir_name
from kpybroker.log.open_files import CachedFile, OpenFile
from kpybroker.log.produce_validator import (
    CheckedBatch,
    broker_batch,
    validate_append,
    validate_timestamps,
)
from kpybroker.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
    VerificationGuard,
)
from kpybroker.log.recovery import load_log, new_log, rebuild_producer_state
from kpybroker.log.retention import (
    SegmentPredicate,
    deletable_segments,
    log_start_breached,
    retention_ms_breached,
    retention_size_breached,
)
from kpybroker.log.segment import Segment, TimestampOffset, remove_segment_files
from kpybroker.log.str_paths import StrPath
from kpybroker.log.transaction_index import AbortedTxn
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import (
    BatchHeader,
    iter_batches,
    set_log_append_time,
    stamp_batch,
    validate_batch,
)

log = logging.getLogger(__name__)

#: DeleteRecords: offset -1 means the high watermark (``DeleteRecordsRequest.HIGH_WATERMARK``).
DELETE_TO_HIGH_WATERMARK = -1


def _no_truncation_hook() -> None:
    """``PartitionLog.before_truncation`` until the log manager sets it: one function for
    every log, not a lambda each."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class FileSlice(NamedTuple):
    """A byte range of a segment file, sent with ``os.sendfile(sock, fd, position, length)``.

    The slice holds the file's descriptor open (``open_files``) until the response
    is written, however soon its segment is evicted from the cache, deleted by retention
    or truncated.
    """

    file: OpenFile
    position: int
    length: int

    @property
    def fd(self) -> int:
        return self.file.fd

    @property
    def source(self) -> CachedFile:
        return self.file.source

    def read(self) -> bytes:
        return self.file.pread(self.length, self.position)


class CopiedSlice(NamedTuple):
    """A byte range of a segment file read into memory: what a read returns when reads in
    flight already hold as many descriptors as the log may keep open (``open_files``)."""

    source: CachedFile
    position: int
    length: int
    data: bytes

    def read(self) -> bytes:
        return self.data


def slice_of(segment: Segment, position: int, length: int) -> FileSlice | CopiedSlice:
    """``length`` bytes of ``segment`` from ``position``, for sendfile while descriptors allow."""
    file = segment.open_log()
    if segment.log_file.has_room:
        return FileSlice(file, position, length)
    return CopiedSlice(segment.log_file, position, length, file.pread(length, position))


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches from a fetch offset; ``len()`` is their size in bytes.

    ``parts`` holds at most one slice: like Kafka's ``LocalLog.read``, a read
    stops at the end of the segment it started in.
    """

    parts: tuple[FileSlice | CopiedSlice, ...]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int

    def __len__(self) -> int:
        return sum(part.length for part in self.parts)

    def read_bytes(self) -> bytes:
        return b"".join(part.read() for part in self.parts)


class AppendResult(NamedTuple):
    """What Produce answers: offsets of the batch (the original ones for a retried duplicate)."""

    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool


class PartitionLog:
    """The segments, indexes, producer state and leader epochs of one partition."""

    # One per partition, tens of thousands on a broker: slots, no __dict__ each.
    __slots__ = (
        "_dir_dirty",
        "_directory",
        "_last_flush_ms",
        "_time_ms",
        "_to_release",
        "before_truncation",
        "config",
        "deleted",
        "epoch_cache",
        "high_watermark",
        "log_end_offset",
        "log_start_offset",
        "name",
        "producer_state",
        "recovery_point",
        "segments",
        "topic_id",
    )

    directory = StrPath()

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        topic_id: bytes | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        time_ms: Callable[[], int] = wall_clock_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        """Open ``directory`` (created if missing), recovering it unless ``clean_shutdown``.

        The offsets come from the log directory's checkpoint files; with the
        defaults a directory is fully recovered, which is always safe.
        """
        # A directory made just now holds nothing to read, recover or rebuild: its empty
        # segment needs no scan and no fsync (the metadata files below fsync the directory).
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.name = directory.name
        self.config = config
        self._time_ms = time_ms
        self.topic_id: bytes | None = None if created else read_partition_metadata(directory)
        self.assign_topic_id(topic_id)
        self.epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        now = time_ms()
        if created:
            loaded = new_log(
                directory,
                config,
                log_start_offset=log_start_offset,
                recovery_point=recovery_point,
                now_ms=now,
            )
        else:
            loaded = load_log(
                directory,
                config,
                self.epoch_cache,
                log_start_offset=log_start_offset,
                recovery_point=recovery_point,
                clean_shutdown=clean_shutdown,
                now_ms=now,
            )
            rebuild_producer_state(
                self.producer_state,
                loaded.segments,
                loaded.log_start_offset,
                loaded.log_end_offset,
                now,
                loaded.reindex_from,
            )
        self.segments: list[Segment] = loaded.segments
        self.log_start_offset = loaded.log_start_offset
        self.log_end_offset = loaded.log_end_offset
        self.recovery_point = loaded.recovery_point
        self.update_high_watermark(high_watermark)
        self._last_flush_ms = now
        self._dir_dirty = False
        self._to_release: list[tuple[int, list[Segment]]] = []
        self.deleted = False
        #: Called before a truncation rewrites segments in place; the log manager makes it
        #: abort a compaction round reading them (as Kafka's ``LogManager.truncateTo`` does).
        self.before_truncation: Callable[[], None] = _no_truncation_hook

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.log_end_offset})"
        )

    def assign_topic_id(self, topic_id: bytes | None) -> None:
        """Record the topic id in ``partition.metadata``; a different recorded id is
        INCONSISTENT_TOPIC_ID (a topic deleted and re-created while this broker was away)."""
        if topic_id is None or topic_id == self.topic_id:
            return
        if self.topic_id is not None:
            raise KafkaError(
                ErrorCode.INCONSISTENT_TOPIC_ID,
                f"{self.name} is recorded with another topic id in partition.metadata",
            )
        write_partition_metadata(self.directory, topic_id)
        self.topic_id = topic_id

    # -- state ------------------------------------------------------------------

    @property
    def active_segment(self) -> Segment:
        return self.segments[-1]

    @property
    def leader_epoch(self) -> int:
        """The latest epoch in the leader epoch cache, -1 before any."""
        return self.epoch_cache.latest_epoch

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided and replicated: the first unstable offset
        (at least the log start), or the high watermark when that is lower or there is
        none (Kafka's ``lastStableOffset``)."""
        first = self.producer_state.txns.first_unstable_offset()
        hwm = self.high_watermark
        if first is None:
            return hwm
        return min(max(first, self.log_start_offset), hwm)

    # -- appending --------------------------------------------------------------

    def append(
        self,
        batch: CheckedBatch | bytearray | memoryview,
        leader_epoch: int,
        verification: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append one batch as leader: a produced one (``CheckedBatch``, which the Produce
        path's checks of ``produce_validator`` made, with its header) or one the broker
        built (bytes: the coordinator's, tools', tests').

        The rest of ``produce_validator``'s checks run here, in its order:
        MESSAGE_TOO_LARGE for bytes not checked yet, RECORD_LIST_TOO_LARGE, keys on
        compacted topics, then idempotent-producer state, then timestamps
        (INVALID_TIMESTAMP); all raise ``KafkaError``. Stamps the base offset and
        leader epoch into the batch in place, and for
        ``message.timestamp.type=LogAppendTime`` the broker's clock (which
        recomputes the CRC). ``verification`` is the guard of a transactional
        write the coordinator verified (``ProducerStateManager.check``). A retried
        batch of an idempotent producer is not
        written again: the result carries its original offsets and
        ``duplicate=True``. An ``OSError`` from the disk leaves the log as it was.
        """
        checked = batch if type(batch) is CheckedBatch else broker_batch(batch)
        data, header = checked.data, checked.header
        config = self.config
        validate_append(checked, config, self.name, self.log_start_offset)
        if header.is_control and header.producer_id >= 0:
            marker = read_marker(data)
            if marker is not None:
                self.producer_state.check_marker(
                    header.producer_id, header.producer_epoch, marker.coordinator_epoch
                )
        elif header.producer_id >= 0:
            duplicate = self.producer_state.check(header, verification)
            if duplicate is not None:
                return AppendResult(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.timestamp if config.log_append_time else -1,
                    self.log_start_offset,
                    True,
                )
        now = self._time_ms()
        if config.log_append_time:
            set_log_append_time(data, 0, now)
            max_timestamp = log_append_time = now
        else:
            validate_timestamps(header, config, now, self.log_start_offset)
            max_timestamp, log_append_time = header.max_timestamp, -1
        base_offset = self.log_end_offset
        stamp_batch(data, 0, base_offset, leader_epoch)
        header = header._replace(
            base_offset=base_offset,
            partition_leader_epoch=leader_epoch,
            max_timestamp=max_timestamp,
        )
        self._write(data, header, now)
        self._maybe_flush(now)
        return AppendResult(
            base_offset, header.last_offset, log_append_time, self.log_start_offset, False
        )

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int,
    ) -> AppendResult:
        """Append the marker ending ``producer_id``'s transaction, as leader (WriteTxnMarkers).

        INVALID_PRODUCER_EPOCH for an epoch below the producer's,
        TRANSACTION_COORDINATOR_FENCED for a coordinator epoch below its last
        marker's. A producer with no open transaction here still gets its marker
        (Kafka writes it; it changes neither the LSO nor the index).
        """
        marker = EndTxnMarker(committed, coordinator_epoch)
        batch = build_marker_batch(producer_id, producer_epoch, marker, self._time_ms())
        return self.append(batch, leader_epoch)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> int:
        """Append a leader's batches byte for byte, with the offsets and epochs it gave them.

        ``data`` is the records field of a fetch response: whole batches, maybe
        followed by a partial one, which is left for the next fetch. Each batch's
        CRC is checked (a fetch crosses the network); producer sequences are not,
        since the leader already accepted them, but the producer state is kept so
        that this replica can deduplicate retries once it leads, and transactions are
        tracked and indexed as on the leader. Batches wholly
        below the log end (a resent range) are skipped; a batch may start past the
        log end (compaction on the leader removed whole batches). Returns the bytes
        appended.

        Raises ``KafkaError`` (CORRUPT_MESSAGE) for a corrupt batch or one that
        straddles the log end, after appending the batches before it.
        """
        appended = 0
        now = self._time_ms()
        view = memoryview(data)
        for pos, header in iter_batches(view):
            if header.last_offset < self.log_end_offset:
                continue
            if header.base_offset < self.log_end_offset:
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"{self.name}: leader batch {header.base_offset}-{header.last_offset} "
                    f"straddles the log end offset {self.log_end_offset}",
                )
            validate_batch(view, pos, from_client=False)
            self._write(view[pos : pos + header.size], header, now)
            appended += header.size
        if appended:
            self._maybe_flush(now)
        return appended

    def _write(self, batch: bytes | bytearray | memoryview, header: BatchHeader, now: int) -> None:
        """Write one batch whose header (``header``) already holds its final offsets and epoch."""
        segment = self._segment_for(header.size, header.max_timestamp, header.last_offset, now)
        # As Kafka: the epoch's start is recorded before the batch is written.
        self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        segment.append(batch, header.last_offset, header.max_timestamp)
        self.log_end_offset = header.last_offset + 1
        if header.producer_id >= 0:
            marker = read_marker(batch) if header.is_control else None
            self.producer_state.update(header, marker, segment.txn_index)

    def _segment_for(self, size: int, max_timestamp: int, last_offset: int, now: int) -> Segment:
        """The active segment, rolled first when the batch would not belong in it."""
        active = self.active_segment
        if active.size and active.should_roll(self.config, size, max_timestamp, last_offset, now):
            return self.roll()
        return active

    def roll(self, base_offset: int | None = None) -> Segment:
        """Start a new segment at the log end offset, or at ``base_offset`` past it (a copy
        keeping another log's segment names), unless the active one is empty.

        The old segment gets its final time-index entry and a producer snapshot
        is written at the log end; fsyncing the old segment is left to
        ``maintain``, so a roll costs no disk wait on the append path.
        """
        old = self.active_segment
        if old.size == 0:
            return old
        now = self._time_ms()
        base = max(self.log_end_offset, base_offset or 0)
        old.on_become_inactive()
        self.producer_state.take_snapshot(self.log_end_offset, sync=False)
        try:
            segment = Segment(self.directory, base, self.config, now, create=True)
        except OSError:
            # Half-created files (a full disk) would make every later roll fail.
            remove_segment_files(self.directory, base, "")
            raise
        self.segments.append(segment)
        self._dir_dirty = True
        old.offset_index.unload()
        old.time_index.unload()
        log.info("%s: rolled to a new segment at offset %d", self.name, segment.base_offset)
        return segment

    # -- reading ----------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, below ``max_offset``.

        At most ``max_bytes``, except that with ``min_one_message`` the first
        batch is returned whatever its size (KIP-74), so a consumer never stalls
        on a large batch. Batches that reach ``max_offset`` or beyond (the high
        watermark, for consumers) are left out. An offset below the log start
        or past the log end is OFFSET_OUT_OF_RANGE; one between ``max_offset``
        and the log end reads nothing.
        """
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} is outside [{self.log_start_offset}, "
                f"{self.log_end_offset}] of {self.name}",
            )
        parts: tuple[FileSlice | CopiedSlice, ...] = ()
        i = self._segment_index(fetch_offset)
        while fetch_offset < max_offset and i < len(self.segments):
            segment = self.segments[i]
            found = segment.find_batch(fetch_offset)
            if found is None:
                i += 1  # nothing at or after the offset here (a gap): the next segment starts later
                continue
            start, header = found
            limit = self._position_limit(i, max_offset)
            if start >= limit:
                break  # the batch holding fetch_offset reaches max_offset
            end = segment.read_end(start, limit, max(max_bytes, 0))
            if end == start and min_one_message and start + header.size <= limit:
                end = start + header.size
            if end > start:
                parts = (slice_of(segment, start, end - start),)
            break
        return ReadResult(parts, self.high_watermark, self.log_start_offset, self.log_end_offset)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (the last base at or below it)."""
        bases = [segment.base_offset for segment in self.segments]
        return max(0, bisect_right(bases, offset) - 1)

    def segments_between(self, start: int, end: int) -> list[Segment]:
        """Segments holding offsets in ``[start, end)``: from the one at or below ``start`` to
        the last starting below ``end`` (Kafka's ``logSegments(from, to)``)."""
        if start >= end:
            return []
        bases = [segment.base_offset for segment in self.segments]
        first = max(0, bisect_right(bases, start) - 1)
        return self.segments[first : bisect_left(bases, end)]

    def non_active_segments_from(self, start: int) -> list[Segment]:
        """Segments from the one holding ``start`` up to, not including, the active one."""
        active_base = self.active_segment.base_offset
        return [] if start > active_base else self.segments_between(start, active_base)

    def _position_limit(self, i: int, max_offset: int) -> int:
        """Where in segment ``i`` the batches reaching ``max_offset`` begin (else its size)."""
        segment = self.segments[i]
        next_base = (
            self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset
        )
        if max_offset >= next_base:
            return segment.size
        found = segment.find_batch(max_offset)
        return found[0] if found is not None else segment.size

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record whose timestamp is at least ``timestamp`` (ListOffsets), or None.

        The first segment whose max timestamp reaches the target holds it; the
        answer is the record's own timestamp and offset (the one batch that holds
        it is decoded, as Kafka does). Callers serving consumers drop answers at
        or above the high watermark.
        """
        for segment in self.segments:
            if segment.max_timestamp_so_far.timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> TimestampOffset | None:
        """ListOffsets -3: the first record carrying the log's largest timestamp, or None."""
        segment = max(self.segments, key=lambda s: s.max_timestamp_so_far.timestamp)
        timestamp = segment.max_timestamp_so_far.timestamp
        if timestamp < 0:
            return None
        return segment.find_offset_by_timestamp(timestamp, self.log_start_offset)

    # -- leader epochs and the high watermark ------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end offset)``, ``(-1, -1)`` when unknown."""
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the batch at ``offset`` was written in (ListOffsets v4+), -1 if unknown."""
        return self.epoch_cache.epoch_for_offset(offset)

    def maybe_assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """On becoming leader for ``epoch``: the epoch starts at the current log end (Kafka's
        ``Partition.makeLeader``), so OffsetForLeaderEpoch knows it before the first append."""
        self.epoch_cache.assign(epoch, start_offset)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, kept within [log start, log end]; returns the value set.

        Completed transactions whose marker it passes stop holding the LSO back."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.txns.on_high_watermark(self.high_watermark)
        return self.high_watermark

    # -- read_committed ------------------------------------------------------------

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions with a marker at or after ``start_offset`` and a first offset
        below ``upper_bound_offset``, across segments (``collectAbortedTransactions``)."""
        first = self._segment_index(start_offset)
        return collect_aborted(self.segments, first, start_offset, upper_bound_offset)

    def aborted_transactions(self, fetch_offset: int, result: ReadResult) -> list[AbortedTxn]:
        """The aborted transactions overlapping the batches of ``result`` (a read from
        ``fetch_offset`` just now), for a read_committed fetch; none for an empty read."""
        if not result.parts:
            return []
        part = result.parts[0]
        end = part.position + part.length
        first = self._segment_index(fetch_offset)
        return aborted_in_read(
            self.segments, first, self.log_end_offset, fetch_offset, part.source, end
        )

    # -- removing data ----------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader (Kafka's ``Partition.deleteRecordsOnLeader``).

        -1 means the high watermark. Returns the new log start offset (the
        partition's low watermark). POLICY_VIOLATION unless cleanup.policy
        contains ``delete``; a negative offset or one past the high watermark is
        OFFSET_OUT_OF_RANGE.
        """
        if not self.config.deletes:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {self.name} can not be deleted due to the configured policy",
            )
        target = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"The offset {target} for partition {self.name} is not valid",
            )
        self.increment_log_start_offset(target)
        return self.log_start_offset

    def increment_log_start_offset(self, offset: int) -> None:
        """Records below ``offset`` become unreadable (whole segments below it go at the next
        ``delete_old_segments``). Past the high watermark is OFFSET_OUT_OF_RANGE."""
        if offset > self.high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {offset} of {self.name} since it is "
                f"larger than the high watermark {self.high_watermark}",
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)
            self.producer_state.txns.on_high_watermark(offset)
            log.info("%s: incremented the log start offset to %d", self.name, offset)

    def delete_old_segments(self) -> int:
        """Apply retention (Kafka's ``deleteOldSegments``); returns the number of segments deleted.

        Segments wholly below the log start offset always go; with
        ``cleanup.policy=delete`` so do the oldest ones beyond ``retention.bytes``
        and those older than ``retention.ms`` (see ``retention``).
        """
        deleted = self._delete_matching(
            log_start_breached(self.log_start_offset), "below the log start offset"
        )
        config = self.config
        if config.deletes:
            deleted += self._delete_matching(
                retention_size_breached(config, self.size), "retention.bytes breached"
            )
            deleted += self._delete_matching(
                retention_ms_breached(config, self._time_ms()), "retention.ms breached"
            )
        return deleted

    def _delete_matching(self, predicate: SegmentPredicate | None, reason: str) -> int:
        if predicate is None:
            return 0
        doomed = deletable_segments(
            self.segments, predicate, self.high_watermark, self.log_end_offset
        )
        if not doomed:
            return 0
        if len(doomed) == len(self.segments):
            self.roll()
        del self.segments[: len(doomed)]
        self._retire(doomed)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.delete_snapshots(
            o for o in self.producer_state.snapshot_offsets() if o >= self.log_start_offset
        )
        log.info(
            "%s: deleted %d segment(s) (%s), log start offset now %d",
            self.name,
            len(doomed),
            reason,
            self.log_start_offset,
        )
        return len(doomed)

    def replace_segments(self, cleaned: Segment, old: Sequence[Segment]) -> None:
        """Swap a compacted segment (files ``<base>.*.cleaned``, fsynced) in for ``old``.

        The crash-safe order of Kafka's ``LocalLog.replaceSegments``: the cleaned
        files become ``.swap`` (from then on recovery completes the swap), the old
        segments' files are deleted, the ``.swap`` files take their final names,
        and the directory is fsynced. Old descriptors stay open for
        ``file.delete.delay.ms`` for reads in flight, as after retention.
        """
        first = self.segments.index(old[0])
        if self.segments[first : first + len(old)] != list(old):
            raise ValueError(f"{self.name}: segments to replace are not contiguous in the log")
        cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        self.segments[first : first + len(old)] = [cleaned]
        self._retire(old)
        cleaned.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.directory)
        self._dir_dirty = False
        gone = {segment.base_offset for segment in old[1:]}
        self.producer_state.delete_snapshots(
            o for o in self.producer_state.snapshot_offsets() if o not in gone
        )

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or after ``offset`` (a follower diverging from its leader).

        A batch holding ``offset`` goes whole, so the new log end may be below
        ``offset``. Returns whether anything was removed. Epochs starting at the
        log end go even when no batch does (Kafka's ``UnifiedLog.truncateTo``):
        a broker that became leader and was replaced before it appended anything
        holds such an entry, which its new leader never had.
        """
        if offset >= self.log_end_offset:
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self.before_truncation()
        now = self._time_ms()
        keep = self._segment_index(offset) + 1
        doomed = self.segments[keep:]
        del self.segments[keep:]
        self._retire(doomed)
        self.active_segment.truncate_to(offset, now)
        self.log_end_offset = self.active_segment.next_offset()
        self._after_truncation(now)
        log.info("%s: truncated to offset %d", self.name, self.log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and continue at ``offset`` (a follower far behind its leader)."""
        self.before_truncation()
        now = self._time_ms()
        self._retire(self.segments)
        self.segments = [Segment(self.directory, offset, self.config, now, create=True)]
        self.log_start_offset = self.log_end_offset = offset
        self.epoch_cache.clear()
        self.producer_state.truncate_fully()
        self._after_truncation(now)

    def _after_truncation(self, now: int) -> None:
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        rebuild_producer_state(
            self.producer_state, self.segments, self.log_start_offset, self.log_end_offset, now
        )
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.update_high_watermark(min(self.high_watermark, self.log_end_offset))
        self._dir_dirty = True

    def _retire(self, segments: Iterable[Segment]) -> None:
        """Delete segment files now; close their descriptors after ``file.delete.delay.ms``."""
        retired = list(segments)
        for segment in retired:
            segment.delete_files()
        self._to_release.append((self._time_ms() + self.config.file_delete_delay_ms, retired))
        self._dir_dirty = True

    def release_retired(self, now_ms: int | None = None) -> bool:
        """Close descriptors of deleted segments whose delay is over; True while some remain."""
        now = self._time_ms() if now_ms is None else now_ms
        due = [segments for deadline, segments in self._to_release if deadline <= now]
        self._to_release = [(d, s) for d, s in self._to_release if d > now]
        for segments in due:
            for segment in segments:
                segment.release()
        return bool(self._to_release)

    # -- durability ---------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``up_to``) and move the
        recovery point to ``up_to`` (default: the log end)."""
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target <= self.recovery_point:
            return
        first = self._segment_index(self.recovery_point)
        for segment in self.segments[first : self._segment_index(max(target - 1, 0)) + 1]:
            segment.flush()
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False
        self.recovery_point = target
        self._last_flush_ms = self._time_ms()

    def _maybe_flush(self, now: int) -> None:
        """flush.messages / flush.ms (both off by default, as in Kafka)."""
        config = self.config
        if (
            self.log_end_offset - self.recovery_point >= config.flush_interval_messages
            or now - self._last_flush_ms >= config.flush_interval_ms
        ):
            self.flush()

    @property
    def maintenance_due(self) -> bool:
        """Whether ``maintain`` may have work: rolled segments not yet fsynced, a flush
        policy with data to flush, or descriptors awaiting release. Cheap, so that an
        idle broker with thousands of partitions does not visit each one every second."""
        if self._to_release:
            return True
        if self.recovery_point >= self.log_end_offset:
            return False
        config = self.config
        return (
            self.recovery_point < self.segments[-1].base_offset
            or config.flush_interval_messages < LONG_MAX
            or config.flush_interval_ms < LONG_MAX
        )

    def maintain(self, now_ms: int | None = None) -> None:
        """Periodic work: flush policy, fsync of rolled segments, closing retired descriptors."""
        now = self._time_ms() if now_ms is None else now_ms
        self._maybe_flush(now)
        self.flush(self.active_segment.base_offset)
        self.release_retired(now)

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        self.producer_state.remove_expired(self._time_ms() if now_ms is None else now_ms)

    # -- lifetime -------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown of this log: everything fsynced, producer snapshot at the log end."""
        active = self.active_segment
        active.on_become_inactive()
        self.flush()  # nothing to sync when every batch is below the recovery point
        active.flush_indexes()  # the final max timestamp on_become_inactive recorded
        self.producer_state.take_snapshot(self.log_end_offset, sync=True)
        self.release_descriptors()

    def mark_deleted(self) -> None:
        """The first step of removing the partition: rename the directory to ``…-delete``
        and retire the segments.

        The rename makes the removal atomic for a restart (a ``-delete`` directory is
        never loaded); descriptors are kept for ``file.delete.delay.ms`` as for deleted
        segments. The caller makes the rename durable (one ``fsync`` of the parent serves
        every log deleted together, as Kafka's ``asyncDelete`` of many partitions
        checkpoints once per directory) before :meth:`remove_files`."""
        target = self.directory.with_name(delete_dir_name(self.name))
        self.directory.rename(target)
        self.directory = target
        for segment in self.segments:
            segment.offset_index.unload()
            segment.time_index.unload()
        self._to_release.append((self._time_ms() + self.config.file_delete_delay_ms, self.segments))
        self.segments = []
        self.deleted = True

    def remove_files(self) -> None:
        """The last step of removing the partition: delete the renamed directory."""
        shutil.rmtree(self.directory)

    def set_aside(self) -> Path:
        """Close the log and rename its directory ``…-stray``, keeping every file: a log the
        cluster's metadata does not know, set aside for the operator as Kafka sets aside its
        stray logs. Returns the new directory, which no later start loads."""
        self.close()
        target = self.directory.with_name(stray_dir_name(self.name))
        self.directory.rename(target)
        fsync_dir(target.parent)
        self.directory = target
        self.segments = []
        self.deleted = True
        return target

    def continue_as(self, moved: PartitionLog) -> None:
        """Go on as ``moved``, this log's copy in another directory (a finished log-dir move,
        ``log_dir_moves``): its directory, segments, epochs and producer state replace ours,
        while every holder of this object keeps it. Our segments were renamed away with
        their directory; their descriptors stay open for ``file.delete.delay.ms``, for
        reads in flight, as after a deletion."""
        self._to_release.append((self._time_ms() + self.config.file_delete_delay_ms, self.segments))
        self.directory = moved.directory
        self.name = moved.name
        self.segments = moved.segments
        self.epoch_cache = moved.epoch_cache
        # Transactional writes verified with the coordinator but not yet appended go on.
        moved.producer_state.verifications.update(self.producer_state.verifications)
        self.producer_state = moved.producer_state
        self.log_start_offset = moved.log_start_offset
        self.log_end_offset = moved.log_end_offset
        self.recovery_point = moved.recovery_point
        self.high_watermark = moved.high_watermark
        self._dir_dirty = False

    def close_handles(self) -> None:
        """Close every file without flushing: the log's directory went offline after a
        disk error, so nothing more is written (Kafka's ``closeHandlers``); a close
        that fails too is of no consequence."""
        for segment in self.segments:
            for index in (segment.offset_index, segment.time_index):
                with contextlib.suppress(OSError):
                    index.close()
        with contextlib.suppress(OSError):
            self.release_descriptors()

    def release_descriptors(self) -> None:
        """Close every descriptor now, including those of deleted segments still in their delay."""
        for segment in self.segments:
            segment.release()
        for _, segments in self._to_release:
            for segment in segments:
                segment.release()
        self._to_release = []
