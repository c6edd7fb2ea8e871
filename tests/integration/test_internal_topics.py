"""__consumer_offsets is the coordinator's: clients cannot write it, and asking
for it by name creates it the coordinator's way."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.helpers.brokers import ManagedBroker

OFFSETS = "__consumer_offsets"


@pytest.mark.timeout(60)
def test_clients_cannot_append_to_the_offsets_topic(broker: ManagedBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10_000})
    errors = []
    producer.produce(OFFSETS, b"x", partition=0, on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION


@pytest.mark.timeout(60)
def test_auto_creating_the_offsets_topic_uses_the_coordinators_settings(
    broker: ManagedBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # A producer's metadata request may auto-create topics; ask for the internal one.
    Producer({"bootstrap.servers": broker.bootstrap}).list_topics(OFFSETS, timeout=20)
    topic = admin.list_topics(OFFSETS, timeout=20).topics[OFFSETS]
    assert len(topic.partitions) == 50
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS)
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    assert configs["cleanup.policy"].value == "compact"
