"""Topic configs: their defaults under a given broker config, validation, and provenance.

A topic's effective config is its own overrides (as stored in the metadata store, as text)
on top of defaults that come from the broker config through each topic config's synonyms,
exactly as Kafka's ``KafkaConfig.extractLogConfigMap`` and ``LogConfig.validate`` do.
"""

from __future__ import annotations

from collections.abc import Mapping

from kpybroker.config.broker_config import BrokerConfig, ConfigSynonym
from kpybroker.config.core import ConfigError, ConfigSource, check_names_and_values, java_str
from kpybroker.config.topic_table import TOPIC_CONFIGS


def topic_defaults(broker_cfg: BrokerConfig) -> dict[str, object]:
    """Each topic config's value for a topic that does not override it.

    A config with broker synonyms takes the first one set (hours and minutes converted to
    ms, so log.retention.hours=1 gives retention.ms=3600000); the others take the table
    default.
    """
    defaults: dict[str, object] = {}
    for name, key in TOPIC_CONFIGS.items():
        if name == "retention.ms":
            defaults[name] = broker_cfg.retention_ms()  # negative hours/minutes mean -1
        elif key.synonyms:
            defaults[name] = broker_cfg.resolve(key.synonyms)
        else:
            defaults[name] = key.default
    return defaults


def validate_topic_configs(
    configs: Mapping[str, str | None], broker_cfg: BrokerConfig | None = None
) -> dict[str, object]:
    """Parse a topic's config overrides (CreateTopics, AlterConfigs) into typed values.

    Raises ``ConfigError`` with Kafka's INVALID_CONFIG message, naming the key: an unknown
    name ("Unknown topic config name: x"), a null value, a value of the wrong type or out
    of range, or overrides that conflict with each other or with the broker's defaults
    (min.compaction.lag.ms above max.compaction.lag.ms). Tiered storage is refused, since
    kpybroker has none. Without ``broker_cfg`` the table defaults stand in for the
    broker's, as in Kafka's client-side check.
    """
    check_names_and_values(configs, TOPIC_CONFIGS, "topic")
    parsed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in configs.items()}

    if parsed.get("remote.storage.enable"):
        raise ConfigError.invalid_value(
            "remote.storage.enable",
            True,
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )
    if broker_cfg is None:
        merged = {name: key.default for name, key in TOPIC_CONFIGS.items()}
    else:
        merged = topic_defaults(broker_cfg)
    merged.update(parsed)
    min_lag, max_lag = merged["min.compaction.lag.ms"], merged["max.compaction.lag.ms"]
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        raise ConfigError(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({java_str(min_lag)}) > "
            f"max.compaction.lag.ms ({java_str(max_lag)})",
        )
    return parsed


def effective_topic_config(
    broker_cfg: BrokerConfig, overrides: Mapping[str, str | None]
) -> dict[str, object]:
    """Every topic config's value for a topic with these overrides (validated)."""
    config = topic_defaults(broker_cfg)
    config.update(validate_topic_configs(overrides, broker_cfg))
    return config


def topic_config_synonyms(
    broker_cfg: BrokerConfig, overrides: Mapping[str, str], name: str
) -> list[ConfigSynonym]:
    """DescribeConfigs' synonyms for topic config ``name``, in Kafka's order.

    ``overrides`` are the topic's stored (already validated) configs. The topic's own
    override comes first (source TOPIC_CONFIG), then the broker synonyms of the
    topic config's first broker synonym, as Kafka's ConfigHelper lists them. The first
    entry's source is the config's source; none means DEFAULT_CONFIG.
    """
    key = TOPIC_CONFIGS[name]
    result: list[ConfigSynonym] = []
    if name in overrides:
        value = None if key.sensitive else key.to_text(key.parse(overrides[name]))
        result.append(ConfigSynonym(name, value, ConfigSource.TOPIC_CONFIG))
    if key.synonyms:
        result += broker_cfg.synonyms(key.synonyms[0])
    return result


def topic_config_source(
    broker_cfg: BrokerConfig, overrides: Mapping[str, str], name: str
) -> ConfigSource:
    """Where a topic's value of ``name`` comes from (DescribeConfigs' config_source)."""
    synonyms = topic_config_synonyms(broker_cfg, overrides, name)
    return synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
