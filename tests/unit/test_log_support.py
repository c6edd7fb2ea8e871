"""Helpers shared by the ``test_log_*`` modules (it holds no tests itself).

Logs are opened on real files under pytest's ``tmp_path`` with small segment
and index sizes, so rolls and index entries happen within a few batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kpybroker.log import LogConfig, PartitionLog, ReadResult
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
