"""Per-topic log settings (Kafka's ``LogConfig``), keyed by Kafka's topic-config names.

Only the settings the log layer acts on live here. Validating what a client
sends (types, ranges, unknown names) is ``kpybroker/config.py``'s job, so
``from_topic_config`` trusts its input and ignores names the log does not use.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

LONG_MAX = (1 << 63) - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

# Kafka topic-config name -> LogConfig field name.
TOPIC_CONFIG_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "cleanup.policy": "cleanup_policy",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "min.insync.replicas": "min_insync_replicas",
    "compression.type": "compression_type",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "preallocate": "preallocate",
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log; the defaults are Kafka 3.9's topic defaults."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False

    @classmethod
    def from_topic_config(
        cls, values: Mapping[str, object], base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka topic-config names, over ``base`` (or the defaults).

        ``base`` is where broker-level defaults (``log.segment.bytes`` and friends,
        already mapped by the caller) come in, so a topic override changes only
        what it names. ``cleanup.policy`` may be a comma-separated string or a list.
        """
        changes: dict[str, Any] = {}
        for name, value in values.items():
            field_name = TOPIC_CONFIG_FIELDS.get(name)
            if field_name is None:
                continue
            if field_name == "cleanup_policy":
                value = _policy_tuple(value)
            changes[field_name] = value
        start = base or cls()
        return cls(**{f.name: changes.get(f.name, getattr(start, f.name)) for f in fields(cls)})

    @property
    def log_append_time(self) -> bool:
        """Whether the broker stamps its own clock into each batch (message.timestamp.type)."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def deletes(self) -> bool:
        """Whether time/size retention applies (cleanup.policy contains ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy contains ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The roll time: segment.ms, capped by max.compaction.lag.ms on a compacted log.

        The active segment is never compacted, so it must roll for its records to
        be compacted within the lag (Kafka's ``LogConfig.maxSegmentMs``).
        """
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def max_offset_index_entries(self) -> int:
        """Entries a ``.index`` may hold before the segment must roll (8-byte entries)."""
        return self.segment_index_bytes // 8

    @property
    def max_time_index_entries(self) -> int:
        """Entries a ``.timeindex`` may hold (12-byte entries)."""
        return self.segment_index_bytes // 12

    def random_segment_jitter(self) -> int:
        """A roll jitter for a new segment, drawn as Kafka's ``randomSegmentJitter`` does.

        Jitter spreads time-based rolls of many partitions created together, so
        they do not all roll (and fsync) in the same second.
        """
        if self.segment_jitter_ms <= 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The log cleaner's broker settings (Kafka's ``CleanerConfig``), with Kafka's defaults."""

    enable: bool = True
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = sys.float_info.max  # Kafka's Double.MAX_VALUE: no limit


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """How often the log manager's background tasks run, and the cleaner's settings.

    Intervals are checked on each call of ``LogManager.periodic`` (the broker
    calls it every second), so that is their granularity.
    """

    retention_check_interval_ms: int = 300_000
    recovery_point_checkpoint_interval_ms: int = 60_000
    log_start_checkpoint_interval_ms: int = 60_000
    high_watermark_checkpoint_interval_ms: int = 5_000
    producer_expiration_check_interval_ms: int = 600_000
    cleaner: CleanerConfig = CleanerConfig()

    @classmethod
    def from_broker_config(cls, get: Callable[[str], object]) -> LogManagerConfig:
        """Read the settings by their Kafka broker-config names through ``get``."""
        cleaner = CleanerConfig(
            **{field: get(name) for name, field in _CLEANER_BROKER_CONFIGS.items()}
        )
        values: dict[str, Any] = {
            field: get(name) for name, field in _MANAGER_BROKER_CONFIGS.items()
        }
        return cls(cleaner=cleaner, **values)


_MANAGER_BROKER_CONFIGS = {
    "log.retention.check.interval.ms": "retention_check_interval_ms",
    "log.flush.offset.checkpoint.interval.ms": "recovery_point_checkpoint_interval_ms",
    "log.flush.start.offset.checkpoint.interval.ms": "log_start_checkpoint_interval_ms",
    "replica.high.watermark.checkpoint.interval.ms": "high_watermark_checkpoint_interval_ms",
    "producer.id.expiration.check.interval.ms": "producer_expiration_check_interval_ms",
}
_CLEANER_BROKER_CONFIGS = {
    "log.cleaner.enable": "enable",
    "log.cleaner.backoff.ms": "backoff_ms",
    "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
    "log.cleaner.io.buffer.load.factor": "dedupe_buffer_load_factor",
    "log.cleaner.io.buffer.size": "io_buffer_size",
    "log.cleaner.io.max.bytes.per.second": "max_io_bytes_per_second",
}


def _policy_tuple(value: object) -> tuple[str, ...]:
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]  # type: ignore[attr-defined]
    return tuple(p.strip() for p in parts if p.strip())
