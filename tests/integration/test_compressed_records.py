"""Compressed batches have their records checked on every topic, as Kafka's leader does.

Under compression.type=producer (the default) a compressed batch used to be stored as
it came: a decompression bomb or records that disagree with the batch header were
accepted and inflated in the consumers. Now each is INVALID_RECORD, Kafka 4.4's answer
to the same bytes (checked with ``KPYBROKER_TEST_TARGET=kafka``, except where a test
says otherwise), and valid batches of every codec still go through.
"""

from __future__ import annotations

import pytest

from kpybroker.protocol import compression
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    NewRecord,
    Record,
    build_batch,
    build_retained_batch,
    parse_header,
)
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import KafkaPythonClient
from tests.helpers.fuzz.batches import BOMB_COPIES, assemble, bomb
from tests.helpers.process import rss_bytes
from tests.helpers.records import make_records, verify_roundtrip
from tests.helpers.wire import RawConnection

pytestmark = pytest.mark.timeout(300)

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: A resource bound, not a timing one: the broker idles at about 100 MiB, a bomb inflates
#: to a gibibyte.
RSS_BOUND = 1024 * 1024 * 1024
#: Records whose decompressed section (about 1.2 MiB) is checked in a worker thread.
MANY = 12000


def produce(broker: ManagedBroker, topic: str, batch: bytes) -> PartitionProduceResponse:
    """Produce ``batch`` to partition 0 of ``topic`` (v11, acks=all); the partition's answer."""
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(0, batch)])],
    )
    with RawConnection(broker.bootstrap, timeout=60) as conn:
        conn.send(encode_request(request, 11, 1, "compressed-records"))
        _, response = decode_response(conn.recv_frame(), request, 11)
    [partition] = response.responses[0].partition_responses
    return partition


def records(count: int, value_size: int = 8) -> list[NewRecord]:
    return [NewRecord(b"k%d" % i, bytes(value_size), (), 0) for i in range(count)]


def section(batch_records: list[NewRecord], deltas: list[int] | None = None) -> bytes:
    """The uncompressed records section of ``batch_records``, with ``deltas`` as offset
    deltas (0, 1, 2... by default)."""
    batch = build_batch(batch_records, timestamp=0)
    if deltas is not None:
        moved = [
            Record(d, 0, r.key, r.value, r.headers)
            for d, r in zip(deltas, batch_records, strict=True)
        ]
        batch = build_retained_batch(parse_header(batch), moved)
    return batch[BATCH_HEADER_SIZE:]


def snappy_bomb() -> bytes:
    """16 MiB of zeros in xerial snappy (about 800 KB): under the decompression bound,
    since snappy cannot compress more than about 21:1, but no records."""
    return assemble(compression.compress(compression.SNAPPY, bytes(16 << 20)), 2, 1)


@pytest.fixture(scope="module")
def topic(module_broker: ManagedBroker) -> str:
    """A topic with the default compression.type=producer."""
    KafkaPythonClient().create_topic(module_broker.bootstrap, "as-produced", 1)
    return "as-produced"


def assert_serves(broker: ManagedBroker) -> None:
    """The broker is alive, its memory bounded, and kafka-python still round-trips."""
    broker.check_alive()
    if broker.process is not None and broker.kind != "kafka":
        assert rss_bytes(broker.process.pid) < RSS_BOUND
    client = KafkaPythonClient()
    client.create_topic(broker.bootstrap, "after-bombs", 1)
    sent = make_records(10, 1)
    client.produce(broker.bootstrap, "after-bombs", sent, codec="lz4").raise_for_errors(10)
    verify_roundtrip(sent, 1, client.consume(broker.bootstrap, "after-bombs", {0: 10}))


def test_bombs_of_every_codec_are_invalid_record(module_broker: ManagedBroker, topic: str) -> None:
    """Under a megabyte each; gzip, zstd and lz4 inflate far past the bound, snappy to 16 MiB
    of zeros that are no records. (Kafka 4.4 fails on the lz4 bomb, 200 concatenated
    frames, with UNKNOWN_SERVER_ERROR.)"""
    bombs = {name: bomb(codec) for name, codec in CODECS.items() if codec in BOMB_COPIES}
    bombs["snappy"] = snappy_bomb()
    answers = {name: produce(module_broker, topic, data).error_code for name, data in bombs.items()}
    expected = dict.fromkeys(bombs, ErrorCode.INVALID_RECORD)
    if module_broker.kind == "kafka":
        expected["lz4"] = ErrorCode.UNKNOWN_SERVER_ERROR
    assert answers == expected
    assert_serves(module_broker)


