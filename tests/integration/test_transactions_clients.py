"""Transactional producers and read_committed consumers, with real clients.

librdkafka (confluent-kafka) and kafka-python producers with a
``transactional.id`` commit and abort transactions over several partitions;
read_committed consumers see exactly the committed records, read_uncommitted
ones everything; an open transaction holds read_committed consumers back at
its first offset (the last stable offset) until it ends; a second producer
with the same id fences the first; a transaction open when the broker is
killed is aborted by its timeout after the restart, and what was committed
before the kill is still there. Passes against Apache Kafka too
(``KPYBROKER_TEST_TARGET=kafka``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.reading import read_to_end

PARTITIONS = 3
FAST_TIMEOUTS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    "transaction.state.log.num.partitions": 5,
}


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def transactional_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, isolation: str, *, timeout: float = 20.0) -> list[str]:
    """Every record value of ``topic`` up to the end its consumer can see, in offset order."""
    return [r.value for r in read_to_end(bootstrap, topic, PARTITIONS, isolation, timeout=timeout)]


@pytest.fixture
def txn_broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory(FAST_TIMEOUTS)


@pytest.fixture
def topic(txn_broker: ManagedBroker) -> Iterator[str]:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(txn_broker.bootstrap, name)
    yield name


def test_committed_and_aborted_transactions(txn_broker: ManagedBroker, topic: str) -> None:
    bootstrap = txn_broker.bootstrap
    producer = transactional_producer(bootstrap, "txn-commit-abort")
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=f"committed-{i}", partition=i % PARTITIONS)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(12):
        producer.produce(topic, value=f"aborted-{i}", partition=i % PARTITIONS)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value="committed-last", partition=0)
    producer.commit_transaction(30)

    committed = sorted(read_all(bootstrap, topic, "read_committed"))
    assert committed == sorted([f"committed-{i}" for i in range(30)] + ["committed-last"])
    everything = read_all(bootstrap, topic, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [f"aborted-{i}" for i in range(12)])


def test_open_transaction_holds_read_committed_back(txn_broker: ManagedBroker, topic: str) -> None:
    bootstrap = txn_broker.bootstrap
    producer = transactional_producer(bootstrap, "txn-open")
    plain = Producer({"bootstrap.servers": bootstrap})
    producer.begin_transaction()
    producer.produce(topic, value="in-transaction", partition=0)
    producer.flush(30)
    # Written after the transaction's first offset: not visible to read_committed until it ends.
    plain.produce(topic, value="after", partition=0)
    plain.flush(30)
    assert read_all(bootstrap, topic, "read_committed") == []
    assert read_all(bootstrap, topic, "read_uncommitted") == ["in-transaction", "after"]
    producer.commit_transaction(30)
    assert read_all(bootstrap, topic, "read_committed") == ["in-transaction", "after"]


def test_second_producer_fences_the_first(txn_broker: ManagedBroker, topic: str) -> None:
    bootstrap = txn_broker.bootstrap
    first = transactional_producer(bootstrap, "txn-zombie")
    first.begin_transaction()
    first.produce(topic, value="zombie", partition=0)
    first.flush(30)
    second = transactional_producer(bootstrap, "txn-zombie")  # aborts the open transaction
    second.begin_transaction()
    second.produce(topic, value="successor", partition=1)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or raised.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    assert read_all(bootstrap, topic, "read_committed") == ["successor"]


def test_kafka_python_transactions(txn_broker: ManagedBroker, topic: str) -> None:
    bootstrap = txn_broker.bootstrap
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="txn-kafka-python")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(6):
            producer.send(topic, value=f"kp-committed-{i}".encode(), partition=i % PARTITIONS)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"kp-aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    try:
        seen = sorted(record.value.decode() for record in consumer)
    finally:
        consumer.close()
    assert seen == sorted(f"kp-committed-{i}" for i in range(6))


def test_open_transaction_is_aborted_after_a_kill(txn_broker: ManagedBroker, topic: str) -> None:
    bootstrap = txn_broker.bootstrap
    producer = transactional_producer(bootstrap, "txn-killed", **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    producer.produce(topic, value="before-kill", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value="open-at-kill", partition=0)
    producer.flush(30)
    txn_broker.kill()
    txn_broker.restart()
    # The coordinator reloads the open transaction and aborts it once its timeout passes.
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value="after-restart", partition=0)
    assert plain.flush(60) == 0
    deadline = time.monotonic() + 60
    seen: list[str] = []
    while time.monotonic() < deadline:
        seen = read_all(bootstrap, topic, "read_committed", timeout=10)
        if "after-restart" in seen:
            break
    assert seen == ["before-kill", "after-restart"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(
    txn_broker: ManagedBroker,
) -> None:
    """The exactly-once loop: read, write, and commit the consumed offsets in one transaction.

    The first run processes half the input and aborts its last transaction; a second
    run with the same group and transactional id resumes from the committed offsets.
    Every input record is in the output exactly once, and the group's committed
    offsets are the input's end.
    """
    bootstrap = txn_broker.bootstrap
    source, sink = f"src-{uuid.uuid4().hex[:6]}", f"dst-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, source)
    create_topic(bootstrap, sink)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(300):
        plain.produce(source, value=f"in-{i}", partition=i % PARTITIONS)
    assert plain.flush(30) == 0

    def run(limit: int, abort_last: bool) -> int:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "ctp",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        producer = transactional_producer(bootstrap, "ctp-app")
        consumer.subscribe([source])
        done = 0
        try:
            deadline = time.monotonic() + 60
            while done < limit and time.monotonic() < deadline:
                batch = consumer.consume(20, 1.0)
                if not batch:
                    continue
                producer.begin_transaction()
                for message in batch:
                    assert message.error() is None, message.error()
                    producer.produce(sink, value=message.value().decode().replace("in", "out"))
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
                )
                last = done + len(batch) >= limit
                if last and abort_last:
                    producer.abort_transaction(30)
                    return done
                producer.commit_transaction(30)
                done += len(batch)
            return done
        finally:
            consumer.close()

    first = run(150, abort_last=True)
    assert 0 < first < 300
    run(300 - first, abort_last=False)
    out = read_all(bootstrap, sink, "read_committed")
    assert sorted(out) == sorted(f"out-{i}" for i in range(300))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("ctp")])
    committed = offsets["ctp"].result(30).topic_partitions
    assert sum(tp.offset for tp in committed) == 300
