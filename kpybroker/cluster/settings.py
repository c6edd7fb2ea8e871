"""The broker configs that replication and the controller read, gathered once."""

from __future__ import annotations

from dataclasses import dataclass

from kpybroker.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    replica_lag_time_max_ms: int = 30_000
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1_048_576
    fetch_response_max_bytes: int = 10_485_760
    fetch_wait_max_ms: int = 500
    fetch_backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    num_fetchers: int = 1
    inter_broker_listener: str | None = None
    """``inter.broker.listener.name``; None: the first endpoint of ``inter_broker_protocol``."""
    inter_broker_protocol: str = "PLAINTEXT"
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval_s: int = 300
    leader_imbalance_per_broker_percentage: int = 10

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ReplicationSettings:
        get = config.get
        return cls(
            replica_lag_time_max_ms=get("replica.lag.time.max.ms"),
            fetch_min_bytes=get("replica.fetch.min.bytes"),
            fetch_max_bytes=get("replica.fetch.max.bytes"),
            fetch_response_max_bytes=get("replica.fetch.response.max.bytes"),
            fetch_wait_max_ms=get("replica.fetch.wait.max.ms"),
            fetch_backoff_ms=get("replica.fetch.backoff.ms"),
            socket_timeout_ms=get("replica.socket.timeout.ms"),
            num_fetchers=max(1, get("num.replica.fetchers")),
            inter_broker_listener=get("inter.broker.listener.name"),
            inter_broker_protocol=get("security.inter.broker.protocol"),
            auto_leader_rebalance=get("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_s=get("leader.imbalance.check.interval.seconds"),
            leader_imbalance_per_broker_percentage=get("leader.imbalance.per.broker.percentage"),
        )
