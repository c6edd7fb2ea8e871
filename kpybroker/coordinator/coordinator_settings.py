"""The coordinator's configuration, read once from the broker config (Kafka's key names)."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.config import BrokerConfig
from kpybroker.config.core import MINUTE_MS
from kpybroker.config.setting_fields import broker_setting, settings_from_config

# Kafka's group.coordinator.classic.new.member.join.timeout (internal, not configurable):
# a new member whose JoinGroup never completes is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * MINUTE_MS
# Kafka's group.share.initialize.retry.interval.ms (internal): a share partition whose
# state initialization has not finished this long after it was asked for is asked again.
SHARE_INITIALIZE_RETRY_INTERVAL_MS = 30_000


def _minutes_to_ms(minutes: int) -> int:
    return minutes * MINUTE_MS


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    """Each field but ``new_member_join_timeout_ms`` is the broker config it names, with the
    table's default."""

    min_session_timeout_ms: int = broker_setting("group.min.session.timeout.ms")
    max_session_timeout_ms: int = broker_setting("group.max.session.timeout.ms")
    max_group_size: int = broker_setting("group.max.size")
    initial_rebalance_delay_ms: int = broker_setting("group.initial.rebalance.delay.ms")
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = broker_setting("offset.metadata.max.bytes")
    offsets_retention_ms: int = broker_setting("offsets.retention.minutes", _minutes_to_ms)
    offsets_retention_check_interval_ms: int = broker_setting("offsets.retention.check.interval.ms")
    offsets_topic_partitions: int = broker_setting("offsets.topic.num.partitions")
    offsets_topic_replication_factor: int = broker_setting("offsets.topic.replication.factor")
    offsets_topic_segment_bytes: int = broker_setting("offsets.topic.segment.bytes")
    offsets_topic_compression: int = broker_setting("offsets.topic.compression.codec")
    offsets_load_buffer_bytes: int = broker_setting("offsets.load.buffer.size")
    offsets_commit_timeout_ms: int = broker_setting("offsets.commit.timeout.ms")
    consumer_assignors: tuple[str, ...] = broker_setting("group.consumer.assignors", tuple)
    consumer_session_timeout_ms: int = broker_setting("group.consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int = broker_setting("group.consumer.heartbeat.interval.ms")
    # The bounds of a group's own consumer.session.timeout.ms and consumer.heartbeat.interval.ms.
    consumer_min_session_timeout_ms: int = broker_setting("group.consumer.min.session.timeout.ms")
    consumer_max_session_timeout_ms: int = broker_setting("group.consumer.max.session.timeout.ms")
    consumer_min_heartbeat_interval_ms: int = broker_setting(
        "group.consumer.min.heartbeat.interval.ms"
    )
    consumer_max_heartbeat_interval_ms: int = broker_setting(
        "group.consumer.max.heartbeat.interval.ms"
    )
    consumer_max_size: int = broker_setting("group.consumer.max.size")
    consumer_migration_policy: str = broker_setting("group.consumer.migration.policy", str.lower)
    # KIP-932 share groups.
    share_session_timeout_ms: int = broker_setting("group.share.session.timeout.ms")
    share_heartbeat_interval_ms: int = broker_setting("group.share.heartbeat.interval.ms")
    # The bounds of a group's own share.session.timeout.ms and share.heartbeat.interval.ms.
    share_min_session_timeout_ms: int = broker_setting("group.share.min.session.timeout.ms")
    share_max_session_timeout_ms: int = broker_setting("group.share.max.session.timeout.ms")
    share_min_heartbeat_interval_ms: int = broker_setting("group.share.min.heartbeat.interval.ms")
    share_max_heartbeat_interval_ms: int = broker_setting("group.share.max.heartbeat.interval.ms")
    share_max_size: int = broker_setting("group.share.max.size")
    # The least time between two target assignments of a share group (KIP-1263), and the
    # bounds of a group's own share.assignment.interval.ms.
    share_assignment_interval_ms: int = broker_setting("group.share.assignment.interval.ms")
    share_min_assignment_interval_ms: int = broker_setting("group.share.min.assignment.interval.ms")
    share_max_assignment_interval_ms: int = broker_setting("group.share.max.assignment.interval.ms")

    @property
    def share_initialize_retry_interval_ms(self) -> int:
        """Kafka's: the retry interval, but never below ``offsets.commit.timeout.ms``."""
        return max(SHARE_INITIALIZE_RETRY_INTERVAL_MS, self.offsets_commit_timeout_ms)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> CoordinatorSettings:
        return settings_from_config(cls, config)
