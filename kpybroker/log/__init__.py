"""Partition logs in Apache Kafka's on-disk layout.

The broker uses ``log_manager.LogManager`` (all partitions, checkpoints,
clean shutdown, background tasks) and ``partition_log.PartitionLog``
(append, read, offset lookups, retention, DeleteRecords); the other modules
mirror Kafka's storage classes one to one: ``segment`` (LogSegment),
``index``/``time_index`` (OffsetIndex/TimeIndex), ``producer_state``
(ProducerStateManager), ``leader_epoch`` (LeaderEpochFileCache), ``recovery``
(LogLoader), ``checkpoint`` (CheckpointFile), ``log_config`` (LogConfig,
CleanerConfig), ``retention`` (UnifiedLog.deleteOldSegments' rules),
``produce_validator`` (LogValidator: every check of a produced batch).
Compaction: ``log_cleaner`` (LogCleaner: the background task and its worker
thread), ``compaction_schedule`` (LogCleanerManager: what to clean, progress
checkpoints), ``compaction_pass`` (Cleaner: the reading and writing),
``batch_filter`` (the record filter of MemoryRecords.filterTo), ``offset_map``
(OffsetMap).

This package imports nothing itself, so that a tool reading ``log_config``
does not load the whole log.
"""
