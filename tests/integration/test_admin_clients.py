"""The AdminClients of confluent-kafka and kafka-python against the config and partition APIs:
describe, alter, and the errors a user meets (an unknown topic, an invalid config, fewer
partitions)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.errors import InvalidPartitionsError, UnknownTopicOrPartitionError

from tests.helpers.brokers import ManagedBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def admin(module_broker: ManagedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": module_broker.bootstrap})


def create(admin: AdminClient, name: str, partitions: int = 1, **configs: str) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def describe(admin: AdminClient, kind: str, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(30)


def alter(admin: AdminClient, kind: str, name: str, **changes: str | None) -> None:
    entries = [
        ConfigEntry(
            key.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for key, value in changes.items()
    ]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def error_of(excinfo: pytest.ExceptionInfo[KafkaException]) -> KafkaError:
    return excinfo.value.args[0]


def test_confluent_describe_and_alter_topic_configs(admin: AdminClient) -> None:
    create(admin, "adm-describe", **{"cleanup.policy": "compact"})
    configs = describe(admin, "TOPIC", "adm-describe")
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    alter(admin, "TOPIC", "adm-describe", retention_ms="60000", cleanup_policy=None)
    configs = describe(admin, "TOPIC", "adm-describe")
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_confluent_errors_name_the_problem(admin: AdminClient) -> None:
    create(admin, "adm-errors", partitions=3)
    with pytest.raises(KafkaException) as unknown:
        describe(admin, "TOPIC", "adm-no-such-topic")
    assert error_of(unknown).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    with pytest.raises(KafkaException) as bad_name:
        alter(admin, "TOPIC", "adm-errors", retention_mss="1")
    assert error_of(bad_name).code() == KafkaError.INVALID_CONFIG
    assert "retention.mss" in error_of(bad_name).str()

    with pytest.raises(KafkaException) as bad_value:
        alter(admin, "TOPIC", "adm-errors", max_message_bytes="lots")
    assert error_of(bad_value).code() == KafkaError.INVALID_CONFIG
    assert "max.message.bytes" in error_of(bad_value).str()

    with pytest.raises(KafkaException) as decrease:
        admin.create_partitions([NewPartitions("adm-errors", 2)])["adm-errors"].result(30)
    assert error_of(decrease).code() == KafkaError.INVALID_PARTITIONS
    assert "would not be an increase" in error_of(decrease).str()


def test_confluent_create_partitions_and_describe_topics(admin: AdminClient) -> None:
    create(admin, "adm-grow", partitions=2)
    admin.create_partitions([NewPartitions("adm-grow", 5)])["adm-grow"].result(30)
    description = admin.describe_topics(TopicCollection(["adm-grow"]))["adm-grow"].result(30)
    assert [p.id for p in description.partitions] == [0, 1, 2, 3, 4]
    assert all(p.leader is not None and p.leader.id == 0 for p in description.partitions)
    cluster = admin.describe_cluster().result(30)
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0


def test_confluent_broker_configs(admin: AdminClient) -> None:
    configs = describe(admin, "BROKER", "0")
    assert configs["log.dirs"].is_read_only
    assert configs["log.retention.hours"].value == "168"
    assert not configs["log.retention.bytes"].is_read_only
    with pytest.raises(KafkaException) as static:
        alter(admin, "BROKER", "0", log_dirs="/elsewhere")
    assert error_of(static).code() == KafkaError.INVALID_CONFIG
    assert "log.dirs" in error_of(static).str()


def test_kafka_python_admin(module_broker: ManagedBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        admin.create_topics([_kp_topic("adm-kp")])
        topic = KpConfigResource(ConfigResourceType.TOPIC, "adm-kp")
        admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "adm-kp", configs={"segment.ms": "1000"})]
        )
        described = admin.describe_configs([topic])["topic"]["adm-kp"]
        assert described["segment.ms"]["value"] == "1000"
        assert described["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        refused = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "adm-kp", configs={"nope": "1"})],
            raise_on_unknown=False,  # let the broker judge, not the client
        )
        assert "Unknown topic config name: nope" in str(refused["topic"]["adm-kp"])

        admin.create_partitions({"adm-kp": KpNewPartitions(3)})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"adm-kp": KpNewPartitions(2)})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions({"adm-kp-missing": KpNewPartitions(2)})

        (log_dirs,) = admin.describe_log_dirs()
        partitions = {
            (t["name"], p["partition_index"])
            for d in log_dirs["log_dirs"]
            for t in d["topics"]
            for p in t["partitions"]
        }
        assert {("adm-kp", 0), ("adm-kp", 1), ("adm-kp", 2)} <= partitions

        listed = admin.list_config_resources()  # ListConfigResources v1, every type
        assert "adm-kp" in listed["topic"] and len(listed["broker"]) == 1  # this broker
        assert admin.list_config_resources(["TOPIC"]) == {"topic": listed["topic"]}
    finally:
        admin.close()


def _kp_topic(name: str):  # -> kafka.admin.NewTopic
    from kafka.admin import NewTopic as KpNewTopic

    return KpNewTopic(name, num_partitions=1, replication_factor=1)
