"""Every broker, topic and group config kpybroker knows, under Kafka's names and defaults.

The tables (``BROKER_CONFIGS``, ``TOPIC_CONFIGS``, ``GROUP_CONFIGS``) are the single source
the broker, DescribeConfigs and the generated docs read. ``BrokerConfig`` is the broker's
typed configuration; the topic and group functions derive a topic's or a group's effective
config from it.
"""

from kpybroker.config.broker_config import (
    SECURITY_PROTOCOLS,
    BrokerConfig,
    ConfigSynonym,
    Listener,
    broker_config_synonyms,
)
from kpybroker.config.broker_table import BROKER_CONFIGS
from kpybroker.config.core import (
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigType,
    Importance,
    Password,
    UpdateMode,
    Validator,
)
from kpybroker.config.group import group_defaults, parse_group_configs, validate_group_configs
from kpybroker.config.group_table import GROUP_CONFIGS
from kpybroker.config.properties import (
    PropertiesFormatError,
    format_properties,
    parse_override,
    parse_properties,
    read_properties,
)
from kpybroker.config.topic import (
    effective_topic_config,
    topic_config_source,
    topic_config_synonyms,
    topic_defaults,
    validate_topic_configs,
)
from kpybroker.config.topic_table import TOPIC_CONFIGS

__all__ = [
    "BROKER_CONFIGS",
    "GROUP_CONFIGS",
    "SECURITY_PROTOCOLS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Importance",
    "Listener",
    "Password",
    "PropertiesFormatError",
    "UpdateMode",
    "Validator",
    "broker_config_synonyms",
    "effective_topic_config",
    "format_properties",
    "group_defaults",
    "parse_group_configs",
    "parse_override",
    "parse_properties",
    "read_properties",
    "topic_config_source",
    "topic_config_synonyms",
    "topic_defaults",
    "validate_group_configs",
    "validate_topic_configs",
]
