"""DescribeConfigs' view of the config tables: one entry per config, as Kafka's ConfigHelper.

Kafka's rules, kept here so that CreateTopics (v5+) and DescribeConfigs agree:

- a topic lists every topic config: its effective value, its source (the topic's
  override, else the broker config it falls back to, else the default) and synonyms;
- a group lists every non-internal group config (and the internal ones it sets): its
  effective value, then the group's override (GROUP_CONFIG) if any, then the synonyms of
  the broker config it falls back to, else the group config itself as DEFAULT_CONFIG;
- a broker lists every non-internal broker config plus whatever its static config
  names, read-only unless Kafka can change it at run time;
- the cluster-wide default broker entity lists only its dynamic values;
- a config whose type is unknown (a key only server.properties knows) is treated as
  sensitive, and sensitive values are never shown (value None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kpybroker.config.broker_config import BrokerConfig, ConfigSynonym, broker_config_synonyms
from kpybroker.config.broker_table import BROKER_CONFIGS
from kpybroker.config.core import ConfigKey, ConfigSource
from kpybroker.config.group import group_defaults, parse_group_configs
from kpybroker.config.group_table import GROUP_CONFIGS
from kpybroker.config.topic import effective_topic_config, topic_config_synonyms
from kpybroker.config.topic_table import TOPIC_CONFIGS

#: DescribeConfigs' config_type for a key whose type is not known.
UNKNOWN_TYPE = 0


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs (and CreateTopics v5+) report it."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: int
    documentation: str | None


def topic_config_entries(
    broker_cfg: BrokerConfig, overrides: Mapping[str, str]
) -> list[ConfigEntry]:
    """Every topic config of a topic with these (stored, valid) overrides, by name."""
    values = effective_topic_config(broker_cfg, overrides)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        key = TOPIC_CONFIGS[name]
        synonyms = topic_config_synonyms(broker_cfg, overrides, name)
        entries.append(_entry(name, key, key.to_text(values[name]), synonyms, read_only=False))
    return entries


def group_config_entries(
    broker_cfg: BrokerConfig, overrides: Mapping[str, str]
) -> list[ConfigEntry]:
    """Every group config of a group with these (stored, valid) overrides, by name.

    As Kafka's ConfigHelper: the non-internal configs, and an internal one only when the
    group sets it or the broker's static config sets its synonym.
    """
    values = group_defaults(broker_cfg)
    values.update(parse_group_configs(overrides))
    entries = []
    for name in sorted(GROUP_CONFIGS):
        key = GROUP_CONFIGS[name]
        set_by_broker = bool(key.synonyms) and key.synonyms[0] in broker_cfg.originals
        if key.internal and name not in overrides and not set_by_broker:
            continue
        value = key.to_text(values[name])
        synonyms = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, value, ConfigSource.GROUP_CONFIG))
        if key.synonyms:
            synonyms += broker_cfg.synonyms(key.synonyms[0])
        elif key.default is not None:
            synonyms.append(
                ConfigSynonym(name, key.to_text(key.default), ConfigSource.DEFAULT_CONFIG)
            )
        entries.append(_entry(name, key, value, synonyms, read_only=False))
    return entries


def broker_config_entries(broker_cfg: BrokerConfig) -> list[ConfigEntry]:
    """Every config of this broker, by name: known non-internal ones and all it was given."""
    names = {name for name, key in BROKER_CONFIGS.items() if not key.internal}
    names.update(broker_cfg.originals)
    entries = []
    for name in sorted(names):
        key = broker_key(name)
        known = BROKER_CONFIGS.get(name)
        value = known.to_text(broker_cfg.get(name)) if known else broker_cfg.originals[name]
        read_only = known is None or not known.dynamic
        entries.append(_entry(name, key, value, broker_cfg.synonyms(name), read_only=read_only))
    return entries


def default_broker_config_entries(
    broker_cfg: BrokerConfig, dynamic_default: Mapping[str, str]
) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (the broker entity named ""), by name.

    Only the values set at that level are listed, and only their synonyms at that level.
    """
    entries = []
    for name in sorted(dynamic_default):
        synonyms = [
            s
            for s in broker_cfg.synonyms(name)
            if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
        entries.append(
            _entry(name, broker_key(name), dynamic_default[name], synonyms, read_only=False)
        )
    return entries


def broker_key(name: str) -> ConfigKey | None:
    """The table entry that types broker config ``name``; a per-listener override
    (listener.name.NAME.x) is typed by x, as in Kafka's ``KafkaConfig.configType``."""
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name]
    for synonym in broker_config_synonyms(name):
        if synonym in BROKER_CONFIGS:
            return BROKER_CONFIGS[synonym]
    return None


def _entry(
    name: str,
    key: ConfigKey | None,
    value: str | None,
    synonyms: Sequence[ConfigSynonym],
    *,
    read_only: bool,
) -> ConfigEntry:
    sensitive = key is None or key.sensitive
    if sensitive:
        value = None
        synonyms = [s._replace(value=None) for s in synonyms]
    return ConfigEntry(
        name=name,
        value=value,
        source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        read_only=read_only,
        sensitive=sensitive,
        synonyms=tuple(synonyms),
        config_type=int(key.type) if key else UNKNOWN_TYPE,
        documentation=key.doc if key else None,
    )
