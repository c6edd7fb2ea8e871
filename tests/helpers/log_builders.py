"""Helpers shared by the ``test_log_*`` modules (it holds no tests itself).

Logs are opened on real files under pytest's ``tmp_path`` with small segment
and index sizes, so rolls and index entries happen within a few batches.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kpybroker.log.log_config import LogConfig
from kpybroker.log.log_manager import LogManager
from kpybroker.log.partition_log import PartitionLog, ReadResult
from kpybroker.protocol.records import NewRecord, Record, build_batch, iter_batches, iter_records

# retention.ms is off: the record timestamps these tests write are decades old.
SMALL = LogConfig(
    segment_bytes=1000, index_interval_bytes=150, segment_index_bytes=1200, retention_ms=-1
)


class Clock:
    """A settable millisecond clock, so time-based rules are tested without sleeping."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(
    count: int = 1,
    *,
    value: bytes = b"value",
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """A produced batch (base offset 0) as the Produce handler passes it to the log."""
    stamps = timestamps or [timestamp] * count
    records = [NewRecord(None, value, (), ts) for ts in stamps]
    return bytearray(
        build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            timestamp=timestamp,
        )
    )


def open_log(directory: Path, config: LogConfig = SMALL, **kwargs: Any) -> PartitionLog:
    return PartitionLog(directory, config, **kwargs)


def fill(log: PartitionLog, batches: int, records_per_batch: int = 3, epoch: int = 0) -> None:
    """Append ``batches`` batches whose record timestamps equal their offsets * 10."""
    for _ in range(batches):
        first = log.log_end_offset
        stamps = [(first + i) * 10 for i in range(records_per_batch)]
        log.append(batch(records_per_batch, timestamps=stamps), epoch)


def records(result: ReadResult) -> list[Record]:
    return decode(result.read_bytes())


def decode(data: bytes) -> list[Record]:
    return [r for pos, _ in iter_batches(data) for r in iter_records(memoryview(data)[pos:])]


def log_bytes(log: PartitionLog) -> bytes:
    """Every segment's bytes, in offset order."""
    return b"".join(s.log_path.read_bytes() for s in log.segments)


def stored_records(log: PartitionLog) -> list[Record]:
    """Every record stored in the log, decoded from the segment files."""
    return decode(log_bytes(log))


def offsets_on_disk(log: PartitionLog) -> list[int]:
    return [r.offset for r in stored_records(log)]


def keyed(
    *pairs: tuple[bytes | None, bytes | None],
    timestamp: int = 1_000,
    compression: int = 0,
    producer_id: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """A produced batch of ``(key, value)`` records, all stamped ``timestamp``."""
    return bytearray(
        build_batch(
            [NewRecord(k, v, (), timestamp) for k, v in pairs],
            compression=compression,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=base_sequence,
            timestamp=timestamp,
        )
    )


def append_committed(log: PartitionLog, batch_bytes: bytearray, epoch: int = 0) -> None:
    """Append as a single-replica leader does: the high watermark follows the log end."""
    log.append(batch_bytes, epoch)
    log.update_high_watermark(log.log_end_offset)


def stored_pairs(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record stored, in order."""
    return [(r.offset, r.key, r.value) for r in stored_records(log)]


NOW = 1_700_000_000_000
#: The size of a one-record batch with a 2-byte key and a 3-byte value: tests that need
#: exact segment boundaries write only such batches, ``PER_SEGMENT`` to a segment.
ONE = len(keyed((b"k0", b"v00")))
PER_SEGMENT = 4


def log_manager(
    directory: Path, config_for: Callable[[str], LogConfig | None], **kwargs: Any
) -> LogManager:
    """A LogManager over one log directory, as broker 1 of a test cluster."""
    return LogManager(
        [directory], broker_id=1, cluster_id="c" * 22, config_for=config_for, **kwargs
    )
