"""Per-topic log settings (Kafka's ``LogConfig``), keyed by Kafka's topic-config names.

Only the settings the log layer acts on live here. Validating what a client
sends (types, ranges, unknown names) is the job of ``kpybroker.config``, whose
tables are the single source of every config's name and default. The log layer
sits below it and does not import it, so each field here names its config and
repeats the table's default; ``tests/unit/test_config_sources.py`` fails when a
name or a default differs from the table. ``from_topic_config`` trusts its
input and ignores names the log does not use.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# Java's Integer.MAX_VALUE, Long.MAX_VALUE and Double.MAX_VALUE, the "no limit" defaults of
# many configs. Defined here, the lowest layer that needs them; kpybroker.config imports them.
INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
DOUBLE_MAX = sys.float_info.max

# The values of message.timestamp.type (the config tables import them too).
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

#: The metadata entry of a settings field that holds a config: the config's Kafka name.
CONFIG_KEY = "config_key"


def _config(name: str, default: Any) -> Any:
    """A settings field holding config ``name``; ``default`` must be the table's default."""
    return field(default=default, metadata={CONFIG_KEY: name})


def config_fields(cls: type) -> dict[str, str]:
    """Config name -> field name, for the fields of settings class ``cls`` that hold one."""
    return {f.metadata[CONFIG_KEY]: f.name for f in fields(cls) if CONFIG_KEY in f.metadata}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log; the defaults are the topic table's (Kafka 4.0's),
    which ``tests/unit/test_config_sources.py`` holds them to."""

    segment_bytes: int = _config("segment.bytes", 1 << 30)
    segment_ms: int = _config("segment.ms", 7 * 24 * 3600 * 1000)
    segment_jitter_ms: int = _config("segment.jitter.ms", 0)
    segment_index_bytes: int = _config("segment.index.bytes", 10 * 1024 * 1024)
    index_interval_bytes: int = _config("index.interval.bytes", 4096)
    max_message_bytes: int = _config("max.message.bytes", 1024 * 1024 + 12)
    max_decompressed_message_bytes: int = _config("max.decompressed.message.bytes", INT_MAX - 8)
    message_timestamp_type: str = _config("message.timestamp.type", CREATE_TIME)
    message_timestamp_before_max_ms: int = _config("message.timestamp.before.max.ms", LONG_MAX)
    message_timestamp_after_max_ms: int = _config("message.timestamp.after.max.ms", 3_600_000)
    retention_ms: int = _config("retention.ms", 7 * 24 * 3600 * 1000)
    retention_bytes: int = _config("retention.bytes", -1)
    flush_interval_messages: int = _config("flush.messages", LONG_MAX)
    flush_interval_ms: int = _config("flush.ms", LONG_MAX)
    cleanup_policy: tuple[str, ...] = _config("cleanup.policy", ("delete",))
    file_delete_delay_ms: int = _config("file.delete.delay.ms", 60_000)
    min_insync_replicas: int = _config("min.insync.replicas", 1)
    compression_type: str = _config("compression.type", "producer")
    unclean_leader_election_enable: bool = _config("unclean.leader.election.enable", False)
    delete_retention_ms: int = _config("delete.retention.ms", 24 * 3600 * 1000)
    min_compaction_lag_ms: int = _config("min.compaction.lag.ms", 0)
    max_compaction_lag_ms: int = _config("max.compaction.lag.ms", LONG_MAX)
    min_cleanable_dirty_ratio: float = _config("min.cleanable.dirty.ratio", 0.5)
    preallocate: bool = _config("preallocate", False)

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


#: Topic-config name -> LogConfig field name.
TOPIC_CONFIG_FIELDS: dict[str, str] = config_fields(LogConfig)


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The log cleaner's broker settings (Kafka's ``CleanerConfig``), with Kafka's defaults."""

    enable: bool = _config("log.cleaner.enable", True)
    backoff_ms: int = _config("log.cleaner.backoff.ms", 15_000)
    dedupe_buffer_size: int = _config("log.cleaner.dedupe.buffer.size", 128 * 1024 * 1024)
    dedupe_buffer_load_factor: float = _config("log.cleaner.io.buffer.load.factor", 0.9)
    io_buffer_size: int = _config("log.cleaner.io.buffer.size", 512 * 1024)
    max_io_bytes_per_second: float = _config("log.cleaner.io.max.bytes.per.second", DOUBLE_MAX)


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """How often the log manager's background tasks run, and the cleaner's settings.

    Intervals are checked on each call of ``LogManager.periodic`` (the broker
    calls it every second), so that is their granularity.
    """

    retention_check_interval_ms: int = _config("log.retention.check.interval.ms", 300_000)
    recovery_point_checkpoint_interval_ms: int = _config(
        "log.flush.offset.checkpoint.interval.ms", 60_000
    )
    log_start_checkpoint_interval_ms: int = _config(
        "log.flush.start.offset.checkpoint.interval.ms", 60_000
    )
    high_watermark_checkpoint_interval_ms: int = _config(
        "replica.high.watermark.checkpoint.interval.ms", 5_000
    )
    producer_expiration_check_interval_ms: int = _config(
        "producer.id.expiration.check.interval.ms", 600_000
    )
    #: Bytes per second one log-dir move copies at most (LONG_MAX: no limit).
    alter_log_dirs_max_bytes_per_second: int = _config(
        "replica.alter.log.dirs.io.max.bytes.per.second", LONG_MAX
    )
    #: Threads per log directory that flush and close the logs at a clean shutdown.
    recovery_threads_per_data_dir: int = _config("num.recovery.threads.per.data.dir", 2)
    cleaner: CleanerConfig = CleanerConfig()

    @classmethod
    def from_broker_config(cls, get: Callable[[str], object]) -> LogManagerConfig:
        """Read the settings by their Kafka broker-config names through ``get``."""
        cleaner = CleanerConfig(
            **{attr: get(name) for name, attr in config_fields(CleanerConfig).items()}
        )
        values: dict[str, Any] = {attr: get(name) for name, attr in config_fields(cls).items()}
        return cls(cleaner=cleaner, **values)


def _policy_tuple(value: object) -> tuple[str, ...]:
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]  # type: ignore[attr-defined]
    return tuple(p.strip() for p in parts if p.strip())
