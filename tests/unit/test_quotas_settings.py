"""The quotas' configs read from a ``BrokerConfig``, and quota configs applied per entity."""

from __future__ import annotations

import pytest

from kpybroker.config import BrokerConfig
from kpybroker.config.core import ConfigError
from kpybroker.quotas.client_quota_manager import INT_MAX
from kpybroker.quotas.connection_quotas import ListenerLimits
from kpybroker.quotas.entity import DEFAULT, ClientQuotaEntity
from kpybroker.quotas.quota_managers import QuotaManagers
from kpybroker.quotas.sampled_rate import QuotaWindow
from kpybroker.quotas.settings import QuotaSettings, connection_limits

LISTENERS = {
    "listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
    "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def test_windows_default_to_kafkas() -> None:
    settings = QuotaSettings.from_config(BrokerConfig())
    assert settings.client_window == QuotaWindow(11, 1000)
    assert settings.controller_window == QuotaWindow(11, 1000)
    custom = QuotaSettings.from_config(
        BrokerConfig({"quota.window.num": "3", "controller.quota.window.size.seconds": "2"})
    )
    assert (custom.client_window, custom.controller_window) == (
        QuotaWindow(3, 1000),
        QuotaWindow(11, 2000),
    )


def test_connection_limits_with_listener_overrides() -> None:
    config = BrokerConfig(
        {
            **LISTENERS,
            "max.connections": "100",
            "max.connection.creation.rate": "50",
            "listener.name.external.max.connections": "10",
            "max.connections.per.ip.overrides": "10.0.0.1:3, ::ffff:10.0.0.2:4",
        }
    )
    limits = connection_limits(config)
    assert limits.listeners == {
        "EXTERNAL": ListenerLimits(10, 50),
        "INTERNAL": ListenerLimits(100, 50),
    }
    assert limits.inter_broker_listener == "INTERNAL"
    assert (limits.max_connections, limits.max_connections_per_ip) == (100, INT_MAX)
    assert limits.max_connections_per_ip_overrides == {"10.0.0.1": 3, "10.0.0.2": 4}


def test_connection_limits_reject_kafkas_bad_values() -> None:
    with pytest.raises(ConfigError, match="can be set to zero only if"):
        connection_limits(BrokerConfig({"max.connections.per.ip": "0"}))
    hosts = BrokerConfig({"max.connections.per.ip.overrides": "broker1:3"})
    with pytest.raises(ValueError):
        connection_limits(hosts)  # host names need a resolver
    resolved = connection_limits(hosts, resolve=lambda host: "192.0.2.7")
    assert resolved.max_connections_per_ip_overrides == {"192.0.2.7": 3}


def test_an_entitys_quota_configs_are_applied_whole() -> None:
    managers = QuotaManagers.from_settings(QuotaSettings.from_config(BrokerConfig()))
    entity = ClientQuotaEntity("alice", DEFAULT)
    managers.update_entity(
        entity, {"producer_byte_rate": "1024", "request_percentage": "12.5", "other": "x"}
    )
    assert managers.produce.configured_quota(entity) == 1024.0
    assert managers.request.configured_quota(entity) == 12.5
    assert not managers.fetch.quotas_enabled
    managers.update_entity(entity, {"controller_mutation_rate": "2"})
    assert managers.produce.configured_quota(entity) is None
    assert managers.controller_mutation.quota_for("alice", "any") == 2.0
    with pytest.raises(ValueError):
        managers.update_entity(entity, {"consumer_byte_rate": "1.5"})
