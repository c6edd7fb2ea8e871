"""Topic configs changed at run time take effect at once, and dynamic broker configs
survive a restart (they live in the metadata store)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from kpybroker.protocol.records import iter_batches
from tests.helpers.brokers import BrokerFactory, ManagedBroker

pytestmark = pytest.mark.timeout(120)


def admin_for(broker: ManagedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker: ManagedBroker, topic: str, **configs: str) -> None:
    admin = admin_for(broker)
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def set_configs(broker: ManagedBroker, kind: str, name: str, **configs: str) -> None:
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()
    ]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin = admin_for(broker)  # kept alive until the result is in
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(broker: ManagedBroker, topic: str, value: bytes, **options: object) -> Message:
    """Send one record and return its delivery report (error included)."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 10000}
        | {k.replace("_", "."): v for k, v in options.items() if k != "timestamp"}
    )
    reports: list[Message] = []
    producer.produce(
        topic,
        value,
        timestamp=int(options.get("timestamp", 0)),
        on_delivery=lambda _err, msg: reports.append(msg),
    )
    producer.flush(15)
    return reports[0]


def consume_all(broker: ManagedBroker, topic: str, count: int) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[Message] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message)
    consumer.close()
    return got


def test_max_message_bytes_applies_at_once(module_broker: ManagedBroker) -> None:
    create(module_broker, "cfg-size")
    assert produce(module_broker, "cfg-size", b"x" * 5000).error() is None
    set_configs(module_broker, "TOPIC", "cfg-size", max_message_bytes="1000")
    error = produce(module_broker, "cfg-size", b"x" * 5000).error()
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_log_append_time_stamps_batches(module_broker: ManagedBroker) -> None:
    create(module_broker, "cfg-lat")
    set_configs(module_broker, "TOPIC", "cfg-lat", message_timestamp_type="LogAppendTime")
    before = int(time.time() * 1000)
    assert produce(module_broker, "cfg-lat", b"v", timestamp=1_000).error() is None
    (message,) = consume_all(module_broker, "cfg-lat", 1)  # the client checks the new CRC
    kind, stamp = message.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= stamp <= time.time() * 1000


def test_timestamp_bounds_apply_at_once(module_broker: ManagedBroker) -> None:
    create(module_broker, "cfg-future")
    future = int(time.time() * 1000) + 3_600_000
    assert produce(module_broker, "cfg-future", b"v", timestamp=future - 600_000).error() is None
    set_configs(module_broker, "TOPIC", "cfg-future", message_timestamp_after_max_ms="1000")
    error = produce(module_broker, "cfg-future", b"v", timestamp=future).error()
    assert error is not None and error.code() == KafkaError.INVALID_TIMESTAMP


def test_min_insync_replicas_applies_at_once(module_broker: ManagedBroker) -> None:
    create(module_broker, "cfg-isr")
    set_configs(module_broker, "TOPIC", "cfg-isr", min_insync_replicas="2")
    error = produce(module_broker, "cfg-isr", b"v", acks="all", retries=0).error()
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert produce(module_broker, "cfg-isr", b"v", acks=1).error() is None


def test_segment_bytes_rolls_segments(module_broker: ManagedBroker) -> None:
    create(module_broker, "cfg-segments")
    set_configs(module_broker, "TOPIC", "cfg-segments", segment_bytes="1000")
    for _ in range(3):
        assert produce(module_broker, "cfg-segments", b"x" * 600).error() is None
    segments = list((module_broker.log_dir / "cfg-segments-0").glob("*.log"))
    assert len(segments) == 3


def test_compression_type_recompresses(module_broker: ManagedBroker) -> None:
    create(module_broker, "cfg-gzip", **{"compression.type": "gzip"})
    values = [f"value {i} ".encode() * 20 for i in range(50)]
    producer = Producer({"bootstrap.servers": module_broker.bootstrap, "compression.type": "lz4"})
    for value in values:
        producer.produce("cfg-gzip", value)
    assert producer.flush(15) == 0
    data = b"".join(p.read_bytes() for p in (module_broker.log_dir / "cfg-gzip-0").glob("*.log"))
    codecs = {header.compression for _, header in iter_batches(data)}
    assert codecs == {1}  # gzip, not the producer's lz4
    assert [m.value() for m in consume_all(module_broker, "cfg-gzip", 50)] == values


def test_dynamic_broker_configs_survive_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create(broker, "cfg-restart")
    set_configs(broker, "BROKER", "0", log_retention_ms="123456")
    broker.restart()
    admin = admin_for(broker)
    resource = ConfigResource("BROKER", "0")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["log.retention.ms"].value == "123456"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    topic = ConfigResource("TOPIC", "cfg-restart")
    topic_configs = admin.describe_configs([topic])[topic].result(30)
    assert topic_configs["retention.ms"].value == "123456"
    with pytest.raises(KafkaException):  # and a refused value changes nothing
        set_configs(broker, "BROKER", "0", log_retention_ms="-5x")
