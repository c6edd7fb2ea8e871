"""The transaction coordinator's configuration, read once from the broker config."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.config import BrokerConfig
from kpybroker.config.setting_fields import broker_setting, settings_from_config

#: How long a failed marker write waits before it is sent again (Kafka's
#: TransactionMarkerChannelManager retries on its network client's backoff).
MARKER_RETRY_BACKOFF_MS = 100


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """Each field but the retry backoff is the broker config it names, with the table's default."""

    transactional_id_expiration_ms: int = broker_setting("transactional.id.expiration.ms")
    max_timeout_ms: int = broker_setting("transaction.max.timeout.ms")
    topic_partitions: int = broker_setting("transaction.state.log.num.partitions")
    topic_replication_factor: int = broker_setting("transaction.state.log.replication.factor")
    topic_min_isr: int = broker_setting("transaction.state.log.min.isr")
    topic_segment_bytes: int = broker_setting("transaction.state.log.segment.bytes")
    load_buffer_bytes: int = broker_setting("transaction.state.log.load.buffer.size")
    abort_timed_out_interval_ms: int = broker_setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    remove_expired_interval_ms: int = broker_setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )
    #: ``request.timeout.ms`` bounds how long an append to the log waits for its followers.
    append_timeout_ms: int = broker_setting("request.timeout.ms")
    marker_retry_backoff_ms: int = MARKER_RETRY_BACKOFF_MS

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TransactionSettings:
        return settings_from_config(cls, config)
