"""LogConfig: Kafka's topic defaults and topic-config names (test_config_sources ties them to
the topic table)."""

from kpybroker.log.log_config import LONG_MAX, LogConfig


def test_defaults_are_kafkas_topic_defaults() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.message_timestamp_before_max_ms == LONG_MAX
    assert config.message_timestamp_after_max_ms == 3_600_000  # Kafka 4.0: one hour
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.flush_interval_messages == LONG_MAX
    assert config.flush_interval_ms == LONG_MAX
    assert config.cleanup_policy == ("delete",)
    assert config.file_delete_delay_ms == 60000
    assert config.min_insync_replicas == 1
    # 10 MiB of 8-byte and 12-byte entries, as Kafka sizes its preallocated indexes.
    assert config.max_offset_index_entries == 1310720
    assert config.max_time_index_entries == 873813


def test_from_topic_config_maps_kafka_names_and_ignores_others() -> None:
    config = LogConfig.from_topic_config(
        {
            "segment.bytes": 2048,
            "flush.messages": 10,
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact,delete",
            "confluent.placement.constraints": "ignored",
        }
    )
    assert config.segment_bytes == 2048
    assert config.flush_interval_messages == 10
    assert config.log_append_time
    assert config.cleanup_policy == ("compact", "delete")
    assert config.deletes
    assert config.retention_ms == LogConfig().retention_ms


def test_from_topic_config_overrides_a_base_config() -> None:
    broker_defaults = LogConfig(retention_ms=1000, segment_bytes=4096)
    config = LogConfig.from_topic_config(
        {"segment.bytes": 8192, "cleanup.policy": ["compact"]}, broker_defaults
    )
    assert (config.segment_bytes, config.retention_ms) == (8192, 1000)
    assert not config.deletes


def test_segment_jitter_stays_below_segment_ms() -> None:
    assert LogConfig().random_segment_jitter() == 0
    config = LogConfig(segment_ms=10, segment_jitter_ms=1000)
    assert all(0 <= config.random_segment_jitter() < 10 for _ in range(100))
