"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and, once a transaction
aborts in it, ``.txnindex`` (Kafka's ``LogSegment``).

The ``.log`` file holds v2 batches end to end, exactly as on the wire. It is
written through an ``O_APPEND`` descriptor with one ``os.write`` per batch and
read with ``os.pread``/``sendfile`` on the same descriptor, which ``open_files``
opens on use and closes once the segment has not been used for a while. Lookups
never decode records: they binary-search the sparse offset index and then walk
batch headers (61 bytes each, read in chunks) forward from the indexed position.
The one exception is the timestamp lookup, which, like Kafka's
``FileRecords.searchForTimestamp``, decodes the single batch that holds the answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import NamedTuple

from kpybroker.log.index import CorruptIndexError, OffsetIndex
from kpybroker.log.log_config import LONG_MAX, LogConfig
from kpybroker.log.names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from kpybroker.log.open_files import OPEN_FILES, OpenFile
from kpybroker.log.time_index import NO_TIMESTAMP, TimeIndex
from kpybroker.log.transaction_index import TransactionIndex
from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    CorruptRecordError,
    iter_records,
    parse_header,
    validate_batch,
)

log = logging.getLogger(__name__)

# Bytes read per pread while walking headers: an index entry is at most
# index.interval.bytes (4 KiB by default) plus one batch behind any target.
_HEADER_SCAN_CHUNK = 16 * 1024
# Bytes read per pread while validating whole batches during recovery.
_RECOVERY_CHUNK = 4 * 1024 * 1024


def walk_headers(
    pread: Callable[[int, int], bytes], start: int, end: int
) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch of a file from ``start`` (a boundary) to
    ``end``, reading headers in chunks with ``pread(size, position)``; a partial batch at the
    end is not yielded."""
    chunk = b""
    chunk_start = position = start
    while end - position >= BATCH_HEADER_SIZE:
        rel = position - chunk_start
        if rel + BATCH_HEADER_SIZE > len(chunk):
            chunk = pread(min(_HEADER_SCAN_CHUNK, end - position), position)
            chunk_start, rel = position, 0
        header = parse_header(chunk, rel)
        if position + header.size > end:
            return
        yield position, header
        position += header.size


def read_next_offset(path: Path, base_offset: int) -> int:
    """The offset after the last whole batch of a ``.log`` file (``base_offset`` when empty),
    read without opening it as a segment (no index files are touched)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        next_offset = base_offset
        for _, header in walk_headers(partial(os.pread, fd), 0, os.fstat(fd).st_size):
            next_offset = header.last_offset + 1
        return next_offset
    finally:
        os.close(fd)


def remove_segment_files(directory: Path, base_offset: int, file_suffix: str) -> None:
    """Unlink whatever files of segment ``base_offset`` carry ``file_suffix`` (``.cleaned``
    leftovers of an aborted compaction)."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        segment_file(directory, base_offset, suffix, file_suffix).unlink(missing_ok=True)


class TimestampOffset(NamedTuple):
    """A record's timestamp and offset, as ListOffsets returns them."""

    timestamp: int
    offset: int


