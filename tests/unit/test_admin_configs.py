"""The config APIs' rules without a broker: describe entries, alter plans, preprocessing."""

from __future__ import annotations

import pytest

from kpybroker.apis.support.config_changes import (
    ConfigOp,
    OpType,
    check_resources,
    new_configs,
    unknown_operation,
)
from kpybroker.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigError, ConfigSource
from kpybroker.config.describe import (
    UNKNOWN_TYPE,
    broker_config_entries,
    default_broker_config_entries,
    topic_config_entries,
)
from kpybroker.protocol.errors import ErrorCode


def by_name(entries):
    return {e.name: e for e in entries}


def test_topic_entries_list_every_config_with_source_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.ms": "5000"})
    entries = by_name(topic_config_entries(broker, {"cleanup.policy": "compact"}))
    assert set(entries) == set(TOPIC_CONFIGS)
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source) == ("compact", ConfigSource.TOPIC_CONFIG)
    assert [s.source for s in policy.synonyms] == [
        ConfigSource.TOPIC_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
    assert retention.synonyms[0].name == "log.retention.ms"
    assert entries["segment.bytes"].source is ConfigSource.DEFAULT_CONFIG
    assert not entries["segment.bytes"].read_only
    assert entries["segment.bytes"].config_type == 3  # INT
    assert entries["segment.bytes"].documentation


def test_broker_entries_include_unknown_static_keys_as_sensitive() -> None:
    broker = BrokerConfig({"custom.plugin.setting": "x", "num.partitions": "3"})
    entries = by_name(broker_config_entries(broker))
    unknown = entries["custom.plugin.setting"]
    assert unknown.value is None and unknown.sensitive and unknown.config_type == UNKNOWN_TYPE
    assert unknown.read_only
    partitions = entries["num.partitions"]
    assert (partitions.value, partitions.source) == ("3", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["log.dirs"].read_only
    assert not entries["log.retention.ms"].read_only  # dynamic in Kafka
    assert not any(BROKER_CONFIGS[n].internal for n in entries if n in BROKER_CONFIGS)


def test_default_entity_lists_only_its_dynamic_values() -> None:
    broker = BrokerConfig().with_dynamic(dynamic_default={"log.retention.bytes": "100"})
    (entry,) = default_broker_config_entries(broker, {"log.retention.bytes": "100"})
    assert entry.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [s.source for s in entry.synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]


def test_incremental_operations() -> None:
    current = {"retention.ms": "1", "cleanup.policy": "delete"}
    ops = [
        ConfigOp("retention.ms", OpType.DELETE, None),
        ConfigOp("cleanup.policy", OpType.APPEND, "compact,delete"),
        ConfigOp("segment.ms", OpType.SET, "100"),
    ]
    assert new_configs(current, ops, TOPIC_CONFIGS.get) == {
        "cleanup.policy": "delete,compact",
        "segment.ms": "100",
    }
    subtract = [ConfigOp("cleanup.policy", OpType.SUBTRACT, "delete")]
    assert new_configs({}, subtract, TOPIC_CONFIGS.get) == {"cleanup.policy": ""}


def test_append_to_a_non_list_config_names_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        new_configs({}, [ConfigOp("retention.ms", OpType.APPEND, "1")], TOPIC_CONFIGS.get)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in info.value.message


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([ConfigOp("a", 0, "1"), ConfigOp("a", 0, "2")], "Error due to duplicate config keys"),
        ([ConfigOp("a", OpType.SET, None)], "Null value not supported for : a"),
        ([ConfigOp("a", 9, None)], "Null value not supported for : a"),
    ],
)
def test_preprocessing_refuses_malformed_resources(ops, message) -> None:
    (error,) = check_resources([(2, "t", ops)])
    assert error is not None and error.code == ErrorCode.INVALID_REQUEST
    assert error.message == message


def test_an_unknown_operation_is_refused_after_preprocessing() -> None:
    assert check_resources([(2, "t", [ConfigOp("a", 9, "1")])]) == [None]
    error = unknown_operation([ConfigOp("a", OpType.SET, "1"), ConfigOp("b", 9, "1")])
    assert error is not None and error.code == ErrorCode.INVALID_REQUEST
    assert error.message == "Unknown operations type 9"


def test_a_resource_named_twice_fails_both_times() -> None:
    errors = check_resources([(2, "t", []), (2, "t", []), (4, "0", [])])
    assert [e.message if e else None for e in errors] == [
        "Each resource must appear at most once.",
        "Each resource must appear at most once.",
        None,
    ]
