"""The coordinator's configuration, read once from the broker config (Kafka's key names)."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.config import BrokerConfig

MINUTE_MS = 60_000
# Kafka's group.coordinator.classic.new.member.join.timeout (internal, not configurable):
# a new member whose JoinGroup never completes is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * MINUTE_MS


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_group_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 10_080 * MINUTE_MS
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 1
    offsets_topic_segment_bytes: int = 104_857_600
    offsets_topic_compression: int = 0
    offsets_load_buffer_bytes: int = 5_242_880
    offsets_commit_timeout_ms: int = 5000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> CoordinatorSettings:
        get = config.get
        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms"),
            max_session_timeout_ms=get("group.max.session.timeout.ms"),
            max_group_size=get("group.max.size"),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes"),
            offsets_retention_ms=get("offsets.retention.minutes") * MINUTE_MS,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
            offsets_topic_partitions=get("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=get("offsets.topic.replication.factor"),
            offsets_topic_segment_bytes=get("offsets.topic.segment.bytes"),
            offsets_topic_compression=get("offsets.topic.compression.codec"),
            offsets_load_buffer_bytes=get("offsets.load.buffer.size"),
            offsets_commit_timeout_ms=get("offsets.commit.timeout.ms"),
        )
