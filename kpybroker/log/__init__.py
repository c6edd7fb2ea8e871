"""Partition logs in Apache Kafka's on-disk layout.

The broker uses :class:`LogManager` (all partitions, checkpoints, clean
shutdown, background tasks) and :class:`PartitionLog` (append, read, offset
lookups, retention, DeleteRecords); the other modules mirror Kafka's storage
classes one to one: ``segment`` (LogSegment), ``index``/``time_index``
(OffsetIndex/TimeIndex), ``producer_state`` (ProducerStateManager),
``leader_epoch`` (LeaderEpochFileCache), ``recovery`` (LogLoader),
``checkpoint`` (CheckpointFile), ``config`` (LogConfig, CleanerConfig),
``retention`` (UnifiedLog.deleteOldSegments' rules), ``record_validation``
(LogValidator's key check). Compaction: ``log_cleaner`` (LogCleaner: the
background task and its worker thread), ``cleaner_manager``
(LogCleanerManager: what to clean, progress checkpoints), ``cleaner`` (Cleaner:
the reading and writing), ``batch_filter`` (the record filter of
MemoryRecords.filterTo), ``offset_map`` (OffsetMap).
"""

from kpybroker.log.config import LogConfig
from kpybroker.log.log_manager import LogManager
from kpybroker.log.partition_log import AppendResult, FileSlice, PartitionLog, ReadResult
from kpybroker.log.segment import TimestampOffset

__all__ = [
    "AppendResult",
    "FileSlice",
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "ReadResult",
    "TimestampOffset",
]
