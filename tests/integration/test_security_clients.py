"""Stock clients over TLS and SASL, with ACLs on: what an operator of a secured Kafka sees.

One secured broker (``tests/helpers/secure_broker.py``) serves the module; ``admin`` (a super
user, PLAIN) adds SCRAM users and ACLs with the admin APIs, then confluent-kafka (librdkafka)
and kafka-python connect as the users would, with each mechanism and over each listener.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.brokers import ManagedBroker
from tests.helpers.secure_broker import USERS, Credentials
from tests.helpers.secure_clients import confluent_config, grant, new_topic, running_secure_broker


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Credentials:
    return Credentials(tmp_path_factory.mktemp("credentials"))


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> Iterator[ManagedBroker]:
    with running_secure_broker(tmp_path_factory.mktemp("secured"), credentials) as broker:
        yield broker


def round_trip(config: dict[str, Any], topic: str, group: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` and read them back in group ``group``; the values read."""
    from confluent_kafka import Consumer, Producer

    producer = Producer(config)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer(config | {"group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is None:
                if len(read) >= len(values):
                    break
                continue
            assert message.error() is None, message.error()
            read.append(message.value())
    finally:
        consumer.close()
    return read


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
        ("SSL", "mutual TLS"),
    ],
)
def test_confluent_kafka_round_trip(
    secured: ManagedBroker, credentials: Credentials, listener: str, mechanism: str
) -> None:
    topic = new_topic(secured)
    group = f"group-{uuid.uuid4().hex[:6]}"
    grant(secured, "alice", topic, "WRITE", "READ", group=group)
    config = confluent_config(secured, credentials, listener, "alice", mechanism)
    values = [f"{listener}-{i}".encode() for i in range(20)]
    assert round_trip(config, topic, group, values) == values


def test_kafka_python_with_scram_and_with_a_client_certificate(
    secured: ManagedBroker, credentials: Credentials, tmp_path: Path
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = new_topic(secured)
    grant(secured, "alice", topic, "WRITE", "READ")
    scram = {
        "bootstrap_servers": secured.bootstrap_for("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(credentials.ca_pem),
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
    }
    files = credentials.client("alice")
    mutual = {
        "bootstrap_servers": secured.bootstrap_for("SSL"),
        "security_protocol": "SSL",
        "ssl_cafile": str(credentials.ca_pem),
        "ssl_certfile": str(files.chain_pem),
        "ssl_keyfile": str(files.key_pem),
    }
    for settings, value in ((scram, b"scram"), (mutual, b"mutual")):
        producer = KafkaProducer(**settings)
        producer.send(topic, value).get(30)
        producer.close()
    consumer = KafkaConsumer(
        topic, **mutual, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    try:
        assert [m.value for m in consumer][:2] == [b"scram", b"mutual"]
    finally:
        consumer.close()


def test_a_wrong_password_is_refused_with_kafkas_error(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    """librdkafka reports the broker's SASL_AUTHENTICATION_FAILED message as an
    authentication error (and, as against Kafka, keeps retrying)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    for mechanism, message in (
        ("PLAIN", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-256",
        ),
    ):
        errors: list[Any] = []
        config = confluent_config(secured, credentials, "SASL_PLAINTEXT", "alice", mechanism)
        admin = AdminClient(config | {"sasl.password": "wrong", "error_cb": errors.append})
        admin.poll(3)
        refusals = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        assert refusals and message in refusals[0].str(), errors


def test_without_acls_a_user_sees_no_topic_and_may_not_write(
    secured: ManagedBroker, credentials: Credentials
) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient

    topic = new_topic(secured)
    config = confluent_config(secured, credentials, "SASL_PLAINTEXT", "bob", "SCRAM-SHA-512")
    assert topic not in AdminClient(config).list_topics(timeout=10).topics
    errors: list[Any] = []
    producer = Producer(config | {"message.timeout.ms": 10_000})
    producer.produce(topic, b"x", on_delivery=lambda err, _: errors.append(err))
    producer.flush(20)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