def gzip_batch(payload: bytes, count: int) -> bytes:
    return assemble(compression.compress(compression.GZIP, payload), compression.GZIP, count)


INCONSISTENT = {
    "more records than counted": gzip_batch(section(records(3)), 2),
    "fewer records than counted": gzip_batch(section(records(3)), 4),
    "bytes after the records": gzip_batch(section(records(3)) + b"\x00\x01", 3),
    "fewer records than counted, checked in a thread": gzip_batch(section(records(MANY)), MANY + 1),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_inconsistent_compressed_batches_are_invalid_record(
    module_broker: ManagedBroker, topic: str, case: str
) -> None:
    answer = produce(module_broker, topic, INCONSISTENT[case])
    assert (answer.error_code, answer.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert answer.record_errors == []  # as Kafka: a broken batch has no record errors


def test_a_last_record_longer_than_the_data_is_invalid_record(
    module_broker: ManagedBroker, topic: str
) -> None:
    """Kafka 4.4 stores this batch: the iterator it validates with skips over the missing
    end of the last record. kpybroker refuses it, since the record does not fit the batch."""
    answer = produce(module_broker, topic, gzip_batch(b"\x40" + section(records(1))[1:], 1))
    kafka = module_broker.kind == "kafka"
    assert answer.error_code == (ErrorCode.NONE if kafka else ErrorCode.INVALID_RECORD)


@pytest.mark.parametrize("deltas", [[0, 2, 1], [0, 5, 9]])
def test_offset_deltas_other_than_0_1_2_are_invalid_record(
    module_broker: ManagedBroker, topic: str, deltas: list[int]
) -> None:
    """Kafka 4.4 sets out to rewrite such a batch and fails, answering UNKNOWN_SERVER_ERROR;
    kpybroker refuses it as the inconsistent batch it is."""
    answer = produce(module_broker, topic, gzip_batch(section(records(3), deltas), 3))
    expected = ErrorCode.UNKNOWN_SERVER_ERROR if module_broker.kind == "kafka" else None
    assert answer.error_code == (expected or ErrorCode.INVALID_RECORD)


def test_max_decompressed_message_bytes_bounds_each_compressed_record(
    module_broker: ManagedBroker,
) -> None:
    """A record over the topic's bound is refused in a compressed batch; an uncompressed
    batch is not decompressed and not checked, as in Kafka."""
    KafkaPythonClient().create_topic(
        module_broker.bootstrap, "small-records", 1, {"max.decompressed.message.bytes": "1000"}
    )
    big = section(records(1, value_size=5000))
    refused = produce(module_broker, "small-records", gzip_batch(big, 1))
    assert refused.error_code == ErrorCode.INVALID_RECORD
    accepted = produce(module_broker, "small-records", assemble(big, 0, 1))
    assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 0)


def test_the_broker_setting_is_the_topics_default(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"max.decompressed.message.bytes": 1000})
    KafkaPythonClient().create_topic(broker.bootstrap, "small-by-default", 1)
    big = gzip_batch(section(records(1, value_size=5000)), 1)
    assert produce(broker, "small-by-default", big).error_code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_kafka_python_batches_of_every_codec_are_accepted(
    module_broker: ManagedBroker, codec: str
) -> None:
    """Keys, null keys and values, headers and values of every size, as kafka-python
    batches and compresses them."""
    client = KafkaPythonClient()
    name = f"from-kafka-python-{codec}"
    client.create_topic(module_broker.bootstrap, name, 1)
    sent = make_records(300, 1)
    report = client.produce(module_broker.bootstrap, name, sent, codec=codec)
    report.raise_for_errors(len(sent))
    verify_roundtrip(sent, 1, client.consume(module_broker.bootstrap, name, {0: len(sent)}), report)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_large_valid_batch_is_checked_in_a_thread_and_stored(
    module_broker: ManagedBroker, codec: str
) -> None:
    """A batch whose records decompress past what is checked on the event loop."""
    client = KafkaPythonClient()
    name = f"large-{codec}"
    client.create_topic(module_broker.bootstrap, name, 1)
    batch = build_batch(records(MANY, value_size=90), compression=CODECS[codec])
    answer = produce(module_broker, name, batch)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
    consumed = client.consume(module_broker.bootstrap, name, {0: MANY})[0]
    assert [r.key for r in consumed] == [b"k%d" % i for i in range(MANY)]