class Segment:
    """A ``.log`` file, its two sparse indexes and its transaction index; only the active
    segment is appended to."""

    # One or more per partition: slots, no __dict__ each.
    __slots__ = (
        "_bytes_since_index_entry",
        "_first_batch_timestamp",
        "_max_timestamp",
        "base_offset",
        "created_ms",
        "index_interval_bytes",
        "indexes_missing",
        "log_file",
        "offset_index",
        "roll_jitter_ms",
        "size",
        "time_index",
        "txn_index",
    )

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        *,
        create: bool = False,
        in_new_dir: bool = False,
        file_suffix: str = "",
    ) -> None:
        """Open (or with ``create``, create) the segment at ``base_offset``.

        ``in_new_dir`` (with ``create``): the directory was made just now, so no index file
        of this segment can be there from before, and none is read back.

        ``file_suffix`` names a segment under construction or being swapped in by
        compaction (``.cleaned``, ``.swap``); see ``change_file_suffixes``.
        """
        self.base_offset = base_offset
        self.log_file = OPEN_FILES.file(
            segment_file(directory, base_offset, LOG_SUFFIX, file_suffix), os.O_RDWR | os.O_APPEND
        )
        index_path = segment_file(directory, base_offset, INDEX_SUFFIX, file_suffix)
        time_index_path = segment_file(directory, base_offset, TIME_INDEX_SUFFIX, file_suffix)
        self.indexes_missing = not create and not (index_path.exists() and time_index_path.exists())
        if create:
            self.log_file.open(create=True)
            self.size = 0
        else:
            self.size = self.log_path.stat().st_size
        rebuild = self.rebuild_indexes  # one bound method for both (each is a new object)
        self.offset_index = OffsetIndex(
            index_path, base_offset, config.max_offset_index_entries, rebuild, created=in_new_dir
        )
        self.time_index = TimeIndex(
            time_index_path, base_offset, config.max_time_index_entries, rebuild, created=in_new_dir
        )
        self.txn_index = TransactionIndex(
            segment_file(directory, base_offset, TXN_INDEX_SUFFIX, file_suffix), base_offset
        )
        self.index_interval_bytes = config.index_interval_bytes
        self.roll_jitter_ms = config.random_segment_jitter()
        self.created_ms = now_ms
        self._first_batch_timestamp: int | None = None
        self._max_timestamp: TimestampOffset | None = None
        self._bytes_since_index_entry = 0

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size={self.size})"

    @property
    def log_path(self) -> Path:
        return self.log_file.path

    def open_log(self) -> OpenFile:
        """The ``.log`` file's descriptor; held by whoever makes several calls on it."""
        return self.log_file.open()

    # -- appending ----------------------------------------------------------

    def append(
        self, batch: bytes | bytearray | memoryview, last_offset: int, max_timestamp: int
    ) -> None:
        """Write one batch (offsets already stamped) and index it if an index interval has passed.

        A failed write of the batch or of its index entries (disk full, I/O
        error) cuts the files back to where they were, so the segment never keeps
        a torn batch or an entry for a batch it does not have, and re-raises the
        ``OSError``.
        """
        position = self.size
        view = memoryview(batch)
        file = self.log_file.open()
        try:
            while view:
                view = view[file.write(view) :]
            self._index_batch(position, len(batch), last_offset, max_timestamp)
        except OSError:
            file.truncate(position)
            self.offset_index.truncate_to(last_offset)
            self.time_index.truncate_to(last_offset)
            raise
        if position == 0:
            self._first_batch_timestamp = max_timestamp
        self.size += len(batch)

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Kafka's sparse indexing rule, shared by append and rebuild so both give the same entries.

        An entry for this batch (its last offset, its start position) is added
        when more than ``index.interval.bytes`` were written since the last
        entry's batch started; the time index then gets the max timestamp so far.
        A full index takes no more entries (only a segment written with a larger
        ``segment.index.bytes``, or compacted, can get there: the active segment
        rolls first). The in-memory state changes only once the entries are written.
        """
        largest = self.max_timestamp_so_far
        if max_timestamp > largest.timestamp:
            largest = TimestampOffset(max_timestamp, last_offset)
        since_entry = self._bytes_since_index_entry
        if since_entry > self.index_interval_bytes:
            if not self.offset_index.is_full():
                self.offset_index.append(last_offset, position)
            if not self.time_index.is_full():
                self.time_index.maybe_append(*largest)
            since_entry = 0
        self._max_timestamp = largest
        self._bytes_since_index_entry = since_entry + size

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        """The largest batch max timestamp in the segment and the last offset of its batch."""
        if self._max_timestamp is None:
            self._max_timestamp = TimestampOffset(*self.time_index.last_entry)
        return self._max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """For retention.ms: the max timestamp, or the file's mtime when no batch carries one."""
        timestamp = self.max_timestamp_so_far.timestamp
        return timestamp if timestamp >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return self.log_path.stat().st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        """Give the ``.log`` file this mtime (a compacted segment keeps its source's)."""
        ns = ms * 1_000_000
        os.utime(self.log_path, ns=(ns, ns))

    @property
    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp (Kafka's ``rollingBasedTimestamp``), None when empty."""
        if self._first_batch_timestamp is None and self.size:
            self._first_batch_timestamp = self.read_header(0).max_timestamp
        return self._first_batch_timestamp

    @property
    def first_batch_timestamp(self) -> int:
        """For max.compaction.lag.ms: the first batch's timestamp, LONG_MAX when there is none."""
        timestamp = self.rolling_based_timestamp
        return timestamp if timestamp is not None and timestamp >= 0 else LONG_MAX

    def should_roll(
        self, config: LogConfig, batch_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """``LogSegment.shouldRoll``: full by size, old by time, index full, or offset overflow."""
        reached_roll_ms = (
            self.time_waited_for_roll(now_ms, max_timestamp)
            > config.max_segment_ms - self.roll_jitter_ms
        )
        return (
            self.size > config.segment_bytes - batch_size
            or (self.size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.offset_index.can_append_offset(last_offset)
        )

    def time_waited_for_roll(self, now_ms: int, batch_timestamp: int) -> int:
        """Age for segment.ms: by record time when the first batch has one, else by wall clock."""
        first = self.rolling_based_timestamp
        if first is not None and first >= 0:
            return batch_timestamp - first
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """On roll and close: record the final max timestamp, drop the index write handles."""
        self.time_index.maybe_append(*self.max_timestamp_so_far, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()

    # -- reading ------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        return self.log_file.open().pread(size, position)

    def read_header(self, position: int) -> BatchHeader:
        return parse_header(self.read(position, BATCH_HEADER_SIZE))

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each whole batch from ``start`` (a boundary) to ``end``."""
        # The bound method holds the descriptor open until the walk ends.
        return walk_headers(self.log_file.open().pread, start, self.size if end is None else end)

    def batches(
        self, start: int = 0, chunk_size: int = _RECOVERY_CHUNK
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Each batch from ``start`` to the end with its bytes, reading ``chunk_size`` at a time.

        The header is parsed (CorruptRecordError if it cannot be) but nothing else
        is checked: a batch that runs past the end of the file comes with the
        bytes that are there, for the caller to reject.

        A batch's bytes are a view of one buffer that every read refills, so they are
        valid until the iteration moves on: a new ``bytes`` of ``chunk_size`` per read
        (``os.pread``) spent three times longer faulting in fresh pages than reading.
        """
        file = self.log_file.open()
        buffer = memoryview(bytearray(chunk_size))
        chunk = buffer[:0]
        chunk_start = position = start
        while position < self.size:
            rel = position - chunk_start
            if rel + BATCH_HEADER_SIZE > len(chunk):
                chunk, chunk_start, rel = file.pread_into(buffer, position), position, 0
            header = parse_header(chunk, rel)
            if rel + header.size > len(chunk):
                if header.size > len(buffer):  # a batch larger than the chunk: its own buffer
                    buffer = memoryview(bytearray(min(header.size, self.size - position)))
                chunk, chunk_start, rel = file.pread_into(buffer, position), position, 0
            yield position, header, chunk[rel : rel + header.size]
            position += header.size

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is at or above ``offset``."""
        _, start = self.offset_index.lookup(offset)
        for position, header in self.headers(start):
            if header.last_offset >= offset:
                return position, header
        return None

    def next_offset(self) -> int:
        """The offset after the last batch (scans only from the last index entry)."""
        _, start = self.offset_index.lookup(self.offset_index.last_offset)
        next_offset = self.base_offset
        for _, header in self.headers(start):
            next_offset = header.last_offset + 1
        return next_offset

    def read_end(self, start: int, limit: int, max_bytes: int) -> int:
        """End of the whole batches from ``start`` that fit both ``limit`` and ``max_bytes``.

        When everything up to ``limit`` fits, no header is read. Otherwise the
        offset index gives a batch boundary near ``start + max_bytes`` and only
        the headers after it are walked.
        """
        if limit - start <= max_bytes:
            return limit
        target = start + max_bytes
        _, position = self.offset_index.lookup_position(target)
        end = max(position, start)
        for position, header in self.headers(end, limit):
            if position + header.size > target:
                break
            end = position + header.size
        return end

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampOffset | None:
        """The first record from ``starting_offset`` on whose timestamp is at least ``timestamp``.

        The time index narrows the search to one index interval; batches whose
        max timestamp is below the target are skipped by header, and only the
        batch that holds the answer is decoded, since a batch's records need not
        be in timestamp order.
        """
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, start = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for position, header in self.headers(start):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                found = self._first_record_from(position, header, timestamp, starting_offset)
                if found is not None:
                    return found
        return None

    def _first_record_from(
        self, position: int, header: BatchHeader, timestamp: int, starting_offset: int
    ) -> TimestampOffset | None:
        if header.timestamp_type == LOG_APPEND_TIME:
            # Every record carries the batch's maxTimestamp: no need to decode.
            return TimestampOffset(header.max_timestamp, max(header.base_offset, starting_offset))
        for record in iter_records(self.read(position, header.size)):
            if record.timestamp >= timestamp and record.offset >= starting_offset:
                return TimestampOffset(record.timestamp, record.offset)
        return None

    # -- recovery and truncation -------------------------------------------

    def indexes_look_valid(self) -> bool:
        """Cheap open-time check: whole entries, and a last entry that fits this segment."""
        try:
            last = self.offset_index.last_entry_on_disk()
            last_time = self.time_index.last_entry_on_disk()
        except CorruptIndexError as exc:
            log.warning("%s", exc)
            return False
        if last is not None and (last[0] < self.base_offset or not 0 <= last[1] < self.size):
            return False
        return last_time is None or last_time[1] >= self.base_offset

    def recover(self, on_batch: Callable[[BatchHeader], None]) -> int:
        """Validate every batch (CRC included), rebuild both indexes, cut off an invalid tail.

        Scanning stops at the first batch that is torn, fails its CRC, does not
        parse, or goes backwards in offsets; everything from there on is
        truncated. ``on_batch`` sees each valid header (the leader epoch cache
        is rebuilt from them). Returns the number of bytes truncated.
        """
        self._reset_indexes()
        valid = 0
        next_offset = self.base_offset
        with self._indexes_in_bulk():
            try:
                for position, header in self._validated_batches():
                    if header.base_offset < next_offset or not self.offset_index.can_append_offset(
                        header.last_offset
                    ):
                        raise CorruptRecordError(f"offset {header.base_offset} out of order")
                    self._index_batch(
                        position, header.size, header.last_offset, header.max_timestamp
                    )
                    on_batch(header)
                    valid = position + header.size
                    next_offset = header.last_offset + 1
            except KafkaError as exc:
                log.warning(
                    "invalid batch in %s at byte %d (%s): truncating the segment from %d to %d "
                    "bytes",
                    self.log_path,
                    valid,
                    exc.message,
                    self.size,
                    valid,
                )
            self.time_index.maybe_append(*self.max_timestamp_so_far, skip_full_check=True)
        truncated = self.size - valid
        if truncated:
            self._truncate_file(valid)
        return truncated

    def _validated_batches(self) -> Iterator[tuple[int, BatchHeader]]:
        """Every batch from the start, CRC-checked, reading the file in large chunks."""
        for position, _, data in self.batches():
            yield position, validate_batch(data, from_client=False)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from trusted batch headers (a lost or damaged index file)."""
        log.info("rebuilding the indexes of %s", self.log_path)
        self._reset_indexes()
        with self._indexes_in_bulk():
            for position, header in self.headers():
                self._index_batch(position, header.size, header.last_offset, header.max_timestamp)
            self.time_index.maybe_append(*self.max_timestamp_so_far, skip_full_check=True)

    @contextlib.contextmanager
    def _indexes_in_bulk(self) -> Iterator[None]:
        """Both indexes written once at the end of a rebuild, not an entry at a time."""
        with self.offset_index.writing_in_bulk(), self.time_index.writing_in_bulk():
            yield

    def _reset_indexes(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self._bytes_since_index_entry = 0

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove every batch whose last offset is at or above ``offset``; return bytes removed."""
        found = self.find_batch(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = 0
        if found is not None:
            removed = self.size - found[0]
            self._truncate_file(found[0])
        if self.size == 0:
            self.created_ms = now_ms
            self._first_batch_timestamp = None
        self._bytes_since_index_entry = 0
        self._max_timestamp = self._largest_timestamp()
        return removed

    def _largest_timestamp(self) -> TimestampOffset:
        """Kafka's ``readLargestTimestamp``: the time index's last entry, or a later batch's."""
        best = TimestampOffset(*self.time_index.last_entry)
        _, start = self.offset_index.lookup(best.offset)
        for _, header in self.headers(start):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    def _truncate_file(self, size: int) -> None:
        self.log_file.open().truncate(size)
        self.size = size

    # -- durability and lifetime -------------------------------------------

    def flush(self) -> None:
        """Make the batches durable: fdatasync (data and size; the mtime can wait), then the
        indexes if they changed."""
        self.log_file.sync(data_only=True)
        self.flush_indexes()

    def flush_indexes(self) -> None:
        """fsync the indexes that changed since their last flush."""
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.on_become_inactive()
        self.release()

    def release(self) -> None:
        """Let the ``.log`` descriptor go (it closes once no reader holds a FileSlice of it)."""
        self.log_file.close()

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the ``.log`` and the indexes from suffix ``old`` to ``new`` (Kafka's method).

        The log file goes first: recovery decides by the ``.log`` name alone, and
        rebuilds indexes it cannot trust.
        """
        for path, rename in (
            (self.log_path, self.log_file.rename),
            (self.offset_index.path, self.offset_index.rename),
            (self.time_index.path, self.time_index.rename),
            (self.txn_index.path, self.txn_index.rename),
        ):
            rename(path.with_name(path.name.removesuffix(old) + new))

    def delete_files(self) -> None:
        """Unlink the segment's files; the descriptor stays readable until ``release``."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)
