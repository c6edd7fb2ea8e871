"""The broker configs the quotas read, gathered from a ``BrokerConfig`` in one place.

As ``QuotaFactory`` does, the client quota managers share ``quota.window.*`` and the
controller-mutation manager has ``controller.quota.window.*``; the connection limits use
the client quota window too (``ConnectionQuotas.rateQuotaMetricConfig``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kpybroker.config import BrokerConfig
from kpybroker.config.setting_fields import broker_setting, settings_from_config
from kpybroker.quotas.connection_quotas import ConnectionLimits, ListenerLimits, ip_key
from kpybroker.quotas.per_ip_overrides import (
    check_per_ip_limits,
    parse_max_connections_per_ip_overrides,
)
from kpybroker.quotas.sampled_rate import QuotaWindow


@dataclass(frozen=True, slots=True)
class QuotaSettings:
    """Each field is the broker config it names, with the table's default."""

    window_samples: int = broker_setting("quota.window.num")
    window_seconds: int = broker_setting("quota.window.size.seconds")
    controller_window_samples: int = broker_setting("controller.quota.window.num")
    controller_window_seconds: int = broker_setting("controller.quota.window.size.seconds")
    max_connections: int = broker_setting("max.connections")
    max_connections_per_ip: int = broker_setting("max.connections.per.ip")
    max_connections_per_ip_overrides: str = broker_setting("max.connections.per.ip.overrides")
    max_connection_creation_rate: int = broker_setting("max.connection.creation.rate")

    @classmethod
    def from_config(cls, config: BrokerConfig) -> QuotaSettings:
        return settings_from_config(cls, config)

    @property
    def client_window(self) -> QuotaWindow:
        """Produce, fetch and request quotas, and connection creation rates."""
        return QuotaWindow.of_seconds(self.window_samples, self.window_seconds)

    @property
    def controller_window(self) -> QuotaWindow:
        samples, seconds = self.controller_window_samples, self.controller_window_seconds
        return QuotaWindow.of_seconds(samples, seconds)


def connection_limits(
    config: BrokerConfig, resolve: Callable[[str], str] = ip_key
) -> ConnectionLimits:
    """The connection limits of ``config``, listener overrides included.

    ``resolve`` maps a host of ``max.connections.per.ip.overrides`` to an IP literal; the
    default accepts IP literals only (ValueError otherwise). Kafka resolves host names
    there, blocking, when the config is loaded; pass a resolver to do the same.
    Raises ``ConfigError`` as Kafka's ``KafkaConfig`` would for a bad overrides value.
    """
    settings = QuotaSettings.from_config(config)
    overrides = parse_max_connections_per_ip_overrides(settings.max_connections_per_ip_overrides)
    check_per_ip_limits(settings.max_connections_per_ip, overrides)
    return ConnectionLimits(
        listeners={
            listener.name: _listener_limits(config, listener.name)
            for listener in config.listeners()
        },
        inter_broker_listener=config.inter_broker_listener_name(),
        max_connections=settings.max_connections,
        max_connections_per_ip=settings.max_connections_per_ip,
        max_connections_per_ip_overrides={
            resolve(host): count for host, count in overrides.items()
        },
        max_connection_creation_rate=settings.max_connection_creation_rate,
    )


def _listener_limits(config: BrokerConfig, listener: str) -> ListenerLimits:
    # listener_value falls back to the broker-wide value, as Kafka's
    # valuesWithPrefixOverride does; the fallback is the same either way.
    max_connections = config.listener_value(listener, "max.connections")
    rate = config.listener_value(listener, "max.connection.creation.rate")
    assert isinstance(max_connections, int) and isinstance(rate, int)
    return ListenerLimits(max_connections, rate)
