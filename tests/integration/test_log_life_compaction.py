"""Log compaction against a real broker process, checked offset by offset.

One broker serves the module with the cleaner backing off 100 ms. Records go
one per batch with 2-byte keys and 3-byte values (tombstones excepted), and
``segment.bytes`` holds exactly four such batches, so which offsets survive a
round is known exactly: the newest record of each key below the active
segment, at its original offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kpybroker.protocol.records import iter_batches
from tests.helpers.brokers import ManagedBroker, launcher
from tests.helpers.clients import ConfluentClient
from tests.helpers.log_life import (
    FAST_LOG_TASKS,
    batch_size,
    consume_all,
    create_topic,
    offsets_of,
    produce_each,
    wait_until,
)
from tests.helpers.wire import RawConnection, produce_request, record_batch

SIZE = batch_size(b"k0", b"v00")
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": 4 * SIZE,
    "min.cleanable.dirty.ratio": 0.01,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedBroker]:
    with launcher(tmp_path_factory.mktemp("compaction")) as brokers:
        yield brokers(FAST_LOG_TASKS)


def versions(count: int, keys: int = 3, first: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i % keys}".encode(), f"v{i:02d}".encode()) for i in range(first, first + count)]


def wait_for_offsets(broker: ManagedBroker, topic: str, expected: list[int]) -> None:
    wait_until(
        lambda: offsets_of(consume_all(broker.bootstrap, topic)) == expected,
        f"{topic} compacted to offsets {expected}",
    )


def test_the_newest_record_of_each_key_stays_at_its_offset(broker) -> None:
    create_topic(broker.bootstrap, "newest", COMPACTED)
    produce_each(broker.bootstrap, "newest", versions(20))  # [0-3]..[12-15], active [16-19]
    wait_for_offsets(broker, "newest", [13, 14, 15, 16, 17, 18, 19])
    assert consume_all(broker.bootstrap, "newest")[:3] == [
        (13, (b"k1", b"v13")),
        (14, (b"k2", b"v14")),
        (15, (b"k0", b"v15")),
    ]
    checkpoint = (broker.log_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    assert "newest 0 16" in checkpoint
    # librdkafka reads the log with its holes the same way as kafka-python (consume_all).
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compaction-reader"})
    try:
        consumer.assign([TopicPartition("newest", 0, OFFSET_BEGINNING)])
        got = [m.offset() for m in consumer.consume(num_messages=7, timeout=30)]
        assert got == [13, 14, 15, 16, 17, 18, 19]
    finally:
        consumer.close()


def test_tombstones_are_kept_for_delete_retention_ms_then_removed(broker) -> None:
    create_topic(broker.bootstrap, "tombstones", {**COMPACTED, "delete.retention.ms": 3000})
    produce_each(
        broker.bootstrap,
        "tombstones",
        [(b"ka", b"v01"), (b"kb", b"v01"), (b"ka", None), (b"kb", b"v02")],
    )
    produce_each(broker.bootstrap, "tombstones", [(b"kc", b"c%02d" % i) for i in range(5)])
    wait_for_offsets(broker, "tombstones", [2, 3, 7, 8])  # the tombstone stays, for now
    produce_each(broker.bootstrap, "tombstones", [(b"kc", b"d%02d" % i) for i in range(4)])
    wait_for_offsets(broker, "tombstones", [2, 3, 11, 12])  # a round within the horizon
    time.sleep(3.2)
    produce_each(broker.bootstrap, "tombstones", [(b"kc", b"e%02d" % i) for i in range(4)])
    wait_for_offsets(broker, "tombstones", [3, 15, 16])  # a round past it drops it


def test_keyless_records_are_refused_as_kafka_refuses_them(broker) -> None:
    create_topic(broker.bootstrap, "needs-keys", COMPACTED)
    with RawConnection(broker.bootstrap) as conn:
        response = conn.request(
            produce_request("needs-keys", 0, record_batch([b"a", b"b"]), version=8)
        )
    [topic] = response.responses
    [part] = topic.partition_responses
    message = "Compacted topic cannot accept message without key in topic partition needs-keys-0"
    assert part.error_code == 87  # INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
        (0, message),
        (1, message),
    ]
    assert part.error_message.startswith("One or more records have been rejected due to 2 record")

    errors: list[object] = []
    producer = Producer(ConfluentClient.producer_config(broker.bootstrap))
    producer.produce("needs-keys", value=b"no key", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert [e.name() for e in errors] == ["INVALID_RECORD"]


def test_compressed_batches_stay_in_their_codec(broker) -> None:
    create_topic(broker.bootstrap, "gzipped", {**COMPACTED, "segment.bytes": 1024})
    producer = Producer(
        ConfluentClient.producer_config(broker.bootstrap, "gzip", **{"linger.ms": 20})
    )
    for i in range(400):
        producer.produce("gzipped", key=b"key-%d" % (i % 10), value=b"value-%04d" % i, partition=0)
        if i % 40 == 39:
            producer.flush(30)
    producer.flush(30)

    def compacted() -> bool:
        keys = [key for _, (key, _) in consume_all(broker.bootstrap, "gzipped")]
        return len(keys) < 100

    wait_until(compacted, "gzipped compacted")
    latest = {key: value for _, (key, value) in consume_all(broker.bootstrap, "gzipped")}
    assert latest == {b"key-%d" % k: b"value-%04d" % (390 + k) for k in range(10)}
    codecs = set()
    for segment in (broker.log_dir / "gzipped-0").glob("*.log"):
        data = segment.read_bytes()
        codecs |= {h.compression for _, h in iter_batches(data) if h.record_count}
    assert codecs == {1}  # (a batch compaction empties entirely is a bare, uncompressed header)
