"""The Prometheus endpoint (``metrics.listeners``) of a real broker, scraped around a real
kafka-python producer and consumer: the figures match what was sent and read."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.brokers import BrokerFactory, ManagedBroker, selected_target
from tests.helpers.clients import KafkaPythonClient

SERVING = re.compile(r"metrics\.listeners: serving HTTP on (?P<url>http://\S+)")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

BATCHES = 3
PER_BATCH = 100
RECORDS = BATCHES * PER_BATCH
VALUE = b"v" * 200


pytestmark = pytest.mark.skipif(
    selected_target() == "kafka", reason="metrics.listeners is kpybroker's own"
)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory({"metrics.listeners": "http://127.0.0.1:0"})


def metrics_url(broker: ManagedBroker) -> str:
    """The endpoint, from the line the broker logs before it is ready (its last run's)."""
    matches = list(SERVING.finditer(broker.log_text()))
    assert matches, "no 'metrics.listeners: serving HTTP on' line"
    return matches[-1].group("url") + "/metrics"


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=30) as answer:
        text = answer.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def produce_in_batches(broker: ManagedBroker, topic: str) -> None:
    """``RECORDS`` records to partition 0, flushed ``PER_BATCH`` at a time."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", linger_ms=60_000, batch_size=1 << 20
    )
    try:
        for _ in range(BATCHES):
            for _ in range(PER_BATCH):
                producer.send(topic, VALUE, partition=0)
            producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)


@pytest.fixture
def consumer(broker: ManagedBroker) -> Iterator[object]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="watchers",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    yield consumer
    consumer.close()


def consume_all(consumer: object, topic: str) -> int:
    from kafka import TopicPartition

    consumer.assign([TopicPartition(topic, 0)])
    read = 0
    deadline = time.monotonic() + 60
    while read < RECORDS and time.monotonic() < deadline:
        read += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
    return read


def commit(consumer: object, topic: str, offset: int) -> None:
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})


def test_scrape_matches_what_was_produced_and_consumed(
    broker: ManagedBroker, consumer: object
) -> None:
    topic = "watched"
    KafkaPythonClient().create_topic(broker.bootstrap, topic, 1)
    url = metrics_url(broker)
    produce_in_batches(broker, topic)
    assert consume_all(consumer, topic) == RECORDS
    commit(consumer, topic, 120)

    during = scrape(url)
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(during, messages, topic=topic) == RECORDS
    assert value(during, messages) == RECORDS  # all topics: nothing else was produced
    log_size = value(during, "kafka_log_log_size", topic=topic, partition="0")
    bytes_in = value(during, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    # The batches are stored as they arrived: bytes in are the log's bytes.
    assert bytes_in == log_size
    assert RECORDS * len(VALUE) < bytes_in < RECORDS * (len(VALUE) + 100)
    stats = "kafka_server_brokertopicmetrics_"
    assert value(during, stats + "totalproducerequests_total", topic=topic) >= BATCHES
    assert value(during, stats + "failedproducerequests_total") == 0
    assert value(during, stats + "bytesout_total", topic=topic) >= log_size
    assert value(during, "kafka_log_log_logendoffset", topic=topic, partition="0") == RECORDS
    assert value(during, "kafka_log_log_logstartoffset", topic=topic, partition="0") == 0
    assert value(during, "kafka_log_log_numlogsegments", topic=topic, partition="0") == 1

    requests = {
        dict(labels)["request"]: count
        for (name, labels), count in during.items()
        if name == "kafka_network_requestmetrics_requests_total"
    }
    assert requests["Produce"] >= BATCHES
    assert requests["Fetch"] > 0
    assert requests["FetchConsumer"] == requests["Fetch"]  # no followers here
    produce_versions = [
        labels
        for (name, labels) in during
        if name == "kafka_network_requestmetrics_totaltimems_count"
        and dict(labels)["request"] == "Produce"
    ]
    assert sum(during[("kafka_network_requestmetrics_totaltimems_count", labels)]
               for labels in produce_versions) == requests["Produce"]  # fmt: skip

    group = {"consumergroup": "watchers", "topic": topic, "partition": "0"}
    assert value(during, "kafka_consumergroup_current_offset", **group) == 120
    assert value(during, "kafka_consumergroup_lag", **group) == RECORDS - 120
    connections = "kafka_server_socket_server_metrics_connection_count"
    assert value(during, connections, listener="PLAINTEXT") >= 1
    assert value(during, "kafka_server_replicamanager_leadercount") >= 1
    assert value(during, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(during, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(during, "kpybroker_event_loop_lag_seconds_count") >= 0

    commit(consumer, topic, RECORDS)
    after = scrape(url)
    assert value(after, "kafka_consumergroup_lag", **group) == 0


def test_openmetrics_when_asked(broker: ManagedBroker) -> None:
    request = urllib.request.Request(
        metrics_url(broker), headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        assert answer.read().decode().endswith("# EOF\n")


def test_a_stalled_http_client_does_not_hold_up_kafka_clients(broker: ManagedBroker) -> None:
    url = metrics_url(broker)
    host, port = url.removeprefix("http://").removesuffix("/metrics").rsplit(":", 1)
    silent = socket.create_connection((host, int(port)))
    stalled = socket.create_connection((host, int(port)))
    stalled.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # headers never end
    try:
        client = KafkaPythonClient()
        client.create_topic(broker.bootstrap, "meanwhile", 1)
        produce_in_batches(broker, "meanwhile")
        assert len(client.consume(broker.bootstrap, "meanwhile", {0: RECORDS})[0]) == RECORDS
        samples = scrape(url)
        name = "kafka_server_brokertopicmetrics_messagesin_total"
        assert value(samples, name, topic="meanwhile") == RECORDS
    finally:
        silent.close()
        stalled.close()
