"""The share coordinator's configuration, read once from the broker config (Kafka's
``ShareCoordinatorConfig``)."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.config import BrokerConfig
from kpybroker.config.setting_fields import broker_setting, settings_from_config

#: The first pause before the persister asks a coordinator again (Kafka's
#: ``PersisterStateManager`` backs off from 100 ms, doubling up to a few seconds).
PERSISTER_RETRY_BACKOFF_MS = 100
PERSISTER_RETRY_BACKOFF_MAX_MS = 1000


@dataclass(frozen=True, slots=True)
class ShareCoordinatorSettings:
    """Each field but the persister's backoff is the broker config it names, with the table's
    default."""

    #: ShareUpdate records written for a key before the next write is a full ShareSnapshot.
    updates_per_snapshot: int = broker_setting(
        "share.coordinator.snapshot.update.records.per.snapshot"
    )
    #: How long a write (or a read recording a new leader epoch) waits for replication.
    write_timeout_ms: int = broker_setting("share.coordinator.write.timeout.ms")
    topic_partitions: int = broker_setting("share.coordinator.state.topic.num.partitions")
    topic_replication_factor: int = broker_setting(
        "share.coordinator.state.topic.replication.factor"
    )
    topic_min_isr: int = broker_setting("share.coordinator.state.topic.min.isr")
    topic_segment_bytes: int = broker_setting("share.coordinator.state.topic.segment.bytes")
    #: The codec id of the batches the coordinator writes (0: none).
    topic_compression: int = broker_setting("share.coordinator.state.topic.compression.codec")
    load_buffer_bytes: int = broker_setting("share.coordinator.load.buffer.size")
    prune_interval_ms: int = broker_setting("share.coordinator.state.topic.prune.interval.ms")
    cold_snapshot_interval_ms: int = broker_setting(
        "share.coordinator.cold.partition.snapshot.interval.ms"
    )
    #: How long the persister keeps trying to reach a key's coordinator.
    persister_timeout_ms: int = broker_setting("request.timeout.ms")
    persister_backoff_ms: int = PERSISTER_RETRY_BACKOFF_MS
    persister_backoff_max_ms: int = PERSISTER_RETRY_BACKOFF_MAX_MS

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ShareCoordinatorSettings:
        return settings_from_config(cls, config)
