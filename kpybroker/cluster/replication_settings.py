"""The broker configs that replication and the controller read, gathered once."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.config import BrokerConfig
from kpybroker.config.setting_fields import broker_setting, settings_from_config


def _at_least_one(count: int) -> int:
    return max(1, count)


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """Each field is the broker config it names, with the table's default."""

    replica_lag_time_max_ms: int = broker_setting("replica.lag.time.max.ms")
    fetch_min_bytes: int = broker_setting("replica.fetch.min.bytes")
    fetch_max_bytes: int = broker_setting("replica.fetch.max.bytes")
    fetch_response_max_bytes: int = broker_setting("replica.fetch.response.max.bytes")
    fetch_wait_max_ms: int = broker_setting("replica.fetch.wait.max.ms")
    fetch_backoff_ms: int = broker_setting("replica.fetch.backoff.ms")
    socket_timeout_ms: int = broker_setting("replica.socket.timeout.ms")
    num_fetchers: int = broker_setting("num.replica.fetchers", _at_least_one)
    inter_broker_listener: str | None = broker_setting("inter.broker.listener.name")
    """``inter.broker.listener.name``; None: the first endpoint of ``inter_broker_protocol``."""
    inter_broker_protocol: str = broker_setting("security.inter.broker.protocol")
    auto_leader_rebalance: bool = broker_setting("auto.leader.rebalance.enable")
    leader_imbalance_check_interval_s: int = broker_setting(
        "leader.imbalance.check.interval.seconds"
    )
    leader_imbalance_per_broker_percentage: int = broker_setting(
        "leader.imbalance.per.broker.percentage"
    )

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ReplicationSettings:
        return settings_from_config(cls, config)
